import type { AuditEntryFields } from '../core/audit/audit-chain';
import type { Hold } from '../core/runs/policy-gate';
import { auditAppendSteps } from './audit';
import { readableRunCount, runReadableBy } from './access';
import { whereAll, type Db } from './db';
import { countRuns } from './run-counts';
import { RUN_ACTIVITY_CHANNEL } from './events';
import { completeEffectsStep, OUTBOX_CHANNEL, oweEffectsStep, type Effect, type EffectOwner } from './outbox';
import { isAnnounced } from '../core/notifications/notification-kinds';
import type { Run } from '../core/runs/run';

type OptionalRunFields =
  | 'kind' | 'parent_run_id' | 'step_name' | 'step_index' | 'template_id' | 'graph' | 'sealed_vars' | 'source_kind' | 'source_id' | 'notifications'
  | 'credentials';

export type NewRun = Pick<
  Run,
  | 'id' | 'tool' | 'spec' | 'queue' | 'timeout_seconds' | 'requested_by' | 'account_id' | 'token_id' | 'actor_kind' | 'rerun_of'
  | 'idempotency_key' | 'hold' | 'state_digest'
> & { status: 'pending' | 'held' } & Partial<Pick<Run, OptionalRunFields>>;

/** The row a new submission becomes, as the database will hold it. */
function newRunRow(run: NewRun, now: Date): Run {
  return {
    kind: 'run',
    parent_run_id: null,
    step_name: null,
    step_index: null,
    template_id: null,
    graph: null,
    sealed_vars: null,
    source_kind: 'api',
    source_id: null,
    notifications: [],
    credentials: [],
    ...run,
    error: null,
    exit_code: null,
    attempts: 0,
    exec_host: null,
    log_bytes: 0,
    created_at: now,
    started_at: null,
    finished_at: null,
    workflow_started_at: null,
    cancel_requested_at: null,
    cancel_requested_by: null,
  };
}

function jsonOrNull(db: Db, value: unknown) {
  return value === null || value === undefined ? null : db.json(value as never);
}

/**
 * Inserts a run and its first event (seq 1) in one statement: both land, or neither. With
 * `audit`, the submission's chain entry is appended by the same statement; with `owed`, the
 * effects its commit owes (store/outbox.ts, kept for the writing server as `owner` says), whose
 * ids are answered as `owed_effects`.
 */
export async function insertRunWithEvent(
  db: Db,
  run: NewRun,
  event: { kind: string; body: (row: Run) => Record<string, unknown> },
  audit?: (row: Run) => AuditEntryFields & { run_id: string | null },
  owed: Effect[] = [],
  owner: EffectOwner = true,
): Promise<Run & { owed_effects: string[] }> {
  const row = newRunRow(run, new Date());
  const chained = audit ? db`, ${auditAppendSteps(db, audit(row), 'inserted')}` : db``;
  const effects = owed.length ? db`, ${oweEffectsStep(db, owed, owner)}` : db``;
  const effectIds = owed.length ? db`(SELECT array_agg(id::text) FROM owed_effects)` : db`'{}'::text[]`;
  const [inserted] = await db<(Run & { owed_effects: string[] })[]>`
    WITH inserted AS (
      INSERT INTO runs (id, tool, status, spec, queue, timeout_seconds, requested_by, account_id, token_id, actor_kind,
                        rerun_of, idempotency_key, hold, state_digest, kind, parent_run_id, step_name, step_index,
                        template_id, graph, sealed_vars, source_kind, source_id, notifications, credentials, created_at, next_event_seq)
      VALUES (${row.id}, ${row.tool}, ${row.status}, ${db.json(row.spec as never)}, ${row.queue}, ${row.timeout_seconds},
              ${row.requested_by}, ${row.account_id}, ${row.token_id}, ${row.actor_kind}, ${row.rerun_of},
              ${row.idempotency_key}, ${jsonOrNull(db, row.hold)}, ${row.state_digest}, ${row.kind}, ${row.parent_run_id},
              ${row.step_name}, ${row.step_index}, ${row.template_id}, ${jsonOrNull(db, row.graph)}, ${jsonOrNull(db, row.sealed_vars)},
              ${row.source_kind}, ${row.source_id}, ${db.json(row.notifications as never)}, ${db.array(row.credentials)}::text[],
              ${row.created_at}, 2)
      RETURNING *
    ), event AS (
      INSERT INTO run_events (run_id, seq, kind, body)
      SELECT id, 1, ${event.kind}, ${db.json(event.body(row) as never)} FROM inserted
    ) ${chained} ${effects}
    SELECT *, ${effectIds} AS owed_effects FROM inserted`;
  return { ...inserted, owed_effects: inserted.owed_effects ?? [] };
}

