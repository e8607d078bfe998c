import type { Context } from 'koa';
import { z } from 'zod';
import { hostPatternFault, type AnsibleInput } from '../../core/ansible/ansible-spec';
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

/**
 * The ansible tool's fields (spec part A 2.1, 2.2), shared by run submissions and templates:
 * `playbook` (a path in the run's work dir or project), `inventory_id` (a stored inventory),
 * `inventory` (a path on the server, read inside the sandbox) and the controls. They apply to the
 * ansible tool only (services/launch.ts ansibleSpecOf drops them for other tools).
 */
const MAX_PATTERN_BYTES = 64 * 1024;

/** A host pattern a user gives (`limit`, a smart inventory's `host_filter`): none that makes Ansible read a file (core/ansible-spec.ts). */
export const hostPatternCheck = (field: string) => (pattern: string, ctx: z.RefinementCtx) => {
  const fault = hostPatternFault(pattern);
  if (fault) ctx.addIssue({ code: 'custom', message: `${field} ${fault}` });
};

const tagList = (field: string) =>
  z
    .array(
      z
        .string({ message: `${field} must be a list of strings` })
        .min(1, `${field} must not hold an empty tag`)
        .refine((t) => !t.includes(','), `${field}: a tag must not contain a comma`),
      { message: `${field} must be a list of strings` },
    )
    .max(1000, `${field} holds at most 1000 tags`);
export const ansibleFields = {
  playbook: z
    .string({ message: 'playbook must be a string' })
    .min(1, 'playbook must not be empty')
    .refine(fitsBytes(4096), 'playbook must be at most 4096 bytes'),
  inventory_id: z.string({ message: 'inventory_id must be a string' }).min(1, 'inventory_id must not be empty').refine(fitsBytes(512), 'inventory_id must be at most 512 bytes'),
  inventory: z.string({ message: 'inventory must be a string' }).min(1, 'inventory must not be empty').refine(fitsBytes(4096), 'inventory must be at most 4096 bytes'),
  limit: z
    .string({ message: 'limit must be a string' })
    .refine(fitsBytes(MAX_PATTERN_BYTES), `limit must be at most ${MAX_PATTERN_BYTES} bytes`)
    .superRefine(hostPatternCheck('limit')),
  tags: tagList('tags'),
  skip_tags: tagList('skip_tags'),
  forks: z.number({ message: 'forks must be a whole number' }).int('forks must be a whole number').min(0, 'forks must not be negative').max(1000, 'forks must be at most 1000'),
  // Above 4 is clamped to 4 (spec part A 2.2).
  verbosity: z.number({ message: 'verbosity must be a whole number' }).int('verbosity must be a whole number').min(0, 'verbosity must not be negative'),
  diff_mode: z.boolean({ message: 'diff_mode must be true or false' }),
};

/** The ansible fields, each optional: what a run submission, a pipeline or workflow step and a schedule's run take. */
export const optionalAnsibleFields = Object.fromEntries(Object.entries(ansibleFields).map(([k, v]) => [k, v.optional()])) as {
  [K in keyof typeof ansibleFields]: z.ZodOptional<(typeof ansibleFields)[K]>;
};

/** The ansible fields of a parsed body, for core/ansible-spec.ts ansibleSpecOf (which keeps them for the ansible tool only). */
export function ansibleInputOf(input: AnsibleInput): AnsibleInput {
  const { playbook, inventory_id, inventory, limit, tags, skip_tags, forks, verbosity, diff_mode } = input;
  return { playbook, inventory_id, inventory, limit, tags, skip_tags, forks, verbosity, diff_mode };
}

/**
 * What a run or step executes: `command` (the script; for ansible the playbook itself), or for an
 * ansible one `playbook` (a path) instead. A refinement, so the missing field is named.
 */
export function requireCommandOrPlaybook(input: { tool?: string; command?: string; playbook?: string }, ctx: z.RefinementCtx): void {
  if (input.command !== undefined) return;
  if (input.tool === 'ansible') {
    if (input.playbook === undefined) ctx.addIssue({ code: 'custom', path: ['playbook'], message: 'an ansible run needs playbook (a path) or command (the playbook itself)' });
  } else {
    ctx.addIssue({ code: 'custom', path: ['command'], message: 'command is required' });
  }
}

/** The most a change label may be, in UTF-8 bytes. */
const MAX_CHANGE_BYTES = 255;

/**
 * A run's change label (spec part A 2.1, 2.13): runs carrying one value are one change
 * (`GET /v1/changes`). Sent as `change` on `POST /v1/runs` and a template launch.
 */
export const changeLabel = z
  .string({ message: 'change must be a string' })
  .min(1, 'change must not be empty')
  .refine(fitsBytes(MAX_CHANGE_BYTES), `change must be at most ${MAX_CHANGE_BYTES} bytes`)
  .refine((value) => !/[\u0000-\u001f\u007f]/.test(value), 'change must not hold control characters');
