import { WorkflowNotFoundError } from '@temporalio/client';
import { DomainError, badRequest, notFound, statusOf } from '../../core/errors';
import { newId } from '../../core/ids';
import type { FollowerAction } from '../../core/access/access';
import { CalendarError, scheduleCalendar, type CalendarRule, type ScheduleCalendar, type SpringForward } from '../../core/schedules/schedule-calendar';
import type { StepDefinition } from '../../core/runs/workflow-graph';
import { findRunByIdempotencyKey } from '../../store/runs';
import {
  deleteSchedule,
  findUnfinishedRunFrom,
  getSchedule,
  getScheduleForUpdate,
  insertSchedule,
  recordFire,
  setNextFire,
  updateSchedule,
  type Schedule,
  type ScheduleFields,
  type ScheduleSubmission,
} from '../../store/schedules';
import { getTemplate, type Template } from '../../store/templates';
import { oweEffects } from '../../store/outbox';
import type { Db } from '../../store/db';
import { actorKindOf, type Caller } from '../../store/tokens';
import { requireRunnableTool } from '../../tools/registry';
import { scheduleTaskQueue } from '../../workflows/ids';
import { SCHEDULE_WORKFLOW, scheduleChanged, scheduleWorkflowId, type ScheduleWorkflowInput } from '../../workflows/definitions';
import { requireAccess, requireFollowerAccess, requireQueueUse } from '../access/access';
import { entryFields, recordMutation, serviceOrigin, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { requireCredentialsUsable } from '../credentials';
import { carryOut } from '../effects';
import { requireInventoryUse } from '../ansible/inventories';
import { hostlessFireReason, submissionFireHosts, templateFireHosts, type FireHosts } from '../ansible/hostless-fires';
import { firingOwner, launchUnattended, unattendedCaller, UnattendedSurveyRefusal, type UnattendedFire } from '../runs/launch';
import { deleteWithAttachments } from '../notifications/notifications';
import { handOffSkippedFireNotice, recordSkippedFireNotice } from '../notifications/skipped-fire-notices';
import { requireQueueAllowed } from '../access/licensing';
import { submitRun, type RunRequest, type StartLater } from '../runs/runs';

/**
 * Schedules (spec part A 2.6, 4.3): saving them, what each fire does, and handing them to their
 * workflow. Operators write them, every role reads them. The calendar is core/schedule-calendar.ts;
 * the workflow that sleeps to each fire is workflows/schedule.ts, through activities/schedules.ts.
 *
 * - A schedule fires as the account that saved it last (`updated_by`), through a token standing
 *   for the schedule, of the kind that account saved it with (an agent's schedule fires runs held
 *   like the agent's own). So editing another account's schedule makes it fire as the editor,
 *   never with the rights of the account that made it.
 * - A fire's identity is the schedule and the time it fires at: its run is submitted with the
 *   Idempotency-Key `schedule/<id>/<time>`, unique to the schedule whichever account it fires as
 *   (store/runs.ts IdempotencyScope), and what the fire did is recorded only once (`recordFire`),
 *   so no restart, retry or edit meanwhile makes a fire twice.
 */

/** What a create or update asks for, parsed by the route. */
export interface ScheduleDraft {
  /** Null: an update keeps the schedule's name, a create takes defaultScheduleName. */
  name: string | null;
  cron: string | null;
  rrule: string | null;
  timezone: string | null;
  spring_forward: SpringForward | null;
  enabled: boolean;
  template_id: string | null;
  submission: ScheduleSubmission | null;
}

/** The zone this server runs in: where a schedule naming none is read (spec part A 2.6). */
export function serverZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** The calendar of a rule sent to the API; a rule that cannot be read is a 400 naming the field. */
export function calendarOf(rule: CalendarRule, fallbackZone: string): ScheduleCalendar {
  try {
    return scheduleCalendar(rule, fallbackZone);
  } catch (err) {
    if (err instanceof CalendarError) throw badRequest(err.message, { field: err.field });
    throw err;
  }
}

/** A stored schedule's calendar: one stored without a zone by an earlier release is read in UTC (spec part A 9.4). */
function storedCalendar(schedule: Schedule): ScheduleCalendar {
  return scheduleCalendar({ ...schedule, timezone: schedule.timezone ?? 'UTC' }, 'UTC');
}

/** Fire times a preview shows. */
const PREVIEW_FIRES = 5;

/** `GET /v1/schedules/preview`: the next fires of a rule, nothing saved. */
export function previewSchedule(rule: CalendarRule, now = new Date()) {
  const calendar = calendarOf(rule, serverZone());
  const next = calendar.firesAfter(now, PREVIEW_FIRES);
  return {
    next: next.map((fire) => fire.toISOString()),
    timezone: calendar.zone,
    spring_forward: calendar.springForward,
    spring_gap: next.length ? calendar.springGap(now) : null,
    finished: next.length < PREVIEW_FIRES,
  };
}

/**
 * The fields a save stores: the zone and `spring_forward` written as the calendar read them (a
 * schedule naming no zone gets `fallbackZone`'s name), refused with 400 when the rule has no fire
 * left after now or what it fires cannot be fired by the saver.
 */
async function fieldsOf(ctx: ServerContext, caller: Caller, draft: ScheduleDraft, fallbackZone: string, current?: Schedule): Promise<ScheduleFields> {
  const calendar = calendarOf(draft, fallbackZone);
  if (calendar.firesAfter(new Date(), 1).length === 0) {
    const field = draft.cron !== null ? 'cron' : 'rrule';
    throw badRequest(`${field}: the rule has no fire left after now`, { field });
  }
  await requireFireable(ctx, caller, draft);
  const templateName = draft.template_id !== null ? (await getTemplate(ctx.sql, draft.template_id))?.name : undefined;
  return {
    name: draft.name ?? current?.name ?? defaultScheduleName(draft, templateName),
    cron: draft.cron,
    rrule: draft.rrule,
    timezone: calendar.zone,
    spring_forward: calendar.springForward,
    enabled: draft.enabled,
    template_id: draft.template_id,
    submission: draft.submission,
    owner_account_id: caller.account.id,
    owner_actor_kind: actorKindOf(caller),
    updated_by: caller.account.username,
  };
}

/** The most bytes a schedule's name holds. */
const NAME_BYTES = 255;

/**
 * The name of a schedule created without one: what it fires (the template's name, `<tool> run`,
 * `<tool> split` or `pipeline`), a comma, and its rule (`cron <expression>`, or `rrule` and the
 * first RRULE line's value), cut to 255 bytes with a closing `…` when longer.
 */
export function defaultScheduleName(draft: Pick<ScheduleDraft, 'cron' | 'rrule' | 'template_id' | 'submission'>, templateName: string | undefined): string {
  const submission = draft.submission;
  const what =
    draft.template_id !== null
      ? (templateName ?? `template ${draft.template_id}`)
      : submission!.kind === 'pipeline'
        ? 'pipeline'
        : `${String(submission!.body.tool)} ${submission!.body.shards != null ? 'split' : 'run'}`;
  const rruleLine = draft.rrule?.split(/\s+/).find((line) => /^RRULE[:;]/i.test(line));
  const rule = draft.cron !== null ? `cron ${draft.cron.trim()}` : `rrule ${rruleLine?.slice(rruleLine.indexOf(':') + 1) ?? ''}`;
  const name = `${what}, ${rule}`;
  if (Buffer.byteLength(name) <= NAME_BYTES) return name;
  let cut = '';
  for (const char of name) {
    if (Buffer.byteLength(cut + char + '…') > NAME_BYTES) break;
    cut += char;
  }
  return `${cut}…`;
}

/**
 * The saver may launch the template, or the submission's tools run here and the saver may use its
 * queue and each credential it names (400 or 403 naming `run.credentials[i]` or `pipeline.credentials[i]`).
 */
async function requireFireable(ctx: ServerContext, caller: Caller, draft: ScheduleDraft): Promise<void> {
  if (draft.template_id !== null) {
    // Its fires launch as the saver, who must be able to launch the template now (and again at each fire).
    await requireAccess(ctx.sql, caller, draft.template_id, 'use', { action: `scheduling template ${draft.template_id}`, field: 'template_id' });
    return;
  }
  const { kind, request } = draft.submission!;
  const { queue, tool, steps, credentials } = request as unknown as RunRequest;
  try {
    requireQueueAllowed(queue, ctx.licensing.tier);
    await requireQueueUse(ctx.sql, caller, queue ?? '');
  } catch (err) {
    if (err instanceof DomainError) throw new DomainError(err.code, err.message, { ...err.details, field: `${kind}.queue` });
    throw err;
  }
  const tools = kind === 'pipeline' ? (steps as StepDefinition[]).map((step, i) => ({ tool: step.tool!, field: `pipeline.steps[${i}].tool` })) : [{ tool, field: 'run.tool' }];
  for (const { tool: name, field } of tools) {
    try {
      await requireRunnableTool(name);
    } catch (err) {
      if (err instanceof DomainError) throw badRequest(err.message, { field });
      throw err;
    }
  }
  // The stored inventories its fires run against: the saver may use each, as submitting the run would ask.
  const inventories =
    kind === 'pipeline'
      ? (steps as StepDefinition[]).map((step, i) => ({ id: step.inventory_id, field: `pipeline.steps[${i}].inventory_id` }))
      : [{ id: (request as unknown as RunRequest).spec.inventory_id, field: 'run.inventory_id' }];
  for (const { id, field } of inventories) if (id) await requireInventoryUse(ctx.sql, caller, id, field);
  await requireCredentialsUsable(ctx.sql, caller, credentials ?? [], `${kind}.credentials`);
}

/** What a schedule's chain entries record of it: everything it is, nothing of what its fires did. */
function auditedFields(schedule: Schedule): Record<string, unknown> {
  const { name, cron, rrule, timezone, spring_forward, enabled, template_id, submission, owner_account_id, owner_actor_kind } = schedule;
  return { name, cron, rrule, timezone, spring_forward, enabled, template_id, submission: submission?.body ?? null, submission_kind: submission?.kind ?? null, owner_account_id, owner_actor_kind };
}

export async function createSchedule(ctx: ServerContext, caller: Caller, origin: AuditOrigin, draft: ScheduleDraft): Promise<Schedule> {
  const fields = await fieldsOf(ctx, caller, draft, serverZone());
  const { schedule, effects } = await recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const created = await insertSchedule(tx, newId('sch'), fields, caller.account.username);
    entry.body = { kind: 'schedule.created', schedule_id: created.id, schedule: auditedFields(created) };
    return { schedule: created, effects: await oweHandOff(tx, created.id) };
  });
  await handOff(ctx, schedule.id, effects);
  return schedule;
}

