import type { Db } from './db';

export const TERMINAL_STATUSES = ['succeeded', 'failed', 'canceled', 'interrupted', 'rejected'] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];
export type RunStatus = 'pending' | 'running' | TerminalStatus;

/** What was asked for: the tool's input and settings, kept as submitted and replayed by a rerun. */
export interface RunSpec {
  command: string;
  extra_vars: Record<string, unknown>;
  timeout?: number;
}

export interface Run {
  id: string;
  tool: string;
  status: RunStatus;
  spec: RunSpec;
  queue: string;
  timeout_seconds: number;
  error: string | null;
  exit_code: number | null;
  requested_by: string;
  account_id: string | null;
  token_id: string | null;
  actor_kind: string;
  rerun_of: string | null;
  idempotency_key: string | null;
  attempts: number;
  exec_host: string | null;
  exec_pid: number | null;
  log_bytes: number;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  workflow_started_at: Date | null;
  cancel_requested_at: Date | null;
  cancel_requested_by: string | null;
}

export type NewRun = Pick<
  Run,
  'id' | 'tool' | 'spec' | 'queue' | 'timeout_seconds' | 'requested_by' | 'account_id' | 'token_id' | 'actor_kind' | 'rerun_of' | 'idempotency_key'
>;

export async function insertRun(db: Db, run: NewRun): Promise<Run> {
  const [row] = await db<Run[]>`
    INSERT INTO runs (id, tool, status, spec, queue, timeout_seconds, requested_by, account_id, token_id, actor_kind,
                      rerun_of, idempotency_key)
    VALUES (${run.id}, ${run.tool}, 'pending', ${db.json(run.spec as never)}, ${run.queue}, ${run.timeout_seconds},
            ${run.requested_by}, ${run.account_id}, ${run.token_id}, ${run.actor_kind}, ${run.rerun_of}, ${run.idempotency_key})
    RETURNING *`;
  return row;
}

export async function getRun(db: Db, id: string): Promise<Run | undefined> {
  const [row] = await db<Run[]>`SELECT * FROM runs WHERE id = ${id}`;
  return row;
}

export async function getRunForUpdate(db: Db, id: string): Promise<Run | undefined> {
  const [row] = await db<Run[]>`SELECT * FROM runs WHERE id = ${id} FOR UPDATE`;
  return row;
}

export async function findRunByIdempotencyKey(db: Db, accountId: string, key: string): Promise<Run | undefined> {
  const [row] = await db<Run[]>`SELECT * FROM runs WHERE account_id = ${accountId} AND idempotency_key = ${key}`;
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
}

export async function listRuns(db: Db, query: RunListQuery): Promise<{ rows: Run[]; total: number }> {
  const conditions = [
    query.status ? db`status = ${query.status}` : null,
    query.tool ? db`tool = ${query.tool}` : null,
    query.after ? db`created_at > ${query.after}` : null,
    query.before ? db`created_at < ${query.before}` : null,
    query.q
      ? db`(id ILIKE ${'%' + query.q + '%'} OR spec->>'command' ILIKE ${'%' + query.q + '%'}
            OR error ILIKE ${'%' + query.q + '%'} OR requested_by ILIKE ${'%' + query.q + '%'})`
      : null,
  ].filter((c) => c !== null);
  const where = conditions.length
    ? conditions.reduce((acc, c, i) => (i === 0 ? db`WHERE ${c}` : db`${acc} AND ${c}`), db``)
    : db``;
  const direction = query.order === 'asc' ? db`ASC` : db`DESC`;
  const [rows, [{ n }]] = await Promise.all([
    db<Run[]>`SELECT * FROM runs ${where} ORDER BY id ${direction} LIMIT ${query.limit} OFFSET ${query.offset}`,
    db<{ n: number }[]>`SELECT count(*)::int AS n FROM runs ${where}`,
  ]);
  return { rows, total: n };
}

export async function markWorkflowStarted(db: Db, id: string): Promise<void> {
  await db`UPDATE runs SET workflow_started_at = now() WHERE id = ${id} AND workflow_started_at IS NULL`;
}

/** Moves a run into running for an execution attempt; the caller's transaction also writes the events. */
export async function markRunning(db: Db, id: string, host: string): Promise<Run> {
  const [row] = await db<Run[]>`
    UPDATE runs SET status = 'running', started_at = coalesce(started_at, now()), attempts = attempts + 1,
                    exec_host = ${host}, exec_pid = NULL
    WHERE id = ${id} RETURNING *`;
  return row;
}

export async function recordProcess(db: Db, id: string, pid: number): Promise<void> {
  await db`UPDATE runs SET exec_pid = ${pid} WHERE id = ${id}`;
}

export async function markFinished(
  db: Db,
  id: string,
  outcome: { status: TerminalStatus; error: string | null; exit_code: number | null },
): Promise<Run> {
  const [row] = await db<Run[]>`
    UPDATE runs SET status = ${outcome.status}, error = ${outcome.error}, exit_code = ${outcome.exit_code},
                    finished_at = now(), exec_pid = NULL
    WHERE id = ${id} RETURNING *`;
  return row;
}

export async function markCancelRequested(db: Db, id: string, by: string): Promise<void> {
  await db`UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, now()),
                           cancel_requested_by = coalesce(cancel_requested_by, ${by})
           WHERE id = ${id}`;
}

/** Submissions a server committed but whose workflow it never started (it died, or Temporal refused). */
export async function findUnstartedRuns(db: Db, olderThanSeconds: number, limit: number): Promise<Run[]> {
  return db<Run[]>`
    SELECT * FROM runs
    WHERE workflow_started_at IS NULL AND finished_at IS NULL
      AND created_at < now() - make_interval(secs => ${olderThanSeconds})
    ORDER BY created_at LIMIT ${limit}`;
}

/** Runs whose cancel was recorded but that have not ended yet. */
export async function findCancelOwedRuns(db: Db, olderThanSeconds: number, limit: number): Promise<Run[]> {
  return db<Run[]>`
    SELECT * FROM runs
    WHERE cancel_requested_at IS NOT NULL AND finished_at IS NULL
      AND cancel_requested_at < now() - make_interval(secs => ${olderThanSeconds})
    ORDER BY cancel_requested_at LIMIT ${limit}`;
}

export async function runCountsByStatusAndTool(db: Db): Promise<{ status: string; tool: string; n: number }[]> {
  return db<{ status: string; tool: string; n: number }[]>`
    SELECT status, tool, count(*)::int AS n FROM runs GROUP BY status, tool`;
}
