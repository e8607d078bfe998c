import { z } from 'zod';
import { fitsBytes } from './common';
import { command, extraVars, queue, shards, timeout, tool } from './run-fields';
import { workflowSteps } from './steps';

/**
 * The body of `POST /v1/templates` and `PUT /v1/templates/{id}` (spec part A 2.3). A PUT replaces
 * the template whole, so both take the same body and an omitted field goes back to its default.
 *
 * - `null` reads as omitted, so a template read (which shows `tool: null` on a workflow template)
 *   can be sent back as it is. The read-only fields of a read (`id`, `kind`, `created_by`,
 *   `created_at`, `updated_at`) are accepted and ignored for the same reason; a PUT whose `id`
 *   names another template is refused.
 * - `survey` is checked by core/survey.ts (strict: an unknown key in a field is refused), `steps`
 *   by api/schemas/steps.ts and core/workflow-graph.ts (a cycle or unknown dependency is refused).
 * - Fields the specification gives templates that this release does not serve are refused with a
 *   400 saying so rather than stored and ignored: `playbook` and the Ansible controls (there is
 *   no ansible tool yet), `inventory_id`, the fact cache, callbacks, and notification targets
 *   (`notifications` accepts only an empty list).
 */

/** Ansible run controls (spec part A 2.2). */
const ANSIBLE_CONTROLS = ['limit', 'tags', 'skip_tags', 'forks', 'verbosity', 'diff_mode'] as const;
/** What a workflow template sets none of (spec part A 2.3); each step names its own. */
const NOT_FOR_WORKFLOW = ['playbook', 'command', 'tool', 'shards', ...ANSIBLE_CONTROLS] as const;
/** Spec fields of a template this release does not serve, with why. */
const NOT_SERVED: Record<string, string> = {
  playbook: 'this server has no ansible tool yet',
  ...Object.fromEntries(ANSIBLE_CONTROLS.map((f) => [f, 'Ansible controls apply to the ansible tool, which this server does not have yet'])),
  inventory_id: 'stored inventories are not served yet',
  use_fact_cache: 'the fact cache is not served yet',
  fact_cache_timeout: 'the fact cache is not served yet',
  allow_callbacks: 'provisioning callbacks are not served yet',
  callback_limit: 'provisioning callbacks are not served yet',
  external_callback: 'provisioning callbacks are not served yet',
};
const READ_ONLY_REFUSED = ['external_job_template_id', 'external_callback_called_at'] as const;

const absent = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

export const templateInput = z
  .strictObject({
    name: z.string({ message: 'name is required and must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes'),
    tool: absent(tool),
    command: absent(command),
    extra_vars: absent(extraVars),
    queue: absent(queue),
    timeout: absent(timeout),
    shards: absent(shards),
    // Checked whole by core/survey.ts parseSurvey, which names the field at fault.
    survey: absent(z.unknown()),
    steps: absent(workflowSteps),
    notifications: absent(z.array(z.unknown(), { message: 'notifications must be a list' })),
    ...Object.fromEntries(Object.keys(NOT_SERVED).map((f) => [f, z.unknown().optional()])),
    ...Object.fromEntries(READ_ONLY_REFUSED.map((f) => [f, z.unknown().optional()])),
    // Read-only fields of a read, ignored.
    id: z.unknown().optional(),
    kind: z.unknown().optional(),
    created_by: z.unknown().optional(),
    created_at: z.unknown().optional(),
    updated_at: z.unknown().optional(),
    // A PUT's answer notes the secret defaults it cleared; sent back, the note is ignored.
    secret_defaults_cleared: z.unknown().optional(),
  })
  .superRefine((input, ctx) => {
    const given = input as Record<string, unknown>;
    const set = (field: string) => given[field] !== undefined && given[field] !== null;
    for (const field of READ_ONLY_REFUSED) {
      if (set(field)) return ctx.addIssue({ code: 'custom', path: [field], message: `${field} is read only: it is set by an import` });
    }
    if (set('steps')) {
      for (const field of NOT_FOR_WORKFLOW) {
        if (set(field)) {
          return ctx.addIssue({
            code: 'custom',
            path: [field],
            message: `a workflow template (one with steps) sets none of ${NOT_FOR_WORKFLOW.join(', ')}; each step names its own tool and command`,
          });
        }
      }
    }
    for (const [field, why] of Object.entries(NOT_SERVED)) {
      if (set(field)) return ctx.addIssue({ code: 'custom', path: [field], message: `${field} is not served yet: ${why}` });
    }
    if (input.notifications && input.notifications.length > 0) {
      return ctx.addIssue({
        code: 'custom',
        path: ['notifications'],
        message: 'notification targets are not served yet: send an empty list or omit notifications',
      });
    }
    if (!set('steps')) {
      if (!set('tool')) return ctx.addIssue({ code: 'custom', path: ['tool'], message: 'tool is required on a job template (one without steps)' });
      if (!set('command')) return ctx.addIssue({ code: 'custom', path: ['command'], message: 'command is required on a job template (one without steps)' });
    }
  });

export type TemplateInput = z.output<typeof templateInput>;

/** The body of `POST /v1/templates/{id}/launch` (spec part A 4.6, 2.4). */
export const launchInput = z.strictObject({
  // Checked against the template's survey by core/survey.ts checkAnswers, naming `answers.<var>`.
  answers: z.unknown().optional(),
  timeout: timeout.optional(),
});

export type LaunchInput = z.output<typeof launchInput>;
