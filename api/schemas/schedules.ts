import { z } from 'zod';
import { SPRING_FORWARD } from '../../core/schedules/schedule-calendar';
import { fitsBytes } from './common';
import { credentialIds } from './credentials';
import { command, extraVars, optionalAnsibleFields, queue, requireCommandOrPlaybook, shards, timeout, tool } from './run-fields';
import { pipelineSteps } from './steps';

/**
 * The body of `POST /v1/schedules` and `PUT /v1/schedules/{id}` (spec part A 2.6), and the query
 * of `GET /v1/schedules/preview`. A PUT replaces the schedule whole, but for an omitted `name`,
 * which keeps the schedule's (a create without one is given one). `null` reads as omitted, and
 * the read-only fields of a read are accepted and ignored, so a read can be sent back as it is.
 * Whether the rule can be read (cron or rrule, not both; the zone) is core/schedule-calendar.ts's
 * to say, naming the field.
 */

const absent = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

const MAX_CRON_BYTES = 1000;
const MAX_RRULE_BYTES = 16 * 1024;

const rule = {
  cron: z.string({ message: 'cron must be a string' }).min(1, 'cron must not be empty').refine(fitsBytes(MAX_CRON_BYTES), `cron must be at most ${MAX_CRON_BYTES} bytes`),
  rrule: z.string({ message: 'rrule must be a string' }).min(1, 'rrule must not be empty').refine(fitsBytes(MAX_RRULE_BYTES), `rrule must be at most ${MAX_RRULE_BYTES} bytes`),
  timezone: z.string({ message: 'timezone must be an IANA time zone name' }).min(1, 'timezone must not be empty').refine(fitsBytes(255), 'timezone must be at most 255 bytes'),
  spring_forward: z.enum(SPRING_FORWARD, { message: `spring_forward must be one of ${SPRING_FORWARD.join(', ')}` }),
};

/** A run or split a schedule fires: the body of `POST /v1/runs`, ansible fields included. */
const scheduledRun = z.strictObject({
  tool,
  // Required, except for an ansible run naming its `playbook` (refined below).
  command: command.optional(),
  // The ansible tool's playbook, stored inventory and controls (spec part A 2.1, 2.2), as a run takes them.
  ...optionalAnsibleFields,
  extra_vars: extraVars.default({}),
  timeout: timeout.optional(),
  queue: queue.default(''),
  dry_run: z.boolean({ message: 'dry_run must be true or false' }).default(false),
  shards: shards.optional(),
  // Credentials each fire's run is given (spec part A 2.9): the saver needs use on each.
  credentials: credentialIds('credentials').optional(),
}).superRefine((input, ctx) => {
  if (input.tool === 'ansible' && input.shards !== undefined && input.shards >= 2) {
    ctx.addIssue({ code: 'custom', path: ['shards'], message: 'the ansible tool does not split into shards: forks runs hosts in parallel' });
  }
  requireCommandOrPlaybook(input, ctx);
});

/** A pipeline a schedule fires: the body of `POST /v1/pipelines`. */
const scheduledPipeline = z.strictObject({
  steps: pipelineSteps,
  extra_vars: extraVars.default({}),
  timeout: timeout.optional(),
  queue: queue.default(''),
  credentials: credentialIds('credentials').optional(),
});

const READ_ONLY = [
  'id', 'created_by', 'updated_by', 'created_at', 'updated_at', 'next_fire_at', 'last_fire_at', 'last_outcome', 'last_run_id', 'last_error',
  'last_error_at', 'last_skipped',
] as const;

export const scheduleInput = z
  .strictObject({
    // Optional: a schedule sent without one is named by services/schedules.ts defaultScheduleName.
    name: absent(z.string({ message: 'name must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes')),
    cron: absent(rule.cron),
    rrule: absent(rule.rrule),
    timezone: absent(rule.timezone),
    spring_forward: absent(rule.spring_forward),
    enabled: absent(z.boolean({ message: 'enabled must be true or false' })),
    template_id: absent(z.string({ message: 'template_id must be a string' }).min(1, 'template_id must not be empty').refine(fitsBytes(512), 'template_id must be at most 512 bytes')),
    run: absent(scheduledRun),
    pipeline: absent(scheduledPipeline),
    ...Object.fromEntries(READ_ONLY.map((field) => [field, z.unknown().optional()])),
  })
  .superRefine((input, ctx) => {
    const targets = (['template_id', 'run', 'pipeline'] as const).filter((field) => input[field] != null);
    if (targets.length !== 1) {
      ctx.addIssue({
        code: 'custom',
        path: [targets[1] ?? 'template_id'],
        message: 'a schedule fires one thing: send exactly one of template_id, run (a run or split, as POST /v1/runs takes) or pipeline (as POST /v1/pipelines takes)',
      });
    }
  });

export type ScheduleInput = z.output<typeof scheduleInput>;

/** The query of `GET /v1/schedules/preview`. */
export const previewQuery = z.strictObject({
  cron: rule.cron.optional(),
  rrule: rule.rrule.optional(),
  timezone: rule.timezone.optional(),
  spring_forward: rule.spring_forward.optional(),
});
