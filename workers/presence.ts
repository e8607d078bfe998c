import os from 'node:os';
import type { Logger } from 'pino';
import { newId } from '../core/ids';
import type { Sql } from '../store/db';
import { deleteWorker, pruneLostWorkers, recordWorkerAlive } from '../store/workers';

/** How long a lost worker stays listed before a renewing worker prunes its row. */
const PRUNE_AFTER_SECONDS = 24 * 3600;

export interface WorkerPresence {
  id: string;
  /** A clean stop: stops renewing and deletes the row. */
  stop(): Promise<void>;
}

/**
 * Records this worker process in the `workers` table (GET /v1/workers) and renews the row every
 * third of the lease, so a worker that misses three renewals in a row shows as lost, the same
 * span after which Temporal requeues the runs it held (the heartbeat timeout is the lease). A
 * renewal that fails (a database outage) is logged and tried again at the next period.
 */
export async function announceWorker(
  sql: Sql,
  options: { queue: string; taskQueue: string; leaseSeconds: number; logger: Logger },
): Promise<WorkerPresence> {
  const host = os.hostname();
  const row = {
    id: newId('wrk'),
    queue: options.queue,
    task_queue: options.taskQueue,
    host,
    pid: process.pid,
    renew_seconds: options.leaseSeconds / 3,
  };
  await recordWorkerAlive(sql, row);
  await pruneLostWorkers(sql, PRUNE_AFTER_SECONDS);
  let renewing: Promise<void> | undefined;
  const timer = setInterval(() => {
    // A renewal still waiting on the database is not doubled up.
    if (renewing) return;
    renewing = (async () => {
      await recordWorkerAlive(sql, row);
      await pruneLostWorkers(sql, PRUNE_AFTER_SECONDS);
    })()
      .catch((err) => options.logger.warn({ err: (err as Error).message, workerId: row.id }, "renewing this worker's record failed; trying again"))
      .finally(() => (renewing = undefined));
  }, row.renew_seconds * 1000);
  return {
    id: row.id,
    async stop() {
      clearInterval(timer);
      await renewing;
      await deleteWorker(sql, row.id);
    },
  };
}