/**
 * Replaces a schedule whole, as its next fires will see it. An update naming no zone keeps the
 * schedule's (unless its rrule's DTSTART names one); what the schedule's fires did is kept.
 */
export async function replaceSchedule(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string, draft: ScheduleDraft): Promise<Schedule> {
  const current = await readableSchedule(ctx, caller, id, 'change');
  const fields = await fieldsOf(ctx, caller, draft, current.timezone ?? 'UTC', current);
  const { schedule, effects } = await recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const previous = await getScheduleForUpdate(tx, id);
    if (!previous) throw notFound(`schedule ${id}`);
    const updated = (await updateSchedule(tx, id, fields))!;
    entry.body = { kind: 'schedule.updated', schedule_id: id, schedule: auditedFields(updated), previous: auditedFields(previous) };
    return { schedule: updated, effects: await oweHandOff(tx, id) };
  });
  await handOff(ctx, schedule.id, effects);
  return schedule;
}

/** Deletes a schedule, then cancels its workflow (the hand-off of a schedule that is gone). */
export async function removeSchedule(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string): Promise<void> {
  await readableSchedule(ctx, caller, id, 'change');
  const effects = await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getScheduleForUpdate(tx, id);
    if (!current) throw notFound(`schedule ${id}`);
    // Its notification attachments go with it, as its chain entry's path states (spec part A 4.16).
    const { attachments } = await deleteWithAttachments(tx, origin, 'schedule', id, async () => {
      if (!(await deleteSchedule(tx, id))) throw notFound(`schedule ${id}`);
    });
    entry.body = { kind: 'schedule.deleted', schedule_id: id, schedule: auditedFields(current), notification_attachments: attachments };
    return oweHandOff(tx, id);
  });
  await handOff(ctx, id, effects);
}

