import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { statementsSentSoFar, type Sql } from '../store/db';
import { hostsByLatestVerdict } from '../store/host-results';
import { pendingByQueue, runCountsByStatusAndTool } from '../store/runs';
import { workerCounts } from '../store/workers';

/**
 * Prometheus series (spec part A 4.15; docs/operations.md, Metrics, names each). Run totals by
 * status and tool, queue depth, the worker fleet and the host fleet are read from PostgreSQL at
 * scrape time, so every server reports the same install-wide figures; the counters, the duration
 * histogram and the `cairn_worker_*` gauges are this process's own, which is how Prometheus
 * expects them to add up across servers.
 */
export function createMetrics(sql: Sql, poolSize: number) {
  const registry = new Registry();
  const runs = new Gauge({ name: 'cairn_runs', help: 'Runs recorded, by status and tool', labelNames: ['status', 'tool'], registers: [registry] });
  const queueDepth = new Gauge({
    name: 'cairn_queue_depth',
    help: 'Runs waiting to start (pending) on each queue; "" is the default queue',
    labelNames: ['queue'],
    registers: [registry],
  });
  const workers = new Gauge({
    name: 'cairn_workers',
    help: 'Worker processes of the install, by the queue they serve ("" the default) and lease (fresh or lost)',
    labelNames: ['queue', 'lease'],
    registers: [registry],
  });
  const fleetHosts = new Gauge({
    name: 'cairn_fleet_hosts',
    help: "Hosts with per-host results, by the verdict of each host's latest result",
    labelNames: ['status'],
    registers: [registry],
  });
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
  new Counter({
    name: 'cairn_db_statements_total',
    help: 'Statements this process sent to PostgreSQL, each one round trip',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(statementsSentSoFar());
    },
  });
  // Live run streams: what each holds for its client is read from the stream itself at scrape time.
  const openStreams = new Set<() => number>();
  new Gauge({
    name: 'cairn_run_streams',
    help: 'Live run streams open on this server',
    registers: [registry],
    collect() {
      this.set(openStreams.size);
    },
  });
  new Gauge({
    name: 'cairn_run_stream_held_bytes',
    help: 'Bytes live run streams hold for their clients, queued and not yet taken by the network',
    registers: [registry],
    collect() {
      let total = 0;
      for (const held of openStreams) total += held();
      this.set(total);
    },
  });
  new Gauge({
    name: 'cairn_run_stream_held_bytes_max',
    help: 'The most bytes any one live run stream holds for its client',
    registers: [registry],
    collect() {
      let most = 0;
      for (const held of openStreams) most = Math.max(most, held());
      this.set(most);
    },
  });
  const streamsStalled = new Counter({
    name: 'cairn_run_streams_stalled_total',
    help: 'Live run streams ended with a resume event because their client took nothing for the stall limit',
    registers: [registry],
  });
  /** Counts a live stream in the stream gauges until the function returned is called. */
  function streamOpened(held: () => number): () => void {
    openStreams.add(held);
    return () => openStreams.delete(held);
  }

  // One scrape at a time: each resets and refills the install-wide gauges before it reads them.
  let previous: Promise<unknown> = Promise.resolve();
  function collect(): Promise<string> {
    const next = previous.then(read, read);
    previous = next;
    return next;
  }

  async function read(): Promise<string> {
    const [counts, pending, fleet, hosts] = await Promise.all([runCountsByStatusAndTool(sql), pendingByQueue(sql), workerCounts(sql), hostsByLatestVerdict(sql)]);
    runs.reset();
    for (const row of counts) runs.set({ status: row.status, tool: row.tool }, row.n);
    // Every queue with a run waiting or a worker serving it, and the default queue always, so a
    // drained queue reads 0 rather than vanishing.
    queueDepth.reset();
    for (const queue of new Set(['', ...fleet.filter((w) => !w.lost).map((w) => w.queue)])) queueDepth.set({ queue }, 0);
    for (const row of pending) queueDepth.set({ queue: row.queue }, row.n);
    workers.reset();
    for (const row of fleet) workers.set({ queue: row.queue, lease: row.lost ? 'lost' : 'fresh' }, row.n);
    fleetHosts.reset();
    for (const row of hosts) fleetHosts.set({ status: row.status }, row.n);
    return registry.metrics();
  }

  return { registry, contentType: registry.contentType, collect, runsSubmitted, runsFinished, runDuration, workerBusy, workerUp, streamOpened, streamsStalled };
}

export type Metrics = ReturnType<typeof createMetrics>;
