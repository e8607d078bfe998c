import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mapLimit } from './concurrency';
import { expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import type { Teardown } from './environment';
import { msSince, percentile, sleep } from './stats';

const LATENCY_RUNS = 50;
const WARMUP = 5;
const THROUGHPUT_RUNS = 200;
const IN_FLIGHT = 50;
// 99 characters and a newline: 100,000 of them is 10 MB of output.
const LOG_LINES = 100_000;
const LINE = 'cairn relay 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 abcdefghijk';
export const RELAY_QUEUE = 'relay-bench';

interface RunBody {
  id: string;
  status: string;
  log_bytes: number;
  started_at: string | null;
  finished_at: string | null;
}

/**
 * A real `cairn worker --server` process of its own data dir, with no database or Temporal in its
 * environment, on the bench queue; stopped by the function it answers (or by the teardown).
 */
async function startRelayWorker(url: string, token: string, slots: number, teardown: Teardown): Promise<() => Promise<void>> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-bench-relay-'));
  teardown.push(`removing ${dataDir}`, () => fs.rm(dataDir, { recursive: true, force: true }));
  const child = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'cairn.js'), 'worker', '--server', url, '--worker-token', token, '--queue', RELAY_QUEUE], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, CAIRN_DATA_DIR: dataDir, CAIRN_POOL_SIZE: String(slots), CAIRN_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  };
  teardown.push('stopping the relay worker', stop);
  await new Promise<void>((resolve, reject) => {
    let said = '';
    const timer = setTimeout(() => reject(new Error(`the relay worker did not start polling: ${said.slice(-2000)}`)), 120_000);
    const look = (chunk: Buffer) => {
      said += chunk.toString();
      if (said.includes('relay worker polling')) {
        clearTimeout(timer);
        child.stdout!.off('data', look);
        child.stdout!.resume();
        child.stderr!.resume();
        resolve();
      }
    };
    child.stdout!.on('data', look);
    child.stderr!.on('data', (chunk: Buffer) => (said += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`the relay worker exited ${code}: ${said.slice(-2000)}`)));
  });
  return stop;
}

async function submit(client: BenchClient, command: string, queue: string | undefined): Promise<RunBody> {
  return expectStatus(await client.request<RunBody>('POST', '/v1/runs', { tool: 'bash', command, ...(queue && { queue }) }), 201, 'POST /v1/runs');
}

async function waitEnded(client: BenchClient, id: string, intervalMs: number, timeoutMs = 300_000): Promise<RunBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = expectStatus(await client.request<RunBody>('GET', `/v1/runs/${id}`), 200, `GET /v1/runs/${id}`);
    if (run.finished_at) {
      if (run.status !== 'succeeded') throw new Error(`run ${id} ended ${run.status}`);
      return run;
    }
    if (Date.now() > deadline) throw new Error(`run ${id} did not end within ${timeoutMs / 1000} s`);
    await sleep(intervalMs);
  }
}

/** Sequential `true` runs, POST to observed success: the per-run times after a warm-up. */
async function latencies(client: BenchClient, queue: string | undefined): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < WARMUP + LATENCY_RUNS; i++) {
    const start = process.hrtime.bigint();
    const run = await submit(client, 'true', queue);
    await waitEnded(client, run.id, 5);
    if (i >= WARMUP) times.push(msSince(start));
  }
  return times;
}

/** `true` runs submitted at once (IN_FLIGHT POSTs in flight), timed from the first POST until every one has ended: runs a second. */
async function throughput(client: BenchClient, queue: string | undefined): Promise<number> {
  const start = process.hrtime.bigint();
  const ids = await mapLimit(THROUGHPUT_RUNS, IN_FLIGHT, async () => (await submit(client, 'true', queue)).id);
  // Checked in submission order: by the time the last is seen ended, the batch is done.
  await mapLimit(ids.length, 4, async (i) => waitEnded(client, ids[i], 50));
  return THROUGHPUT_RUNS / (msSince(start) / 1000);
}

/** One run writing LOG_LINES lines: its stored log bytes over its time from start to end. */
async function logRate(client: BenchClient, queue: string | undefined): Promise<{ bytesPerSecond: number; bytes: number }> {
  const run = await submit(client, `yes '${LINE}' | head -n ${LOG_LINES}`, queue);
  const ended = await waitEnded(client, run.id, 100);
  const seconds = (Date.parse(ended.finished_at!) - Date.parse(ended.started_at!)) / 1000;
  return { bytesPerSecond: ended.log_bytes / seconds, bytes: ended.log_bytes };
}

/**
 * (q) The relay against the direct worker, in the same run: the same `true` runs and the same
 * output on the server's own pool (the direct path: PostgreSQL and Temporal in process) and on a
 * named queue served only by a real `cairn worker --server` process through /relay/v1, with as
 * many slots as the pool.
 */
export async function relayBenchmark(client: BenchClient, url: string, workerToken: string, slots: number, teardown: Teardown, log: (line: string) => void): Promise<Section> {
  const stopWorker = await startRelayWorker(url, workerToken, slots, teardown);
  const directLatency = await latencies(client, undefined);
  const relayLatency = await latencies(client, RELAY_QUEUE);
  log(`(q) latency p50: direct ${percentile(directLatency, 50).toFixed(1)} ms, relay ${percentile(relayLatency, 50).toFixed(1)} ms`);
  const directThroughput = await throughput(client, undefined);
  const relayThroughput = await throughput(client, RELAY_QUEUE);
  log(`(q) throughput: direct ${directThroughput.toFixed(1)} runs/s, relay ${relayThroughput.toFixed(1)} runs/s`);
  const directLog = await logRate(client, undefined);
  const relayLog = await logRate(client, RELAY_QUEUE);
  // Its idle claims are not left to weigh on the sections after this one.
  await stopWorker();
  const p = (xs: number[], q: number) => percentile(xs, q);
  const mib = (n: number) => n / 2 ** 20;
  return {
    rows: [
      { metric: 'relay run latency p50 (POST to succeeded)', value: p(relayLatency, 50), baseline: p(directLatency, 50), unit: 'ms' },
      { metric: 'relay run latency p95 (POST to succeeded)', value: p(relayLatency, 95), baseline: p(directLatency, 95), unit: 'ms' },
      { metric: `relay throughput (${THROUGHPUT_RUNS} runs, ${IN_FLIGHT} POSTs in flight)`, value: relayThroughput, baseline: directThroughput, unit: 'runs/s' },
      { metric: 'relay log throughput (one run, stored)', value: mib(relayLog.bytesPerSecond), baseline: mib(directLog.bytesPerSecond), unit: 'MiB/s' },
    ],
    notes: [
      `relay: baselines are the same runs on the server's own pool (direct worker); ${slots} slots each; the relay worker is a separate cairn worker --server process`,
      `relay: added latency per run p50 ${(p(relayLatency, 50) - p(directLatency, 50)).toFixed(1)} ms, p95 ${(p(relayLatency, 95) - p(directLatency, 95)).toFixed(1)} ms ` +
        `(${LATENCY_RUNS} sequential runs after ${WARMUP} warm-up, polled every 5 ms)`,
      `relay: log throughput is ${(relayLog.bytes / 1e6).toFixed(1)} MB of output (${LOG_LINES} lines) over the run's start to end, stored via POST /relay/v1/runs/{id}/log`,
    ],
  };
}
