import { z } from 'zod';
import { namedId } from './access';
import { fitsBytes } from './common';
import { ansibleFields, changeLabel, command, extraVars, queue, shards, timeout, tool } from './run-fields';
import { workflowSteps } from './steps';
import { notificationEntries } from './notifications';
import { credentialIds } from './credentials';

/**
 * The body of `POST /v1/templates` and `PUT /v1/templates/{id}` (spec part A 2.3). A PUT replaces
 * the template whole, so both take the same body and an omitted field goes back to its default.
 *
 * - `null` reads as omitted, so a template read (which shows `tool: null` on a workflow template)
 *   can be sent back as it is. The read-only fields of a read (`id`, `kind`, `owner_id`,
 *   `created_by`, `created_at`, `updated_at`) are accepted and ignored for the same reason; a PUT whose `id`
 *   names another template is refused.
 * - `survey` is checked by core/survey.ts (strict: an unknown key in a field is refused), `steps`
 *   by api/schemas/steps.ts and core/workflow-graph.ts (a cycle or unknown dependency is refused).
 * - Fields the specification gives templates that this release does not serve are refused with a
 *   400 saying so rather than stored and ignored (none at present). `use_fact_cache` and
 *   `fact_cache_timeout` need `inventory_id` and mean unchanged when omitted on update
 *   (services/facts.ts). `playbook` and the Ansible
 *   controls are kept for an ansible template only (other tools ignore them, core/ansible-spec.ts);
 *   `inventory_id` needs use on the inventory. `allow_callbacks`, `callback_limit`
 *   and `external_callback` mean unchanged when omitted on update (services/callbacks.ts).
 * - `notifications` entries (spec part A 2.11) are the template's own channels; a read shows their
 *   URLs and keys masked, and sending the mask back keeps the stored value.
 */

