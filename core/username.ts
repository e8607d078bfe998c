import { sha256Hex } from './sha256';

/**
 * A username as Cairn compares it: two names belong to one account when their folded forms are
 * equal. The steps, each for a reason:
 * - NFKC: a composed and a decomposed `é`, full-width letters and ligatures become one spelling;
 * - default-ignorable code points dropped: a variation selector or joiner is invisible;
 * - upper case, then lower case: a full case mapping, so `ß` and `SS`, a final `ς` and `σ`, `ſ` and
 *   `s` fold together where a plain toLowerCase keeps them apart (toUpperCase and toLowerCase are
 *   locale-independent, so every server folds alike);
 * - NFKC again, since a case mapping can leave a sequence that composes differently.
 * This is close to Unicode's NFKC_Casefold and errs toward merging (a dotless `ı` folds with `i`).
 * Letters of different scripts that only look alike (Latin `a`, Cyrillic `а`) stay distinct.
 */
export function foldUsername(username: string): string {
  const compatible = username.normalize('NFKC').replace(/\p{Default_Ignorable_Code_Point}/gu, '');
  return compatible.toUpperCase().toLowerCase().normalize('NFKC');
}

/**
 * The key a username is unique and looked up by: hex SHA-256 of its folded form. Hashed so that an
 * index entry stays small however far a name expands under NFKC (one character can become 18),
 * and so that counters keyed by it (failed sign-ins) hold no typed name.
 */
export function usernameKey(username: string): string {
  return sha256Hex(foldUsername(username));
}