/**
 * The schedule, when the caller may read it (or, for `change`, edit and delete it): a schedule
 * follows the template it fires as a run does (core/access.ts followerAllows); one firing a run
 * spec is its owner's and the admins'. 404 alike for a missing schedule and one the caller may not read.
 */
export async function readableSchedule(ctx: ServerContext, caller: Caller, id: string, action: FollowerAction = 'read'): Promise<Schedule> {
  const schedule = await getSchedule(ctx.sql, id);
  if (!schedule) throw notFound(`schedule ${id}`);
  await requireFollowerAccess(ctx.sql, caller, { noun: `schedule ${id}`, ownerId: schedule.owner_account_id, templateId: schedule.template_id }, action);
  return schedule;
}

/** The hand-off a schedule's save or delete owes its workflow (`schedule.hand_off`, store/outbox.ts). */
const oweHandOff = (tx: Db, scheduleId: string) => oweEffects(tx, [{ effect: 'schedule.hand_off', subject: scheduleId }], true);

/** Hands a saved or deleted schedule to its workflow just after the commit; a failure is left to the outbox dispatcher. */
async function handOff(ctx: ServerContext, scheduleId: string, effects: string[]): Promise<void> {
  await carryOut(ctx, effects, 'handing a schedule to its workflow', () => deliverSchedule(ctx, scheduleId));
}

