/**
 * Sizes as operators write them (`2g`, `512m`, `64k`, `1.5g`, `1048576`): a number with an
 * optional binary suffix, k = 1024, m = 1024², g = 1024³, t = 1024⁴, case-insensitive; an optional
 * trailing `b` or `ib` is accepted (`512MiB`). Undefined when the text is not a size.
 */
export function parseByteSize(text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
  if (!match) return undefined;
  const bytes = Number(match[1]) * 1024 ** ' kmgt'.indexOf(match[2].toLowerCase() || ' ');
  return Number.isSafeInteger(Math.floor(bytes)) ? Math.floor(bytes) : undefined;
}

/** A size as a person reads it: whole GiB, MiB or KiB when it is one, else bytes (`64 MiB`, `1536 MiB`, `1000 bytes`). */
export function formatByteSize(bytes: number): string {
  for (const [unit, size] of [['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size} ${unit}`;
  }
  return `${bytes} bytes`;
}
