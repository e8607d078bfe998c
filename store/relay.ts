import type { Db } from './db';

/** One relay-dispatched attempt of a run (schema/034_relay.sql). */
export interface RelayLease {
  run_id: string;
  queue: string;
  attempt: number;
  task_token: Buffer;
  dispatched_at: Date;
  worker_id: string | null;
  claimed_at: Date | null;
  renewed_at: Date | null;
}

const COLUMNS = ['run_id', 'queue', 'attempt', 'task_token', 'dispatched_at', 'worker_id', 'claimed_at', 'renewed_at'];

/** Notified with the queue's name at each attempt recorded for relay workers: it wakes the claims waiting on that queue, on every server. */
export const RELAY_DISPATCH_CHANNEL = 'cairn_relay_dispatch';

/** Records an attempt waiting for a relay worker; a later attempt of the same run replaces the earlier one and its holder. */
export async function recordRelayDispatch(db: Db, lease: { run_id: string; queue: string; attempt: number; task_token: Buffer }): Promise<void> {
  await db`DELETE FROM relay_reports WHERE run_id = ${lease.run_id} AND attempt <> ${lease.attempt}`;
  await db`
    WITH recorded AS (
      INSERT INTO relay_leases (run_id, queue, attempt, task_token)
      VALUES (${lease.run_id}, ${lease.queue}, ${lease.attempt}, ${lease.task_token})
      ON CONFLICT (run_id) DO UPDATE SET
        queue = EXCLUDED.queue, attempt = EXCLUDED.attempt, task_token = EXCLUDED.task_token, dispatched_at = now(),
        worker_id = NULL, capability_hash = NULL, claimed_at = NULL, renewed_at = NULL
      RETURNING queue)
    SELECT pg_notify(${RELAY_DISPATCH_CHANNEL}, queue) FROM recorded`;
}

/** Takes the oldest waiting attempt of the queue for a worker, with its capability's hash; none when nothing waits. */
export async function takeWaitingLease(db: Db, queue: string, workerId: string, capabilityHash: Buffer): Promise<RelayLease | undefined> {
  const [row] = await db<RelayLease[]>`
    UPDATE relay_leases SET worker_id = ${workerId}, capability_hash = ${capabilityHash}, claimed_at = now(), renewed_at = now()
    WHERE run_id = (
      SELECT run_id FROM relay_leases WHERE queue = ${queue} AND worker_id IS NULL
      ORDER BY dispatched_at, run_id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING ${db(COLUMNS)}`;
  return row;
}

/** The lease a capability holds, if it still holds one. */
export async function leaseByCapability(db: Db, capabilityHash: Buffer): Promise<RelayLease | undefined> {
  const [row] = await db<RelayLease[]>`SELECT ${db(COLUMNS)} FROM relay_leases WHERE capability_hash = ${capabilityHash}`;
  return row;
}

export async function renewRelayLease(db: Db, runId: string, attempt: number): Promise<void> {
  await db`UPDATE relay_leases SET renewed_at = now() WHERE run_id = ${runId} AND attempt = ${attempt}`;
}

/** Drops the attempt's row (it ended, or Temporal no longer knows it); a newer attempt's row is left. */
export async function deleteRelayLease(db: Db, runId: string, attempt: number): Promise<void> {
  await db`DELETE FROM relay_leases WHERE run_id = ${runId} AND attempt = ${attempt}`;
}

/** Attempts no relay worker has claimed yet, whose activity the server keeps alive meanwhile. */
export async function waitingRelayLeases(db: Db, limit = 1000): Promise<RelayLease[]> {
  return db<RelayLease[]>`SELECT ${db(COLUMNS)} FROM relay_leases WHERE worker_id IS NULL ORDER BY dispatched_at LIMIT ${limit}`;
}

/** Records a relay worker's call: its row in `workers`, inserted or renewed. */
export async function recordRelayWorkerContact(
  db: Db,
  worker: { id: string; queue: string; task_queue: string; host: string; pid: number; renew_seconds: number; version: string },
): Promise<void> {
  await db`
    INSERT INTO workers (id, queue, task_queue, host, pid, renew_seconds, kind, version)
    VALUES (${worker.id}, ${worker.queue}, ${worker.task_queue}, ${worker.host}, ${worker.pid}, ${worker.renew_seconds}, 'relay', ${worker.version})
    ON CONFLICT (id) DO UPDATE SET renewed_at = now(), host = EXCLUDED.host, pid = EXCLUDED.pid, version = EXCLUDED.version
    WHERE workers.kind = 'relay'`;
}

/** An attempt's staged reports; `iac` and `plan` are a plan tool's phase and its gate's decision (services/relay/relay-plans.ts). */
export type RelayReportKind = 'host' | 'task' | 'facts' | 'supplied' | 'ended' | 'iac' | 'plan';

/** Keeps a batch of an attempt's reported items until its end report. */
export async function stageRelayReports(db: Db, runId: string, attempt: number, kind: RelayReportKind, items: unknown[]): Promise<void> {
  if (!items.length) return;
  const rows = items.map((item) => ({ run_id: runId, attempt, kind, item: db.json(item as never) }));
  await db`INSERT INTO relay_reports ${db(rows)}`;
}

/** An attempt's staged items of one kind, in the order they came. */
export async function stagedRelayReports<T>(db: Db, runId: string, attempt: number, kind: RelayReportKind): Promise<T[]> {
  const rows = await db<{ item: T }[]>`SELECT item FROM relay_reports WHERE run_id = ${runId} AND attempt = ${attempt} AND kind = ${kind} ORDER BY id`;
  return rows.map((r) => r.item);
}

/** The hosts an attempt has reported results for, among those asked. */
export async function reportedHosts(db: Db, runId: string, attempt: number, hosts: string[]): Promise<Set<string>> {
  const rows = await db<{ host: string }[]>`
    SELECT DISTINCT item->>'host' AS host FROM relay_reports
    WHERE run_id = ${runId} AND attempt = ${attempt} AND kind = 'host' AND item->>'host' = ANY(${hosts})`;
  return new Set(rows.map((r) => r.host));
}

export async function dropRelayReports(db: Db, runId: string): Promise<void> {
  await db`DELETE FROM relay_reports WHERE run_id = ${runId}`;
}
