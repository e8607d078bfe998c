import { spawn } from 'node:child_process';
import { mapLimit } from './concurrency';
import { msSince, percentile } from './stats';

/**
 * One `bash -c true` straight from Node, timed to 'close' with piped output: the floor under any
 * run, since the worker also spawns the tool with pipes and waits for them to drain.
 */
export function spawnTrue(): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn('bash', ['-c', 'true'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(msSince(start)) : reject(new Error(`bash -c true exited ${code}`))));
  });
}

/** p50 of sequential spawns, after a few unmeasured ones. */
export async function spawnLatency(count: number, warmup: number): Promise<{ p50: number; p95: number }> {
  for (let i = 0; i < warmup; i++) await spawnTrue();
  const samples: number[] = [];
  for (let i = 0; i < count; i++) samples.push(await spawnTrue());
  return { p50: percentile(samples, 50), p95: percentile(samples, 95) };
}

/** Spawns per second with `concurrency` in flight. */
export async function spawnThroughput(count: number, concurrency: number): Promise<number> {
  const start = process.hrtime.bigint();
  await mapLimit(count, concurrency, () => spawnTrue());
  return count / (msSince(start) / 1000);
}
