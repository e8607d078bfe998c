import { z } from 'zod';
import { badRequest } from '../core/errors';
import { formatFieldPath } from '../core/field-path';

// PostgreSQL takes the ISO form a Date is sent in for years 1 to 9999 only (not year 0, nor a
// six-digit year), so a time outside that span is refused rather than failing in the query.
const FIRST_STORABLE_TIME = Date.parse('0001-01-01T00:00:00Z');
const LAST_STORABLE_TIME = Date.parse('9999-12-31T23:59:59.999Z');

/** An RFC 3339 time with a zone, as a Date PostgreSQL can hold; `field` names it in errors. */
export function storableTime(field: string) {
  return z.iso
    .datetime({ offset: true, message: `${field} must be an RFC 3339 time` })
    .transform((value) => new Date(value))
    .refine(
      (time) => time.getTime() >= FIRST_STORABLE_TIME && time.getTime() <= LAST_STORABLE_TIME,
      `${field} must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z`,
    );
}

/** Parses input with a zod schema; the first fault becomes a 400 naming the field. */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = formatFieldPath(issue.path);
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys.map((k) => formatFieldPath([...issue.path, k]));
    throw badRequest(`unknown field${keys.length > 1 ? 's' : ''}: ${keys.join(', ')}`, { field: keys[0] });
  }
  throw badRequest(field ? `${field}: ${issue.message}` : issue.message, field ? { field } : {});
}

/**
 * Query strings as an object of first values, with repeatable keys gathered into arrays. Built
 * from entries so that every key, `__proto__` included, is an own key the schema sees (and, being
 * unknown, refuses); assigning `__proto__` would set the prototype instead.
 */
export function queryObject(query: Record<string, string | string[] | undefined>, repeatable: string[] = []): Record<string, unknown> {
  const entries: [string, unknown][] = [];
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    entries.push([key, repeatable.includes(key) ? ([] as string[]).concat(value) : Array.isArray(value) ? value[0] : value]);
  }
  return Object.fromEntries(entries);
}