/**
 * Tells the schedule's workflow of its latest save: an enabled schedule's is started if it is not
 * running (workflow id = schedule id, so there is never more than one) and signalled to plan
 * again; a disabled schedule's is signalled, and ends; a deleted schedule's is cancelled. Safe to
 * repeat.
 */
export async function deliverSchedule(ctx: ServerContext, scheduleId: string): Promise<void> {
  if (ctx.faults.fire('schedule-handoff-once')) throw new Error('injected fault: schedule hand-off failed');
  const workflowId = scheduleWorkflowId(scheduleId);
  const schedule = await getSchedule(ctx.sql, scheduleId);
  if (!schedule) {
    try {
      await ctx.temporal.workflow.getHandle(workflowId).cancel();
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    return;
  }
  if (schedule.enabled) {
    await ctx.temporal.workflow.signalWithStart<(input: ScheduleWorkflowInput) => Promise<void>, []>(SCHEDULE_WORKFLOW, {
      workflowId,
      taskQueue: scheduleTaskQueue(ctx.config.poolQueue),
      args: [{ scheduleId: schedule.id }],
      signal: scheduleChanged,
      signalArgs: [],
      // A schedule whose workflow ended (disabled, or its rule ran out) gets a new one when enabled.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
    });
  } else {
    try {
      await ctx.temporal.workflow.getHandle(workflowId).signal(scheduleChanged);
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
  }
}

/** The next fire a schedule's workflow sleeps to, under the revision it was planned with. */
export interface FirePlan {
  /** Epoch milliseconds. */
  fireAt: number;
  revision: number;
}

/**
 * Plans a schedule's next fire: the first after both the last fire handled (`after`) and now, so a
 * workflow that wakes late never fires the times it slept through (the catch-up rule in
 * docs/architecture.md); before any fire, the first after the save (planFrom). None when the
 * schedule is gone, disabled or its rule has run out.
 */
export async function planNextFire(ctx: ServerContext, scheduleId: string, after: number | null): Promise<FirePlan | null> {
  return planFireOf(ctx, await getSchedule(ctx.sql, scheduleId), after);
}

/**
 * planNextFire from a schedule already read (a fire's own read, so a fire reads its schedule
 * once). Safe when a save lands after that read: the plan carries the revision it was made
 * under, the save signals the workflow to plan again, and a fire of an older revision is made
 * only if the saved rule has that time.
 */
async function planFireOf(ctx: ServerContext, schedule: Schedule | undefined, after: number | null): Promise<FirePlan | null> {
  if (!schedule || !schedule.enabled) return null;
  const scheduleId = schedule.id;
  let next: Date | undefined;
  try {
    [next] = storedCalendar(schedule).firesAfter(new Date(planFrom(schedule, after)), 1);
  } catch (err) {
    // A rule saved by an earlier release that this one cannot read (or a zone the runtime no longer knows).
    if (!(err instanceof CalendarError)) throw err;
    await recordFire(ctx.sql, scheduleId, new Date(), { kind: 'did_not_run', error: `the schedule’s rule cannot be read: ${err.message}` });
  }
  await setNextFire(ctx.sql, scheduleId, schedule.revision, next ?? null);
  return next ? { fireAt: next.getTime(), revision: schedule.revision } : null;
}

/**
 * Where a plan starts: after the last fire handled and now, so a workflow that wakes late never
 * fires the times it slept through. A workflow that has handled no fire yet (a new schedule, or
 * one enabled again) plans from the save instead: when a busy Temporal or a failed hand-off
 * delays its first plan past the first time after the save, that time is fired once, late, as a
 * timer due while no server ran is, rather than dropped.
 */
function planFrom(schedule: Schedule, after: number | null): number {
  if (after !== null) return Math.max(after, Date.now());
  return Math.max(schedule.updated_at.getTime(), schedule.last_fire_at?.getTime() ?? 0);
}

/** Whether the schedule's rule, as stored now, fires at this time. */
function isFireOf(schedule: Schedule, fireAt: Date): boolean {
  try {
    return storedCalendar(schedule).firesAfter(new Date(fireAt.getTime() - 1), 1)[0]?.getTime() === fireAt.getTime();
  } catch (err) {
    if (err instanceof CalendarError) return false;
    throw err;
  }
}

/** What a fire did; `stale` when it was not made: the schedule is gone or disabled, or no longer has that time. */
export type FireOutcome = 'started' | 'did_not_run' | 'skipped' | 'stale';

/** The Idempotency-Key a fire submits its run with: the schedule and the time it fires at. */
export const fireKey = (scheduleId: string, fireAt: Date) => `schedule/${scheduleId}/${fireAt.toISOString()}`;

/**
 * One fire (spec part A 2.4 rules 5-6, 2.6, 3.3), through the approval gate like any launch:
 *
 * 0. A schedule gone or disabled, or saved since the fire was planned and no longer firing at
 *    that time, is not fired (`stale`).
 * 1. A fire already recorded, or whose run already exists (its key), is not made again.
 * 2. While a run the schedule started still goes (held, pending or running), the fire is skipped
 *    and recorded in `last_skipped` with why, which run, since when and how many in a row. Not an
 *    audit chain entry: a skip changes nothing, and a minutely schedule behind a long run would
 *    write one every minute. A fire whose stored inventory, its limit applied, matches no host is
 *    skipped alike (spec part A 2.11 `skipped`), with no run, and announced to the notification
 *    targets that hear it as `schedule.skipped`, in the same transaction (spec part B 6.2 rule 2).
 * 3. Otherwise the template is launched unattended, or the run, split or pipeline submitted, as
 *    the schedule's owner. A survey with a required question and no default refuses the fire:
 *    `last_error` and the chain entry `SCHEDULE /schedules/{id}/refused/survey/{questions}`, in one
 *    transaction. Any other refusal (the template deleted, a deny policy, a configuration error,
 *    a credential not ready or no longer usable by the owner) is recorded on `last_error`. A
 *    failure of the server or its stores is thrown, and the fire is retried. With `startLater`,
 *    the run's workflow is started after the fire, not in it.
 *
 * Then the next fire is planned (planNextFire) from the same read of the schedule: a fire reads
 * its schedule once. `after`: the last fire handled, which a stale fire plans from.
 */
export async function fireAndPlan(
  ctx: ServerContext,
  scheduleId: string,
  fireAtMs: number,
  revision: number,
  after: number | null,
  startLater?: StartLater,
): Promise<{ outcome: FireOutcome; next: FirePlan | null }> {
  const schedule = await getSchedule(ctx.sql, scheduleId);
  const outcome = await fireOccurrence(ctx, schedule, fireAtMs, revision, startLater);
  return { outcome, next: await planFireOf(ctx, schedule, outcome === 'stale' ? after : fireAtMs) };
}

/** The fire itself (rules 0 to 3 above), of the schedule as read for it. */
async function fireOccurrence(ctx: ServerContext, schedule: Schedule | undefined, fireAtMs: number, revision: number, startLater?: StartLater): Promise<FireOutcome> {
  const fireAt = new Date(fireAtMs);
  if (!schedule || !schedule.enabled) return 'stale';
  const scheduleId = schedule.id;
  // Saved since the fire was planned (and the workflow not told): made only if the rule as saved has it.
  if (schedule.revision !== revision && !isFireOf(schedule, fireAt)) return 'stale';
  if (schedule.last_fire_at && schedule.last_fire_at >= fireAt) return schedule.last_outcome ?? 'started';
  const key = fireKey(scheduleId, fireAt);
  // Whoever the fire's run was submitted as (an edit since may have changed who it fires as).
  const made = await findRunByIdempotencyKey(ctx.sql, { source: { kind: 'schedule', id: scheduleId } }, key);
  if (made) {
    await recordFire(ctx.sql, scheduleId, fireAt, { kind: 'started', runId: made.id });
    return 'started';
  }

  const going = await findUnfinishedRunFrom(ctx.sql, 'schedule', scheduleId);
  if (going) {
    await recordSkip(ctx.sql, schedule, fireAt, `run ${going.id}, which this schedule started, still goes (${going.status})`, going.id);
    ctx.logger.info({ scheduleId, runId: going.id, fireAt }, 'schedule fire skipped: a run it started still goes');
    return 'skipped';
  }

  // Read once: what the fire is judged by for hosts is what it launches.
  const template = schedule.template_id !== null ? await getTemplate(ctx.sql, schedule.template_id) : undefined;
  const hostless = await hostlessFire(ctx, schedule, template);
  if (hostless) {
    await recordHostlessSkip(ctx, schedule, fireAt, hostless);
    ctx.logger.info({ scheduleId, fireAt, reason: hostless.reason }, 'schedule fire skipped: its inventory matches no hosts');
    return 'skipped';
  }

  try {
    const owner = await firingOwner(ctx.sql, schedule.owner_account_id, 'the account that saved this schedule', 'saving it again makes it fire as the saver');
    const run = await launch(ctx, schedule, template, owner, key, startLater);
    if (ctx.faults.fire('schedule-fire-after-submit')) throw new Error('injected fault: the fire was lost after its run was submitted');
    await recordFire(ctx.sql, scheduleId, fireAt, { kind: 'started', runId: run.id });
    ctx.logger.info({ scheduleId, runId: run.id, fireAt, lateMs: Date.now() - fireAtMs }, 'schedule fired');
    return 'started';
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    await recordDidNotRun(ctx, schedule, fireAt, err);
    return 'did_not_run';
  }
}

/**
 * A skipped fire on `last_skipped`: why, and the run it waited behind (null when its inventory
 * matched no hosts). Skips for one cause in a row are one stretch: its first fire and count.
 * Answers whether this call recorded it (recordFire records a fire once).
 */
async function recordSkip(db: Db, schedule: Schedule, fireAt: Date, reason: string, runId: string | null): Promise<boolean> {
  const previous = schedule.last_outcome === 'skipped' ? schedule.last_skipped : null;
  const streak = previous && (previous.run_id ?? null) === runId ? previous : null;
  return recordFire(db, schedule.id, fireAt, {
    kind: 'skipped',
    skip: { at: fireAt.toISOString(), reason, run_id: runId, since: streak?.since ?? fireAt.toISOString(), fires: (streak?.fires ?? 0) + 1 },
  });
}

/** A fire that would find no host to act on: why, what it runs against, and the project it works in. */
interface HostlessFire {
  reason: string;
  hosts: FireHosts;
  projectId: string | null;
}

/** Whether the fire would find no host to act on (services/ansible/hostless-fires.ts); undefined when it has some or cannot know. */
async function hostlessFire(ctx: ServerContext, schedule: Schedule, template: Template | undefined): Promise<HostlessFire | undefined> {
  let hosts: FireHosts | undefined;
  let projectId: string | null = null;
  if (schedule.template_id !== null) {
    hosts = template ? templateFireHosts(template) : undefined;
    projectId = template?.project_id ?? null;
  } else {
    const request = schedule.submission!.request;
    hosts = submissionFireHosts(request);
    // A pipeline's request has no spec of its own.
    projectId = (request as unknown as Partial<RunRequest>).spec?.project?.id ?? null;
  }
  const reason = hosts && (await hostlessFireReason(ctx, hosts));
  return reason ? { reason, hosts: hosts!, projectId } : undefined;
}

/**
 * A fire whose inventory matched no host: skipped on the schedule and announced to its targets
 * (`schedule.skipped`) in one transaction, so the skip is recorded with its notice or not at all,
 * and once; the notice's deliveries are handed to their workflows after the commit.
 */
async function recordHostlessSkip(ctx: ServerContext, schedule: Schedule, fireAt: Date, hostless: HostlessFire): Promise<void> {
  const notice = await ctx.sql.begin(async (tx) => {
    if (!(await recordSkip(tx, schedule, fireAt, hostless.reason, null))) return undefined;
    return recordSkippedFireNotice(tx, {
      scheduleId: schedule.id,
      scheduleName: schedule.name,
      requestedBy: schedule.updated_by,
      actorKind: schedule.owner_actor_kind,
      templateId: schedule.template_id,
      // Only an ansible fire is judged for hosts before its launch.
      tool: 'ansible',
      inventoryId: hostless.hosts.inventoryId,
      limit: hostless.hosts.limit,
      reason: hostless.reason,
      fireAt,
      projectId: hostless.projectId,
    });
  });
  if (notice) await handOffSkippedFireNotice(ctx, notice);
}

/**
 * Submits the fire's run as the schedule's owner, with the fire's Idempotency-Key; `template` is
 * the one the schedule fires, as read for this fire; `startLater` defers the run's workflow start.
 */
async function launch(ctx: ServerContext, schedule: Schedule, template: Template | undefined, owner: UnattendedFire['owner'], key: string, startLater?: StartLater) {
  const fire: UnattendedFire = { kind: 'schedule', id: schedule.id, name: schedule.name, owner, actorKind: schedule.owner_actor_kind };
  const origin = serviceOrigin('SCHEDULE', `/schedules/${schedule.id}/fire`);
  if (schedule.template_id !== null) {
    if (!template) throw new DomainError('conflict', `template ${schedule.template_id}, which this schedule fires, no longer exists`);
    return (await launchUnattended(ctx, origin, template, fire, { idempotencyKey: key, startLater })).run;
  }
  const { kind, request: stored } = schedule.submission!;
  const request = { ...(stored as unknown as RunRequest), source: { kind: 'schedule' as const, id: schedule.id } };
  const caller = unattendedCaller(fire);
  // The owner's use of each credential is checked again at each fire (submitRun), as a template's fire checks use of the template.
  return (await submitRun(ctx, caller, origin, { ...request, credentialsField: `${kind}.credentials` }, key, startLater)).run;
}

/** A refused fire on `last_error`; a survey refusal with its chain entry, in the same transaction. */
async function recordDidNotRun(ctx: ServerContext, schedule: Schedule, fireAt: Date, err: DomainError): Promise<void> {
  ctx.logger.info({ scheduleId: schedule.id, fireAt, reason: err.message }, 'schedule fire did not run');
  if (!(err instanceof UnattendedSurveyRefusal)) {
    await recordFire(ctx.sql, schedule.id, fireAt, { kind: 'did_not_run', error: err.message });
    return;
  }
  const origin = serviceOrigin('SCHEDULE', `/schedules/${schedule.id}/refused/survey/${err.questions.join(',')}`);
  // The record and its chain entry in one statement (store/schedules.ts recordFire): a burst of
  // refused fires holds the chain's head no longer than each commit.
  const entry = {
    id: newId('aud'),
    body: { kind: 'schedule.refused', schedule_id: schedule.id, template_id: schedule.template_id, questions: err.questions, fire_at: fireAt.toISOString() },
    run_id: null,
  };
  await recordFire(ctx.sql, schedule.id, fireAt, { kind: 'did_not_run', error: err.message }, entryFields(origin, statusOf(err.code), entry));
}

/** A schedule as the API shows it. */
export function scheduleView(schedule: Schedule) {
  return {
    id: schedule.id,
    name: schedule.name,
    cron: schedule.cron,
    rrule: schedule.rrule,
    timezone: schedule.timezone ?? 'UTC',
    spring_forward: schedule.spring_forward,
    enabled: schedule.enabled,
    template_id: schedule.template_id,
    ...(schedule.submission ? { [schedule.submission.kind]: schedule.submission.body } : {}),
    created_by: schedule.created_by,
    updated_by: schedule.updated_by,
    created_at: schedule.created_at,
    updated_at: schedule.updated_at,
    next_fire_at: schedule.enabled ? schedule.next_fire_at : null,
    last_fire_at: schedule.last_fire_at,
    last_outcome: schedule.last_outcome,
    last_run_id: schedule.last_run_id,
    last_error: schedule.last_error,
    last_error_at: schedule.last_error_at,
    last_skipped: schedule.last_skipped,
  };
}