export type RunChanges = Partial<Pick<Run, 'status' | 'error' | 'exit_code' | 'attempts' | 'exec_host' | 'started_at' | 'finished_at' | 'hold'>>;

/**
 * Compare-and-set on a run: applies the changes and appends one event in a single statement, only
 * while the run is as the caller read it (same status and attempts, not ended, and with
 * `notCanceled` no cancel recorded). Returns the updated run, or undefined when the run moved on;
 * the caller reads it again and decides anew. The event body, and the chain entry `audit` makes,
 * are made from the run as it will be.
 */
export async function updateRunIf(
  db: Db,
  previous: Run,
  changes: RunChanges,
  event: { kind: string; body: (next: Run) => Record<string, unknown> },
  guard: { notCanceled?: boolean } = {},
  audit?: (next: Run) => AuditEntryFields & { run_id: string | null },
  effectsOwed: Effect[] = [],
): Promise<Run | undefined> {
  const next: Run = { ...previous, ...changes };
  // Effects the move owes (store/outbox.ts), due at once, only if the move is made.
  const effects = effectsOwed.length
    ? db`, owed_effects AS (
        INSERT INTO outbox (effect, subject, payload)
        SELECT e.effect, e.subject, e.payload FROM updated, jsonb_to_recordset(${db.json(effectsOwed.map((e) => ({ effect: e.effect, subject: e.subject, payload: 'payload' in e ? e.payload : {} })) as never)}) AS e(effect text, subject text, payload jsonb)
        RETURNING id
      )`
    : db``;
  const effectsNotified = effectsOwed.length ? db`(SELECT pg_notify(${OUTBOX_CHANNEL}, '') FROM updated)` : db`NULL`;
  // With `audit`, the move's chain entry is appended by the same statement, only if the move is made.
  const chained = audit ? db`, ${auditAppendSteps(db, audit(next), 'updated')}` : db``;
  // A top-level run's start, hold and end are owed to its notification targets from this same
  // statement (spec part B 6.3 rule 3), with the outbox effect that records them; dispatchers are
  // woken at commit.
  const announced = isAnnounced(event.kind);
  const owed = announced
    ? db`, owed AS (
        INSERT INTO notification_events (subject_id, seq, event)
        SELECT id, next_event_seq - 1, ${event.kind} FROM updated WHERE parent_run_id IS NULL
        RETURNING subject_id, seq
      ), owed_record AS (
        INSERT INTO outbox (effect, subject, payload) SELECT 'event.record', subject_id, jsonb_build_object('seq', seq) FROM owed
      )`
    : db``;
  const owedNotified = announced ? db`(SELECT pg_notify(${OUTBOX_CHANNEL}, '') FROM owed)` : db`NULL`;
  const [row] = await db<(Run & { notified: unknown; owed_notified: unknown })[]>`
    WITH updated AS (
      UPDATE runs SET ${db((changes.hold ? { ...changes, hold: db.json(changes.hold as never) } : changes) as Record<string, unknown>)}, next_event_seq = next_event_seq + 1
      WHERE id = ${previous.id} AND status = ${previous.status} AND attempts = ${previous.attempts} AND finished_at IS NULL
        ${guard.notCanceled ? db`AND cancel_requested_at IS NULL` : db``}
      RETURNING *
    ), event AS (
      INSERT INTO run_events (run_id, seq, kind, body)
      SELECT id, next_event_seq - 1, ${event.kind}, ${db.json(event.body(next) as never)} FROM updated
    ) ${owed} ${effects} ${chained}
    SELECT updated.*, pg_notify(${RUN_ACTIVITY_CHANNEL}, updated.id) AS notified, ${owedNotified} AS owed_notified, ${effectsNotified} AS effects_notified FROM updated`;
  if (!row) return undefined;
  const { notified: _, owed_notified: _owed, effects_notified: _effects, ...run } = row as typeof row & { effects_notified: unknown };
  return run;
}

