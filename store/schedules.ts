import type { SpringForward } from '../core/schedules/schedule-calendar';
import type { Run } from '../core/runs/run';
import type { AuditEntryFields } from '../core/audit/audit-chain';
import { followerReadableBy } from './access';
import { auditAppendSteps } from './audit';
import { type Db, type Page, type PageRequest, readPage } from './db';

/** What a schedule fires besides a template: a run or split (`run`) or a pipeline, as sent and as submitted. */
export interface ScheduleSubmission {
  kind: 'run' | 'pipeline';
  /** The body as sent (`POST /v1/runs` or `POST /v1/pipelines`), shown by reads. */
  body: Record<string, unknown>;
  /** What each fire submits (services/runs.ts RunRequest, without source or secrets). */
  request: Record<string, unknown>;
}

/** Fires skipped while a run the schedule started still goes (spec part A 3.3 `blocked`), or whose inventory matched no hosts. */
export interface ScheduleSkip {
  /** The nominal time of the latest skipped fire. */
  at: string;
  reason: string;
  /** The run the fire waited behind; null when its inventory matched no hosts. */
  run_id: string | null;
  /** The nominal time of the first fire of this stretch of skips, and how many were skipped. */
  since: string;
  fires: number;
}

/** A stored schedule (spec part A 2.6). */
export interface Schedule {
  id: string;
  name: string;
  cron: string | null;
  rrule: string | null;
  /** Null only on a schedule stored without a zone by an earlier release: read in UTC. */
  timezone: string | null;
  spring_forward: SpringForward;
  enabled: boolean;
  template_id: string | null;
  submission: ScheduleSubmission | null;
  owner_account_id: string;
  owner_actor_kind: 'user' | 'agent';
  created_by: string;
  updated_by: string;
  revision: number;
  delivered_revision: number | null;
  next_fire_at: Date | null;
  last_fire_at: Date | null;
  last_outcome: 'started' | 'did_not_run' | 'skipped' | null;
  last_run_id: string | null;
  last_error: string | null;
  last_error_at: Date | null;
  last_skipped: ScheduleSkip | null;
  created_at: Date;
  updated_at: Date;
}

/** The fields a create or update writes. */
export type ScheduleFields = Pick<
  Schedule,
  'name' | 'cron' | 'rrule' | 'timezone' | 'spring_forward' | 'enabled' | 'template_id' | 'submission' | 'owner_account_id' | 'owner_actor_kind' | 'updated_by'
>;

const json = (db: Db, value: unknown) => (value === null || value === undefined ? null : db.json(value as never));

export async function insertSchedule(db: Db, id: string, fields: ScheduleFields, createdBy: string): Promise<Schedule> {
  const [row] = await db<Schedule[]>`
    INSERT INTO schedules (id, name, cron, rrule, timezone, spring_forward, enabled, template_id, submission,
                           owner_account_id, owner_actor_kind, created_by, updated_by)
    VALUES (${id}, ${fields.name}, ${fields.cron}, ${fields.rrule}, ${fields.timezone}, ${fields.spring_forward},
            ${fields.enabled}, ${fields.template_id}, ${json(db, fields.submission)}, ${fields.owner_account_id},
            ${fields.owner_actor_kind}, ${createdBy}, ${fields.updated_by})
    RETURNING *`;
  return row;
}

/** Replaces what the schedule is and bumps its revision; what its fires did is kept. */
export async function updateSchedule(db: Db, id: string, fields: ScheduleFields): Promise<Schedule | undefined> {
  const [row] = await db<Schedule[]>`
    UPDATE schedules SET
      name = ${fields.name}, cron = ${fields.cron}, rrule = ${fields.rrule}, timezone = ${fields.timezone},
      spring_forward = ${fields.spring_forward}, enabled = ${fields.enabled}, template_id = ${fields.template_id},
      submission = ${json(db, fields.submission)}, owner_account_id = ${fields.owner_account_id},
      owner_actor_kind = ${fields.owner_actor_kind}, updated_by = ${fields.updated_by},
      revision = revision + 1, next_fire_at = NULL, updated_at = now()
    WHERE id = ${id}
    RETURNING *`;
  return row;
}

