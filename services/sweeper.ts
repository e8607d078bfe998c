import type { ServerContext } from './context';
import { compactRunCounts } from '../store/run-counts';
import { deleteStalePayloads } from '../store/job-payloads';
import { sweepAttention } from './attention/attention';
import { sweepResultHistory } from './ansible/host-results';
import { sweepHookDeliveries } from './schedules/hook-deliveries';

/**
 * Upkeep every server does on a timer, each job on its own: one that fails is logged and tried
 * again at the next pass, and never holds up another. Owed effects are not kept here: they are the
 * outbox's (services/outbox.ts).
 */
const JOBS: { name: string; run: (ctx: ServerContext, stopped: () => boolean) => Promise<unknown> }[] = [
  // The run count deltas since the last pass, folded into run_counts (store/run-counts.ts).
  { name: 'run count compaction', run: (ctx) => compactRunCounts(ctx.sql) },
  // Attention alerts past their threshold, once per condition (services/attention/attention.ts).
  { name: 'attention alerts', run: (ctx, stopped) => sweepAttention(ctx, stopped) },
  // --retain-history: ansible summaries past the newest N per host and per task (services/ansible/host-results.ts).
  { name: 'result history pruning', run: (ctx) => sweepResultHistory(ctx.sql, ctx.config.retainHistory) },
  // --hook-delivery-retention: webhook push deliveries settled longer ago (services/schedules/hook-deliveries.ts).
  { name: 'hook delivery retention', run: (ctx) => sweepHookDeliveries(ctx) },
  // Job payloads a lost server left behind (store/job-payloads.ts).
  { name: 'job payload cleanup', run: (ctx) => deleteStalePayloads(ctx.sql, 3600) },
];

export function startSweeper(ctx: ServerContext, intervalMs = 2000): { stop(): Promise<void>; sweepOnce(): Promise<void> } {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();

  async function sweepOnce(): Promise<void> {
    for (const job of JOBS) {
      if (stopped) return;
      await job.run(ctx, () => stopped).catch((err) => ctx.logger.warn({ job: job.name, err: (err as Error).message }, 'an upkeep job failed; it runs again at the next pass'));
    }
  }

  const timer = setInterval(() => {
    running = running.then(sweepOnce);
  }, intervalMs);

  return {
    sweepOnce,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
