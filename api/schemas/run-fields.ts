import type { Context } from 'koa';
import { z } from 'zod';
import { badRequest } from '../../core/errors';
import { fitsBytes } from './common';

/**
 * The fields every route that submits, saves or launches runs shares (`POST /v1/runs`,
 * `POST /v1/pipelines`, pipeline and workflow steps, `POST` and `PUT /v1/templates`, a launch),
 * each with one rule and one message wherever it is sent.
 */

/** runs.timeout_seconds is an integer column: a year keeps every timeout well inside it. */
export const MAX_TIMEOUT_SECONDS = 365 * 24 * 3600;
/** A split runs every shard at once on the pool; more than this is a queue, not a split. */
export const MAX_SHARDS = 100;
/** Queue names and Idempotency-Keys are bounded in UTF-8 bytes (spec part B 8). */
const MAX_QUEUE_BYTES = 255;
const MAX_IDEMPOTENCY_KEY_BYTES = 255;

/** A required text field's three faults, each named: missing, not a string, empty. */
const nonEmptyText = (field: string) =>
  z.string({ error: (issue) => (issue.input === undefined ? `${field} is required` : `${field} must be a string`) }).min(1, `${field} must not be empty`);

/** The tool a run or step runs (`bash`, `python`); whether this server runs it is checked by the service. */
export const tool = nonEmptyText('tool');

/** The script a run or step runs. */
export const command = nonEmptyText('command');

/** Extra vars: an object of any JSON values, passed to the tool (docs/api.md, How extra_vars reach the tool). */
export const extraVars = z.record(z.string(), z.unknown(), { message: 'extra_vars must be an object' });

/** Whole seconds a run may take; zero takes the server's --run-timeout. */
export const timeout = z
  .number({ message: 'timeout must be a number of seconds' })
  .int('timeout must be whole seconds')
  .min(0, 'timeout must not be negative')
  .max(MAX_TIMEOUT_SECONDS, `timeout must be at most ${MAX_TIMEOUT_SECONDS} seconds (a year)`);

/** A named queue ("" is the server's own pool); whether the tier allows it is checked by the service. */
export const queue = z.string({ message: 'queue must be a string' }).refine(fitsBytes(MAX_QUEUE_BYTES), `queue must be at most ${MAX_QUEUE_BYTES} bytes`);

/** Two or more split a run into that many shards; zero or one is a plain run. */
export const shards = z
  .number({ message: 'shards must be a whole number' })
  .int('shards must be a whole number')
  .min(0, 'shards must not be negative')
  .max(MAX_SHARDS, `shards must be at most ${MAX_SHARDS}`);

/** The Idempotency-Key header of a submission, at most 255 bytes; absent or empty is none. */
export function idempotencyKey(ctx: Pick<Context, 'get'>): string | undefined {
  const header = ctx.get('idempotency-key');
  if (header === '') return undefined;
  if (!fitsBytes(MAX_IDEMPOTENCY_KEY_BYTES)(header)) {
    throw badRequest(`Idempotency-Key must be at most ${MAX_IDEMPOTENCY_KEY_BYTES} bytes`, { header: 'Idempotency-Key' });
  }
  return header;
}
