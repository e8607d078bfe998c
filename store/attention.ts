import type { AttentionRun, AttentionWorker } from '../core/runs/attention';
import { followerReadableBy, runReadableBy } from './access';
import type { Db } from './db';
import { MISSED_RENEWALS_LOST } from './workers';

/**
 * What attention reads (spec part A 2.12, 3.3) and the alerts it has sent (part B 6.6,
 * schema/014_attention.sql).
 */

/** The events that start a run's current state: its `since` is the latest of them. */
const STATE_EVENTS = ['run.created', 'run.held', 'run.approved', 'run.started', 'run.requeued'];

export interface AttentionRow extends AttentionRun {
  /** The top-level run this one belongs to (itself for a top-level run). */
  root_id: string;
  /** The organization owning the run's template, for thresholds by organization. */
  template_org_id: string | null;
  source_kind: string;
  source_id: string | null;
  /** A parent's steps as defined (for a workflow's approval branches). */
  graph: unknown;
}

/**
 * Every unfinished top-level run the reader may read (every one without a reader), with all its
 * unfinished steps and shards at any depth. A step is read through its top-level run, as the
 * runs list reads it (store/access.ts runReadableBy).
 */
export async function unfinishedWork(db: Db, readerId?: string): Promise<AttentionRow[]> {
  const readable = readerId !== undefined ? db`AND ${runReadableBy(db, readerId, 'r')}` : db``;
  return db<AttentionRow[]>`
    WITH RECURSIVE work AS (
      SELECT r.id, r.id AS root_id FROM runs r
      WHERE r.status IN ('held', 'pending', 'running') AND r.finished_at IS NULL AND r.parent_run_id IS NULL ${readable}
      UNION ALL
      SELECT c.id, w.root_id FROM runs c JOIN work w ON c.parent_run_id = w.id
      WHERE c.finished_at IS NULL AND c.status IN ('held', 'pending', 'running')
    )
    SELECT r.id, w.root_id, r.kind, r.status, r.queue, r.template_id, r.parent_run_id, r.step_name, r.requested_by,
      r.account_id, r.exec_host, r.attempts, r.hold, r.state_digest, r.workflow_started_at, r.created_at,
      r.source_kind, r.source_id, r.graph, t.org_id AS template_org_id,
      coalesce((SELECT e.at FROM run_events e WHERE e.run_id = r.id AND e.kind IN ${db(STATE_EVENTS)} ORDER BY e.seq DESC LIMIT 1), r.created_at) AS state_since
    FROM work w JOIN runs r ON r.id = w.id
    LEFT JOIN templates t ON t.id = r.template_id
    ORDER BY r.id`;
}

/** Every worker with whether it is lost (three missed renewals), judged on the database's clock, and that clock. */
export async function attentionWorkers(db: Db): Promise<{ now: Date; workers: AttentionWorker[] }> {
  const [[{ now }], workers] = await Promise.all([
    db<{ now: Date }[]>`SELECT now() AS now`,
    db<AttentionWorker[]>`
      SELECT id, queue, host, renewed_at, renew_seconds,
        renewed_at < now() - make_interval(secs => renew_seconds * ${MISSED_RENEWALS_LOST}) AS lost
      FROM workers`,
  ]);
  return { now, workers };
}

/**
 * The longest-running executing run on each queue: what a run waiting for a slot waits behind.
 * `readable` says whether the reader may read it (always, without a reader).
 */
export async function slotHolders(db: Db, readerId?: string): Promise<Map<string, { id: string; readable: boolean }>> {
  const readable = readerId !== undefined ? runReadableBy(db, readerId, 'r') : db`true`;
  const rows = await db<{ queue: string; id: string; readable: boolean }[]>`
    SELECT DISTINCT ON (r.queue) r.queue, r.id, ${readable} AS readable FROM runs r
    WHERE r.status = 'running' AND r.finished_at IS NULL AND r.kind IN ('run', 'step', 'shard')
    ORDER BY r.queue, r.started_at, r.id`;
  return new Map(rows.map((r) => [r.queue, { id: r.id, readable: r.readable }]));
}

/** A schedule whose fires are skipped while a run it started still goes (schedules.last_skipped). */
export interface HeldBackSchedule {
  id: string;
  name: string;
  template_id: string | null;
  template_org_id: string | null;
  /** The run it waits behind, still unfinished, and whether the reader may read it. */
  run_id: string;
  run_status: string;
  run_readable: boolean;
  since: Date;
  fires: number;
  reason: string;
}

/**
 * Enabled schedules whose latest fire was skipped behind a run that still goes; with a reader,
 * only the schedules it may read (the schedules list's rule: its owner, or `read` on its template).
 */
export async function heldBackSchedules(db: Db, readerId?: string): Promise<HeldBackSchedule[]> {
  const readable = readerId !== undefined ? runReadableBy(db, readerId, 'r') : db`true`;
  const scheduleReadable = readerId !== undefined ? db`AND ${followerReadableBy(db, readerId, 'owner_account_id', 's')}` : db``;
  return db<HeldBackSchedule[]>`
    SELECT s.id, s.name, s.template_id, t.org_id AS template_org_id, r.id AS run_id, r.status AS run_status, ${readable} AS run_readable,
      (s.last_skipped->>'since')::timestamptz AS since, coalesce((s.last_skipped->>'fires')::int, 1) AS fires, s.last_skipped->>'reason' AS reason
    FROM schedules s
    JOIN runs r ON r.id = s.last_skipped->>'run_id' AND r.finished_at IS NULL
    LEFT JOIN templates t ON t.id = s.template_id
    WHERE s.enabled AND s.last_outcome = 'skipped' AND s.last_skipped IS NOT NULL ${scheduleReadable}
    ORDER BY s.id`;
}

export interface AttentionAlert {
  run_id: string;
  condition: string;
  id: string;
  blocker: string;
  subject_id: string;
  since: Date;
  threshold_seconds: number;
  seq: number;
  alerted_at: Date;
}

/**
 * Claims a condition's one alert: inserts its row unless the condition has alerted already (on
 * any server, before any restart). True when this call claimed it; call it in the transaction that
 * records the alert's event, whose sequence number it is given afterwards (setAlertSeq).
 */
export async function claimAlert(db: Db, alert: Omit<AttentionAlert, 'alerted_at' | 'seq'>): Promise<boolean> {
  const rows = await db`
    INSERT INTO attention_alerts (run_id, condition, id, blocker, subject_id, since, threshold_seconds, seq)
    VALUES (${alert.run_id}, ${alert.condition}, ${alert.id}, ${alert.blocker}, ${alert.subject_id}, ${alert.since}, ${alert.threshold_seconds}, 0)
    ON CONFLICT DO NOTHING RETURNING 1`;
  return rows.length > 0;
}

export async function setAlertSeq(db: Db, runId: string, condition: string, seq: number): Promise<void> {
  await db`UPDATE attention_alerts SET seq = ${seq} WHERE run_id = ${runId} AND condition = ${condition}`;
}

/** The alerts sent for a run's conditions, by condition. */
export async function alertsOf(db: Db, runIds: string[]): Promise<Map<string, AttentionAlert>> {
  if (runIds.length === 0) return new Map();
  const rows = await db<AttentionAlert[]>`SELECT * FROM attention_alerts WHERE run_id IN ${db(runIds)}`;
  return new Map(rows.map((r) => [`${r.run_id} ${r.condition}`, r]));
}