export async function getRun(db: Db, id: string): Promise<Run | undefined> {
  const [row] = await db<Run[]>`SELECT * FROM runs WHERE id = ${id}`;
  return row;
}

export async function getRunForUpdate(db: Db, id: string): Promise<Run | undefined> {
  const [row] = await db<Run[]>`SELECT * FROM runs WHERE id = ${id} FOR UPDATE`;
  return row;
}

/** The run sources whose Idempotency-Keys are theirs, whichever account they fire as (a schedule's fires, a trigger's deliveries). */
export const SOURCE_KEYED = ['schedule', 'trigger'] as const;
export type SourceKeyed = (typeof SOURCE_KEYED)[number];

/**
 * Whose Idempotency-Key a run's is: an account's own (the API's), or a source's: a schedule's
 * fire or a trigger's delivery is one run whoever it fires as, so an edit that changes the account
 * a schedule fires as cannot make a fire twice. The two never meet (schema/023).
 */
export type IdempotencyScope = { accountId: string } | { source: { kind: SourceKeyed; id: string } };

export async function findRunByIdempotencyKey(db: Db, scope: IdempotencyScope, key: string): Promise<Run | undefined> {
  const [row] =
    'source' in scope
      ? await db<Run[]>`SELECT * FROM runs WHERE source_kind = ${scope.source.kind} AND source_id = ${scope.source.id} AND idempotency_key = ${key}
                          AND source_kind IN ('schedule', 'trigger')`
      : await db<Run[]>`SELECT * FROM runs WHERE account_id = ${scope.accountId} AND idempotency_key = ${key}
                          AND source_kind NOT IN ('schedule', 'trigger')`;
  return row;
}

export interface RunListQuery {
  limit: number;
  offset: number;
  status?: string;
  tool?: string;
  order: 'asc' | 'desc';
  after?: Date;
  before?: Date;
  q?: string;
  /** Only runs with a task of this name in their per-task results (store/host-results.ts). */
  task?: string;
  /** Exact matches on the run's template, requesting account's username and queue. */
  template_id?: string;
  requested_by?: string;
  queue?: string;
  /** Only the runs this account may read (store/access.ts runReadableBy); absent: every run. */
  readerId?: string;
}

