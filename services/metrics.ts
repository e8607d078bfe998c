import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Sql } from '../store/db';
import { runCountsByStatusAndTool } from '../store/runs';

/**
 * Prometheus series. Run totals by status and tool, and queue depth, are read from PostgreSQL at
 * scrape time so every server reports the same install-wide figures; the duration histogram and
 * the worker gauges are this process's own, which is how Prometheus expects them to add up.
 */
export function createMetrics(sql: Sql, poolSize: number) {
  const registry = new Registry();
  const runs = new Gauge({ name: 'cairn_runs', help: 'Runs recorded, by status and tool', labelNames: ['status', 'tool'], registers: [registry] });
  const queueDepth = new Gauge({ name: 'cairn_queue_depth', help: 'Runs waiting to start (pending)', labelNames: ['queue'], registers: [registry] });
  const runsSubmitted = new Counter({ name: 'cairn_runs_submitted_total', help: 'Runs submitted to this server', labelNames: ['tool'], registers: [registry] });
  const runsFinished = new Counter({ name: 'cairn_runs_finished_total', help: 'Runs this server finished, by status and tool', labelNames: ['status', 'tool'], registers: [registry] });
  const runDuration = new Histogram({
    name: 'cairn_run_duration_seconds',
    help: 'Run duration from start to end, for runs this server finished',
    labelNames: ['tool', 'status'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
    registers: [registry],
  });
  const workerSlots = new Gauge({ name: 'cairn_worker_slots', help: 'Runs this server may execute at once', registers: [registry] });
  const workerBusy = new Gauge({ name: 'cairn_worker_busy', help: 'Runs this server is executing now', registers: [registry] });
  const workerUp = new Gauge({ name: 'cairn_worker_up', help: '1 while this server is polling for runs', registers: [registry] });
  workerSlots.set(poolSize);

  async function collect(): Promise<string> {
    runs.reset();
    queueDepth.reset();
    const counts = await runCountsByStatusAndTool(sql);
    let pending = 0;
    for (const row of counts) {
      runs.set({ status: row.status, tool: row.tool }, row.n);
      if (row.status === 'pending') pending += row.n;
    }
    queueDepth.set({ queue: 'default' }, pending);
    return registry.metrics();
  }

  return { registry, contentType: registry.contentType, collect, runsSubmitted, runsFinished, runDuration, workerBusy, workerUp };
}

export type Metrics = ReturnType<typeof createMetrics>;
