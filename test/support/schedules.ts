import { DateTime } from 'luxon';

/** An rrule whose DTSTART (UTC form, whole seconds) is a few seconds from now, with the RRULE parts given. */
export function soonRule(parts: string, inSeconds = 3): { rrule: string; start: Date } {
  const start = DateTime.utc().plus({ seconds: inSeconds }).startOf('second');
  return { rrule: `DTSTART:${start.toFormat("yyyyMMdd'T'HHmmss'Z'")}\nRRULE:${parts}`, start: start.toJSDate() };
}

/** Polls until the probe answers something truthy, and answers it; fails naming what it waited for. */
export async function waitUntil<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