/** A page of runs with the total of those matching, both counting only what `readerId` may read. */
export async function listRuns(db: Db, query: RunListQuery): Promise<{ rows: Run[]; total: number }> {
  const filters = [
    query.status ? db`status = ${query.status}` : null,
    query.tool ? db`tool = ${query.tool}` : null,
    query.template_id ? db`template_id = ${query.template_id}` : null,
    query.requested_by ? db`requested_by = ${query.requested_by}` : null,
    query.queue !== undefined ? db`queue = ${query.queue}` : null,
    query.after ? db`created_at > ${query.after}` : null,
    query.before ? db`created_at < ${query.before}` : null,
    query.task ? db`id IN (SELECT run_id FROM run_task_results WHERE task = ${query.task})` : null,
    query.q
      ? db`(id ILIKE ${'%' + query.q + '%'} OR spec->>'command' ILIKE ${'%' + query.q + '%'}
            OR error ILIKE ${'%' + query.q + '%'} OR requested_by ILIKE ${'%' + query.q + '%'})`
      : null,
  ].filter((c) => c !== null);
  const where = whereAll(db, [query.readerId !== undefined ? runReadableBy(db, query.readerId) : null, ...filters]);
  const direction = query.order === 'asc' ? db`ASC` : db`DESC`;
  // Unfiltered, or by status and tool only: the maintained counts (store/run-counts.ts), not a scan.
  const counted = !query.after && !query.before && !query.q && !query.task && !query.template_id && !query.requested_by && query.queue === undefined;
  const byStatusAndTool = { status: query.status || undefined, tool: query.tool || undefined };
  const [rows, n] = await Promise.all([
    db<Run[]>`SELECT * FROM runs ${where} ORDER BY id ${direction} LIMIT ${query.limit} OFFSET ${query.offset}`,
    query.readerId !== undefined
      ? readableRunCount(db, query.readerId, filters, counted ? byStatusAndTool : undefined)
      : counted
        ? countRuns(db, byStatusAndTool)
        : db<{ n: number }[]>`SELECT count(*)::int AS n FROM runs ${where}`.then(([row]) => row.n),
  ]);
  return { rows, total: n };
}

/** A parent's steps or shards, in definition order. */
export async function listChildRuns(db: Db, parentRunId: string): Promise<Run[]> {
  return db<Run[]>`SELECT * FROM runs WHERE parent_run_id = ${parentRunId} ORDER BY step_index, id`;
}

/** Workflow approval steps waiting for a decision, oldest first, each with its workflow's graph; with `readerId`, only those that account may read. */
export async function listWaitingApprovalSteps(db: Db, readerId?: string): Promise<(Run & { parent_graph: unknown; held_since: Date })[]> {
  return db<(Run & { parent_graph: unknown; held_since: Date })[]>`
    SELECT s.*, p.graph AS parent_graph,
           (SELECT max(e.at) FROM run_events e WHERE e.run_id = s.id AND e.kind = 'run.held') AS held_since
    FROM runs s JOIN runs p ON p.id = s.parent_run_id
    WHERE s.kind = 'approval' AND s.status = 'held' ${readerId !== undefined ? db`AND ${runReadableBy(db, readerId, 's')}` : db``}
    ORDER BY s.created_at, s.id`;
}

export async function setRunHold(db: Db, id: string, hold: Hold): Promise<void> {
  await db`UPDATE runs SET hold = ${db.json(hold as never)} WHERE id = ${id}`;
}

/** Marks the run's workflow started; `completing`: the `run.start` effects this carried out, completed in the same statement. */
export async function markWorkflowStarted(db: Db, id: string, completing: string[] = []): Promise<void> {
  const completed = completeEffectsStep(db, completing);
  await db`${completed ? db`WITH ${completed}` : db``} UPDATE runs SET workflow_started_at = now() WHERE id = ${id} AND workflow_started_at IS NULL`;
}

export async function markCancelRequested(db: Db, id: string, by: string): Promise<void> {
  await db`UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, now()),
                           cancel_requested_by = coalesce(cancel_requested_by, ${by})
           WHERE id = ${id}`;
}

/** Runs per status and tool, from the maintained counts (store/run-counts.ts). */
export { runCountsByStatusAndTool } from './run-counts';

/**
 * Runs waiting to start, by the queue they execute on: those `pending` that execute a tool (a
 * plain run, a step, a shard). A parent (pipeline, workflow, split) executes nothing and an
 * approval step waits for a decision, so neither waits for a worker.
 */
export async function pendingByQueue(db: Db): Promise<{ queue: string; n: number }[]> {
  return db<{ queue: string; n: number }[]>`
    SELECT queue, count(*)::int AS n FROM runs WHERE status = 'pending' AND kind IN ('run', 'step', 'shard') GROUP BY queue ORDER BY queue`;
}
