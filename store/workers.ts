import { type Db, type Page, type PageRequest, readPage } from './db';

/** A worker process as it records itself (schema/007_workers.sql). */
export interface WorkerRow {
  id: string;
  /** "" for the default pool, else the named queue it serves. */
  queue: string;
  task_queue: string;
  host: string;
  pid: number;
  renew_seconds: number;
  started_at: Date;
  renewed_at: Date;
  /** `relay` for an outbound worker of the relay (schema/034_relay.sql), else `direct`. */
  kind: 'direct' | 'relay';
  /** A relay worker's Cairn version, as it reports it. */
  version: string | null;
}

/** A worker as listed: its row, and whether it has missed three renewals in a row. */
export interface ListedWorker extends WorkerRow {
  lost: boolean;
  /** Runs a relay worker holds a lease on now (0 for a direct worker, whose runs Temporal tracks). */
  runs_held: number;
}

/** Renewals a worker may miss before it counts as lost. */
export const MISSED_RENEWALS_LOST = 3;

/**
 * Records the worker as alive now: inserts its row, or renews it. Renewing by upsert means a row
 * pruned while its worker was cut off from the database comes back with the next renewal.
 */
export async function recordWorkerAlive(db: Db, worker: Omit<WorkerRow, 'started_at' | 'renewed_at' | 'kind' | 'version'>): Promise<void> {
  await db`
    INSERT INTO workers ${db({ ...worker } as Record<string, unknown>)}
    ON CONFLICT (id) DO UPDATE SET renewed_at = now()`;
}

/** A clean stop: the worker is gone, not lost. */
export async function deleteWorker(db: Db, id: string): Promise<void> {
  await db`DELETE FROM workers WHERE id = ${id}`;
}

/** Drops the rows of workers not heard from for this long (lost long ago, or killed uncleanly). */
export async function pruneLostWorkers(db: Db, olderThanSeconds: number): Promise<void> {
  await db`DELETE FROM workers WHERE renewed_at < now() - make_interval(secs => ${olderThanSeconds})`;
}

/** A page of workers for `GET /v1/workers`, in start order, freshness judged on the database's clock. */
export async function listWorkerPage(
  db: Db,
  page: PageRequest,
): Promise<Page<ListedWorker>> {
  const columns = db`*, renewed_at < now() - make_interval(secs => renew_seconds * ${MISSED_RENEWALS_LOST}) AS lost,
    (SELECT count(*) FROM relay_leases l WHERE l.worker_id = workers.id)::int AS runs_held`;
  return readPage(db, { columns, from: db`workers`, order: db`id` }, page);
}

/** Worker processes by the queue they serve and whether they have missed three renewals in a row, judged on the database's clock. */
export async function workerCounts(db: Db): Promise<{ queue: string; lost: boolean; n: number }[]> {
  return db<{ queue: string; lost: boolean; n: number }[]>`
    SELECT queue, renewed_at < now() - make_interval(secs => renew_seconds * ${MISSED_RENEWALS_LOST}) AS lost, count(*)::int AS n
    FROM workers GROUP BY 1, 2 ORDER BY 1, 2`;
}
