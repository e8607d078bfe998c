/**
 * Web addresses a user hands Cairn (notification destinations, profile links). The URL parser
 * drops tab, CR and LF wherever they stand, so an address holding them would be stored as one text
 * and sent as another, and a CR or LF reaching a header or a log line splits it: such an address is
 * refused as malformed, with every other C0 control character and DEL.
 */

/** True when the text holds a C0 control character (tab, CR, LF, NUL, …) or DEL. */
export function holdsControlCharacters(text: string): boolean {
  return /[\u0000-\u001f\u007f]/.test(text);
}

/** Why the text is not an http or https address; undefined when it is one. */
export function httpUrlFault(text: string): string | undefined {
  if (holdsControlCharacters(text)) return 'must not hold control characters (such as a line break or tab)';
  let parsed: URL;
  try {
    parsed = new URL(text);
  } catch {
    return 'is not a URL';
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must be an https (or http) URL';
  return undefined;
}
