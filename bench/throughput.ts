import type { BenchClient } from './http';
import { mapLimit } from './concurrency';
import type { Section } from './report';
import { countWithStatus, submitTrue } from './run-client';
import { spawnThroughput } from './spawn-baseline';
import { msSince, percentile, sleep } from './stats';

const RUNS = 500;
const IN_FLIGHT = 50;
// Each poll is two list requests (eight queries with auth); polling faster would load the two cores it measures.
const POLL_MS = 100;
const TIMEOUT_MS = 180_000;

/**
 * (b) 500 `true` runs submitted at once (50 POSTs in flight), timed from the first POST until none
 * is pending or running. Earlier benchmarks leave only ended runs behind, so the install-wide
 * pending and running counts are this batch's.
 */
export async function throughputBenchmark(client: BenchClient): Promise<Section> {
  const spawnsPerSecond = await spawnThroughput(RUNS, IN_FLIGHT);
  const succeededBefore = await countWithStatus(client, 'succeeded');

  const start = process.hrtime.bigint();
  const postMs = await mapLimit(RUNS, IN_FLIGHT, async () => {
    const t = process.hrtime.bigint();
    await submitTrue(client);
    return msSince(t);
  });
  const submittedAfter = msSince(start);
  // Pending first: once it reads zero nothing can become pending again, so a later zero for running means all ended.
  for (;;) {
    if ((await countWithStatus(client, 'pending')) === 0 && (await countWithStatus(client, 'running')) === 0) break;
    if (msSince(start) > TIMEOUT_MS) throw new Error(`the ${RUNS} runs did not all end within ${TIMEOUT_MS / 1000} s`);
    await sleep(POLL_MS);
  }
  const elapsed = msSince(start);
  const succeeded = (await countWithStatus(client, 'succeeded')) - succeededBefore;
  return {
    rows: [{ metric: `throughput (${RUNS} runs, ${IN_FLIGHT} POSTs in flight)`, value: RUNS / (elapsed / 1000), baseline: spawnsPerSecond, unit: 'runs/s', budget: { min: 25 } }],
    notes: [
      `throughput: all ${RUNS} ended in ${(elapsed / 1000).toFixed(1)} s (${succeeded} succeeded); submitting took ${(submittedAfter / 1000).toFixed(1)} s, ` +
        `POST p50 ${percentile(postMs, 50).toFixed(1)} ms, p95 ${percentile(postMs, 95).toFixed(1)} ms under load; baseline is bash -c true spawns/s at the same concurrency`,
    ],
  };
}
