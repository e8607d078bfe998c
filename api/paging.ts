import type { Context } from 'koa';
import { z } from 'zod';
import { parseInput, queryObject } from './validate';
import { fitsBytes } from './schemas/common';

/** `limit` within its bound (a value past the bound is a 400, never silently cut) and `offset`. */
export function pageQuery(defaultLimit: number, maxLimit: number) {
  return {
    limit: z.coerce
      .number({ message: 'limit must be a whole number' })
      .int('limit must be a whole number')
      .min(1, 'limit must be at least 1')
      .max(maxLimit, `limit must be at most ${maxLimit}`)
      .default(defaultLimit),
    offset: z.coerce.number({ message: 'offset must be a whole number' }).int('offset must be a whole number').min(0, 'offset must not be negative').default(0),
  };
}

/** The list envelope every list answers with: rows under a name, `count`, `total`, `has_more`, `next_offset`. */
export function listEnvelope<T>(name: string, rows: T[], total: number, offset: number) {
  const hasMore = offset + rows.length < total;
  return { [name]: rows, count: rows.length, total, has_more: hasMore, next_offset: hasMore ? offset + rows.length : null };
}

/** The configuration lists' paging (part B 8): `limit` default and maximum 1000, `offset`, repeatable `id`. */
export const configListQuery = z.strictObject({
  ...pageQuery(1000, 1000),
  id: z.array(z.string().refine(fitsBytes(512), 'id must be at most 512 bytes')).optional(),
});

export interface ConfigPage {
  limit: number;
  offset: number;
  ids?: string[];
}

/** Answers a configuration list (users, tokens, and later templates, schedules…) in the envelope. */
export async function answerConfigList<T, V>(
  ctx: Context,
  name: string,
  fetch: (page: ConfigPage) => Promise<{ rows: T[]; total: number }>,
  view: (row: T) => V,
): Promise<void> {
  const query = parseInput(configListQuery, queryObject(ctx.query, ['id']));
  const { rows, total } = await fetch({ limit: query.limit, offset: query.offset, ids: query.id });
  ctx.body = listEnvelope(name, rows.map(view), total, query.offset);
}