export async function deleteSchedule(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM schedules WHERE id = ${id} RETURNING id`).length > 0;
}

export async function getSchedule(db: Db, id: string): Promise<Schedule | undefined> {
  const [row] = await db<Schedule[]>`SELECT * FROM schedules WHERE id = ${id}`;
  return row;
}

/** Locks the schedule until the transaction ends, so an update and a fire's record do not interleave. */
export async function getScheduleForUpdate(db: Db, id: string): Promise<Schedule | undefined> {
  const [row] = await db<Schedule[]>`SELECT * FROM schedules WHERE id = ${id} FOR UPDATE`;
  return row;
}

/** A page of schedules for `GET /v1/schedules`, oldest first, with the total. */
export async function listSchedulePage(
  db: Db,
  page: PageRequest,
  readerId?: string,
): Promise<Page<Schedule>> {
  const readable = readerId !== undefined ? followerReadableBy(db, readerId, 'owner_account_id') : null;
  return readPage(db, { from: db`schedules`, order: db`created_at, id`, where: [readable] }, page);
}

/**
 * Fires due in the last `withinSeconds` and not made yet: enabled schedules whose planned fire
 * has come (a fire made plans the next at once). What tells a burst of fires from a gap between
 * two of them; the window keeps a schedule whose workflow is stuck from counting for ever. No
 * index: a scan of the schedules, asked only during a burst, costs less than every fire updating one.
 */
export async function countOwedFires(db: Db, withinSeconds: number): Promise<number> {
  const [{ n }] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM schedules
    WHERE enabled AND next_fire_at <= now() AND next_fire_at > now() - make_interval(secs => ${withinSeconds})`;
  return n;
}

/** The workflow's plan, shown as `next_fire_at`; only while the revision it was planned under is current. */
export async function setNextFire(db: Db, id: string, revision: number, at: Date | null): Promise<void> {
  await db`UPDATE schedules SET next_fire_at = ${at} WHERE id = ${id} AND revision = ${revision}`;
}

export type FireRecord =
  | { kind: 'started'; runId: string }
  | { kind: 'did_not_run'; error: string }
  | { kind: 'skipped'; skip: ScheduleSkip };

/**
 * Records what a fire did, once: only a fire newer than the latest one recorded is written, so a
 * fire retried after a crash (or a late record of an older one) leaves the record as it is.
 * With `audit`, the record's chain entry is appended by the same statement, only if the record is
 * written: the chain's head is then locked from the append to the commit within one statement, not
 * across a round trip to a server busy with a burst of fires. Returns whether this call wrote it.
 */
export async function recordFire(
  db: Db,
  id: string,
  fireAt: Date,
  outcome: FireRecord,
  audit?: AuditEntryFields & { run_id?: string | null },
): Promise<boolean> {
  const changes =
    outcome.kind === 'started'
      ? db`last_outcome = 'started', last_run_id = ${outcome.runId}, last_error = NULL, last_error_at = NULL, last_skipped = NULL`
      : outcome.kind === 'did_not_run'
        ? db`last_outcome = 'did_not_run', last_error = ${outcome.error}, last_error_at = now()`
        : db`last_outcome = 'skipped', last_skipped = ${db.json(outcome.skip as never)}`;
  const chained = audit ? db`, ${auditAppendSteps(db, audit, 'recorded')}` : db``;
  const rows = await db`
    WITH recorded AS (
      UPDATE schedules SET last_fire_at = ${fireAt}, ${changes}
      WHERE id = ${id} AND (last_fire_at IS NULL OR last_fire_at < ${fireAt})
      RETURNING id
    ) ${chained}
    SELECT id FROM recorded`;
  return rows.length > 0;
}

/** Writes UTC onto schedules stored without a zone by an earlier release (spec part A 9.4); their ids. */
export async function writeUtcOnZonelessSchedules(db: Db): Promise<string[]> {
  const rows = await db<{ id: string }[]>`UPDATE schedules SET timezone = 'UTC' WHERE timezone IS NULL RETURNING id`;
  return rows.map((row) => row.id);
}

/** The newest top-level run a schedule or trigger started that has not ended, if any. */
export async function findUnfinishedRunFrom(db: Db, sourceKind: string, sourceId: string): Promise<Pick<Run, 'id' | 'status'> | undefined> {
  const [row] = await db<Pick<Run, 'id' | 'status'>[]>`
    SELECT id, status FROM runs
    WHERE source_kind = ${sourceKind} AND source_id = ${sourceId} AND finished_at IS NULL AND parent_run_id IS NULL
    ORDER BY id DESC LIMIT 1`;
  return row;
}
