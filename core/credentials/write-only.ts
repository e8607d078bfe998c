/**
 * The one rule for a write-only secret field on edit (a credential's secret, a target's `url` and
 * `key`, a secret survey question's default): reads never show the value, only a mask, so an edit
 * that sends a value meaning "as it is" keeps the stored one sealed as it is, one meaning "none"
 * clears it, and anything else replaces it. Which values mean which differs by field, as the
 * specification sets them; what follows from them is the same everywhere.
 */
export type WriteOnlyEdit<Sealed> =
  | { action: 'keep'; sealed: Sealed }
  | { action: 'replace'; plaintext: string }
  | { action: 'clear' };

export interface WriteOnlyMeanings {
  /** Sent values that keep the stored secret (the mask a read shows, a blank). */
  keeps: (sent: unknown) => boolean;
  /** Sent values that clear it. */
  clears: (sent: unknown) => boolean;
}

/**
 * What an edit does to one write-only field: `stored` is its sealed value, if any. A value that
 * would keep a secret the field does not have keeps nothing (`clear`), unless `onKeepNothing`
 * refuses it.
 */
export function writeOnlyEdit<Sealed>(sent: unknown, stored: Sealed | undefined | null, meanings: WriteOnlyMeanings, onKeepNothing?: () => never): WriteOnlyEdit<Sealed> {
  if (meanings.clears(sent)) return { action: 'clear' };
  if (meanings.keeps(sent)) {
    if (stored !== undefined && stored !== null) return { action: 'keep', sealed: stored };
    if (onKeepNothing) onKeepNothing();
    return { action: 'clear' };
  }
  return { action: 'replace', plaintext: String(sent) };
}