/** Ansible run controls (spec part A 2.2). */
const ANSIBLE_CONTROLS = ['limit', 'tags', 'skip_tags', 'forks', 'verbosity', 'diff_mode'] as const;
/** What a workflow template sets none of (spec part A 2.3); each step names its own. */
const NOT_FOR_WORKFLOW = ['playbook', 'command', 'tool', 'shards', ...ANSIBLE_CONTROLS] as const;
/** Spec fields of a template this release does not serve, with why. */
const NOT_SERVED: Record<string, string> = {
};
const READ_ONLY_REFUSED = ['external_job_template_id', 'external_callback_called_at'] as const;
/** What a workflow template sets none of beside NOT_FOR_WORKFLOW: its steps run where each step says. */
const NOT_FOR_WORKFLOW_RUNS = ['project_id'] as const;

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
    // Each entry checked for its kind's fields by services/notifications.ts storedEntries.
    notifications: absent(notificationEntries),
    // The organization that owns it, whose admins then manage it; null or omitted is none.
    org_id: absent(namedId('org_id')),
    // A stored inventory (needs use on it), and the ansible tool's playbook and controls (spec part A 2.2, 2.3).
    inventory_id: absent(ansibleFields.inventory_id),
    playbook: absent(ansibleFields.playbook),
    ...(Object.fromEntries(ANSIBLE_CONTROLS.map((f) => [f, absent(ansibleFields[f])])) as {
      [K in (typeof ANSIBLE_CONTROLS)[number]]: z.ZodOptional<z.ZodNullable<(typeof ansibleFields)[K]>>;
    }),
    // Credential ids (spec part A 4.6): every launch uses `credentials`; a launch may add any of `selectable_credentials`.
    credentials: absent(credentialIds('credentials')),
    selectable_credentials: absent(credentialIds('selectable_credentials')),
    // A git project its runs work in (spec part A 4.5); needs use on it, checked in services/callbacks.ts.
    project_id: absent(namedId('project_id')),
    // Provisioning callbacks (spec part A 2.3); on update, omitted or null means unchanged.
    allow_callbacks: absent(z.boolean({ message: 'allow_callbacks must be true or false' })),
    callback_limit: absent(z.enum(['intersect', 'replace'], { message: 'callback_limit must be intersect or replace' })),
    external_callback: absent(z.boolean({ message: 'external_callback must be true or false' })),
    // The fact cache (spec part A 2.3; services/facts.ts); needs inventory_id; on update, omitted or null means unchanged.
    use_fact_cache: absent(z.boolean({ message: 'use_fact_cache must be true or false' })),
    fact_cache_timeout: absent(
      z.number({ message: 'fact_cache_timeout must be a whole number of seconds' }).int('fact_cache_timeout must be a whole number of seconds').min(0, 'fact_cache_timeout must not be negative').max(2147483647, 'fact_cache_timeout must be at most 2147483647'),
    ),
    ...Object.fromEntries(Object.keys(NOT_SERVED).map((f) => [f, z.unknown().optional()])),
    ...Object.fromEntries(READ_ONLY_REFUSED.map((f) => [f, z.unknown().optional()])),
    // Read-only fields of a read, ignored.
    id: z.unknown().optional(),
    kind: z.unknown().optional(),
    owner_id: z.unknown().optional(),
    created_by: z.unknown().optional(),
    created_at: z.unknown().optional(),
    updated_at: z.unknown().optional(),
    // A PUT's answer notes the secret defaults it cleared; sent back, the note is ignored.
    secret_defaults_cleared: z.unknown().optional(),
  })
  .superRefine((input, ctx) => {
    const given = input as Record<string, unknown>;
    const set = (field: string) => given[field] !== undefined && given[field] !== null;
    // A control at its empty value (as a read shows an unset one) sets nothing.
    const setControl = (field: string) =>
      set(field) && given[field] !== '' && given[field] !== 0 && given[field] !== false && !(Array.isArray(given[field]) && given[field].length === 0);
    for (const field of READ_ONLY_REFUSED) {
      if (set(field)) return ctx.addIssue({ code: 'custom', path: [field], message: `${field} is read only: it is set by an import` });
    }
    if (set('steps')) {
      for (const field of NOT_FOR_WORKFLOW_RUNS) {
        if (set(field)) return ctx.addIssue({ code: 'custom', path: [field], message: `a workflow template (one with steps) sets no ${field}: it applies to a job template` });
      }
      for (const field of NOT_FOR_WORKFLOW) {
        if (setControl(field)) {
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
    if (!set('steps')) {
      if (given.tool === 'ansible' && typeof given.shards === 'number' && given.shards >= 2) {
        return ctx.addIssue({ code: 'custom', path: ['shards'], message: 'the ansible tool does not split into shards: forks runs hosts in parallel' });
      }
      if (!set('tool')) return ctx.addIssue({ code: 'custom', path: ['tool'], message: 'tool is required on a job template (one without steps)' });
      if (!set('command') && !(given.tool === 'ansible' && set('playbook'))) {
        const message =
          given.tool === 'ansible'
            ? 'an ansible job template needs playbook (a path) or command (the playbook itself)'
            : 'command is required on a job template (one without steps)';
        return ctx.addIssue({ code: 'custom', path: ['command'], message });
      }
    }
  });

export type TemplateInput = z.output<typeof templateInput>;

/** The body of `POST /v1/templates/{id}/launch` (spec part A 4.6, 2.4). */
export const launchInput = z.strictObject({
  // Checked against the template's survey by core/survey.ts checkAnswers, naming `answers.<var>`.
  answers: z.unknown().optional(),
  timeout: timeout.optional(),
  // Credentials to add, each one of the template's selectable_credentials; checked in services/launch.ts.
  credentials: credentialIds('credentials').optional(),
  // The change label the run carries (spec part A 2.1, 2.13; services/changes.ts).
  change: changeLabel.optional(),
  // A dry run of a job template: a terraform or opentofu plan that applies nothing (a drift check), a bash syntax check.
  dry_run: z.boolean({ message: 'dry_run must be true or false' }).optional(),
});

export type LaunchInput = z.output<typeof launchInput>;
