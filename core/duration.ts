const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/**
 * Whole seconds from "3600", "90s", "30m", "24h", "1h30m" or "2d". Undefined when the text is not
 * a duration, so callers can name the bad value in their own words.
 */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const parts = [...trimmed.matchAll(/(\d+)([smhd])/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== trimmed) return undefined;
  return parts.reduce((total, [, amount, unit]) => total + Number(amount) * UNIT_SECONDS[unit], 0);
}
