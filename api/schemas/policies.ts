import { z } from 'zod';
import type { PolicyFields } from '../../store/policies';
import { fitsBytes } from './common';

/**
 * The body of `POST /v1/policies` and `PUT /v1/policies/{id}` (spec part A 2.10). A PUT replaces
 * the policy whole, so both take the same body and an omitted field goes back to its default.
 *
 * A condition that is omitted or null matches anything. An empty string is refused (except for
 * `queue`, where "" names the default queue) rather than read as "match nothing" or "match
 * anything", since either reading would surprise someone.
 */

const EFFECTS = ['require_approval', 'deny', 'exempt'] as const;

/** The fields an exempt policy may carry besides `effect` and `name` (spec part A 2.10). */
const EXEMPT_CONDITIONS = ['tool', 'command_contains', 'inventory_id', 'queue', 'actor', 'account', 'actor_kind'] as const;
/** What only a require-approval or deny policy may ask for. */
const NOT_FOR_EXEMPT = ['require_reason', 'exclude_dry_run', 'require_distinct_approver', 'plan_deletes'] as const;

const condition = (field: string, options: { maxBytes?: number; mayBeEmpty?: boolean } = {}) =>
  z
    .string({ message: `${field} must be a string or null` })
    .refine((value) => options.mayBeEmpty || value !== '', `${field} must not be empty; omit it or send null to match any`)
    .refine((value) => options.maxBytes === undefined || fitsBytes(options.maxBytes)(value), `${field} must be at most ${options.maxBytes} bytes`)
    .nullable()
    .optional();

const flag = (field: string) => z.boolean({ message: `${field} must be true or false` }).optional();

export const policyInput = z
  .strictObject({
    name: z.string({ message: 'name must be a string' }).refine(fitsBytes(255), 'name must be at most 255 bytes').optional(),
    effect: z.enum(EFFECTS, { message: 'effect must be require_approval, deny or exempt' }).default('require_approval'),
    // Bounds past which a condition could never match: token names and usernames are at most
    // 255 bytes, queue names 255 bytes, ids 512 bytes.
    tool: condition('tool', { maxBytes: 255 }),
    command_contains: condition('command_contains'),
    inventory_id: condition('inventory_id', { maxBytes: 512 }),
    // "" is the default queue (the server's own pool), a queue a policy may name like any other.
    queue: condition('queue', { maxBytes: 255, mayBeEmpty: true }),
    actor: condition('actor', { maxBytes: 255 }),
    account: condition('account', { maxBytes: 255 }),
    actor_kind: z.enum(['agent', 'user'], { message: 'actor_kind must be agent or user' }).nullable().optional(),
    require_reason: flag('require_reason'),
    exclude_dry_run: flag('exclude_dry_run'),
    require_distinct_approver: flag('require_distinct_approver'),
    // A plan condition: resource types whose delete (or replace) in a terraform or opentofu plan
    // the policy matches at the plan gate; "*" for any type.
    plan_deletes: z
      .array(
        z
          .string({ message: 'plan_deletes must hold resource type names' })
          .regex(/^(\*|[A-Za-z0-9_-]{1,255})$/, 'plan_deletes holds resource type names (letters, digits, _ and -) or "*"'),
        { message: 'plan_deletes must be a list of resource types' },
      )
      .min(1, 'plan_deletes must name at least one resource type, or "*"; omit it for no plan condition')
      .max(100, 'plan_deletes holds at most 100 resource types')
      .nullable()
      .optional(),
    // Read only: listed so that sending it is refused with its own message, not as an unknown field.
    rego: z.unknown().optional(),
  })
  .superRefine((input, ctx) => {
    if (input.rego !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['rego'],
        message: 'rego is read only: policy-language policies come from the policy file, not from this API',
      });
      return;
    }
    if (input.effect !== 'exempt') return;
    for (const field of NOT_FOR_EXEMPT) {
      if (input[field] !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message: `an exempt policy takes only ${EXEMPT_CONDITIONS.join(', ')}; ${field} applies to require_approval and deny policies`,
        });
        return;
      }
    }
    if (input.actor_kind === 'user') {
      ctx.addIssue({
        code: 'custom',
        path: ['actor_kind'],
        message: 'an exempt policy applies to agent runs only: actor_kind must be agent or omitted',
      });
      return;
    }
    if (input.actor != null && input.account == null) {
      ctx.addIssue({
        code: 'custom',
        path: ['account'],
        message: 'an exempt policy naming actor must also name account, since a token label is not unique across accounts',
      });
    }
  });

export type PolicyInput = z.output<typeof policyInput>;

/** The fields a checked body asks for: omitted conditions are null, omitted flags false (services/policies.ts stores them). */
export function policyFields(input: PolicyInput): PolicyFields {
  return {
    name: input.name ?? '',
    effect: input.effect,
    tool: input.tool ?? null,
    command_contains: input.command_contains ?? null,
    inventory_id: input.inventory_id ?? null,
    queue: input.queue ?? null,
    actor: input.actor ?? null,
    account: input.account ?? null,
    actor_kind: input.actor_kind ?? null,
    require_reason: input.require_reason ?? false,
    exclude_dry_run: input.exclude_dry_run ?? false,
    require_distinct_approver: input.require_distinct_approver ?? false,
    plan_deletes: input.plan_deletes ?? null,
  };
}
