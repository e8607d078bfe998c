import type { z } from 'zod';
import { badRequest } from '../core/errors';
import { formatFieldPath } from '../core/field-path';

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

/** Query strings as an object of first values, with repeatable keys gathered into arrays. */
export function queryObject(query: Record<string, string | string[] | undefined>, repeatable: string[] = []) {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    out[key] = repeatable.includes(key) ? ([] as string[]).concat(value) : Array.isArray(value) ? value[0] : value;
  }
  return out;
}
