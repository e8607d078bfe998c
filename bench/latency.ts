import type { BenchClient } from './http';
import type { Section } from './report';
import { submitTrue, waitSucceeded } from './run-client';
import { spawnLatency } from './spawn-baseline';
import { msSince, percentile } from './stats';

const RUNS = 200;
const WARMUP = 10;
const POLL_MS = 5;

/** (a) One `true` run at a time, POST to observed success, against a bare spawn of `bash -c true`. */
export async function latencyBenchmark(client: BenchClient): Promise<Section> {
  const spawn = await spawnLatency(RUNS, WARMUP);

  const total: number[] = [];
  const post: number[] = [];
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const start = process.hrtime.bigint();
    const run = await submitTrue(client);
    const posted = msSince(start);
    await waitSucceeded(client, run.id, POLL_MS);
    if (i < WARMUP) continue;
    total.push(msSince(start));
    post.push(posted);
  }
  const after = total.map((t, i) => t - post[i]);
  return {
    rows: [
      { metric: 'run latency p50 (POST to succeeded)', value: percentile(total, 50), baseline: spawn.p50, unit: 'ms', budget: { max: 250 } },
      { metric: 'run latency p95 (POST to succeeded)', value: percentile(total, 95), baseline: spawn.p95, unit: 'ms' },
    ],
    notes: [
      `latency: ${RUNS} sequential runs after ${WARMUP} warm-up, polled every ${POLL_MS} ms; baseline is ${RUNS} sequential bash -c true spawns (p50 / p95)`,
      `latency: POST /v1/runs alone p50 ${percentile(post, 50).toFixed(1)} ms, p95 ${percentile(post, 95).toFixed(1)} ms; ` +
        `POST reply to observed success p50 ${percentile(after, 50).toFixed(1)} ms, p95 ${percentile(after, 95).toFixed(1)} ms`,
    ],
  };
}
