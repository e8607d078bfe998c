import { spawn } from 'node:child_process';
import { promises as fs, readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type postgres from 'postgres';
import { hashBearerSecret } from '../core/credentials/secrets';
import { randomBytes } from 'node:crypto';
import { createStreamTicket } from '../store/tickets';
import { expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import { msSince, percentile, sleep } from './stats';

const LINES = Number(process.env.CAIRN_BENCH_FIREHOSE_LINES ?? 1_000_000);
// 99 characters and a newline: a million of them is 100 MB.
const LINE = 'cairn firehose 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 abcdefgh';
const FIREHOSE = `yes '${LINE}' | head -n ${LINES}`;
const READERS = Number(process.env.CAIRN_BENCH_SSE_READERS ?? 200);
const TICKS = 2000;

interface Ended {
  id: string;
  status: string;
  log_bytes: number;
  started_at: string;
  finished_at: string;
}

async function waitEnded(client: BenchClient, id: string, onPoll?: () => void, timeoutMs = 600_000): Promise<Ended> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = expectStatus(await client.request<Ended & { finished_at: string | null }>('GET', `/v1/runs/${id}`), 200, `GET /v1/runs/${id}`);
    if (run.finished_at) return run;
    if (Date.now() > deadline) throw new Error(`run ${id} did not end within ${timeoutMs / 1000} s`);
    onPoll?.();
    await sleep(100);
  }
}

/** A stream ticket for the run, stored as the route stores one (the route's per-account rate limit would allow 60 a minute). */
async function ticketFor(sql: postgres.Sql, runId: string, admin: { accountId: string; tokenId: string }): Promise<string> {
  const ticket = randomBytes(32).toString('base64url');
  await createStreamTicket(sql, { hash: hashBearerSecret(ticket), runId, accountId: admin.accountId, tokenId: admin.tokenId, ttlSeconds: 300 });
  return ticket;
}

interface Reader {
  done: Promise<void>;
  bytes: number;
  lags: number[];
  endedAt?: number;
}

/** One SSE client of GET /v1/runs/{id}/stream: counts log bytes; with `ticks`, the lag of each `tick <ns>` line. */
function readStream(baseUrl: string, runId: string, ticket: string, ticks: boolean): Reader {
  const base = new URL(baseUrl);
  const reader: Reader = { done: Promise.resolve(), bytes: 0, lags: [] };
  reader.done = new Promise((resolve, reject) => {
    const req = http.get({ host: base.hostname, port: base.port, path: `/v1/runs/${runId}/stream?ticket=${ticket}` }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
      res.setEncoding('utf8');
      let pending = '';
      // Where the search for a message's end resumes: a message larger than a chunk is not searched from its start again.
      let searched = 0;
      res.on('data', (chunk: string) => {
        pending += chunk;
        let from = 0;
        let cut: number;
        while ((cut = pending.indexOf('\n\n', Math.max(from, searched - 1))) >= 0) {
          const message = pending.slice(from, cut);
          from = cut + 2;
          searched = 0;
          if (!message.startsWith('event: log')) continue;
          const data = JSON.parse(message.slice(message.indexOf('data: ') + 6)) as { text: string };
          reader.bytes += Buffer.byteLength(data.text);
          if (ticks) {
            const now = Date.now();
            for (const line of data.text.split('\n')) if (line.startsWith('tick ')) reader.lags.push(now - Number(line.slice(5)) / 1e6);
          }
        }
        pending = pending.slice(from);
        searched = pending.length;
      });
      res.on('end', () => {
        reader.endedAt = Date.now();
        resolve();
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  return reader;
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);

/** The RSS of this process's tool launcher children (runtime/launcher-process.ts), from /proc; 0 where there is none. */
function launcherRss(): number {
  let total = 0;
  try {
    for (const task of readdirSync('/proc/self/task')) {
      for (const pid of readFileSync(`/proc/self/task/${task}/children`, 'utf8').split(' ').filter(Boolean)) {
        try {
          if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('launcher-process')) continue;
          const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
          if (rss) total += Number(rss[1]) * 1024;
        } catch {
          /* gone meanwhile */
        }
      }
    }
  } catch {
    /* no /proc */
  }
  return total;
}

/** The floor: the same command with its output going to a file, no Cairn on the way. */
async function toFile(command: string): Promise<{ ms: number; bytes: number }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-bench-firehose-'));
  const file = path.join(dir, 'out');
  try {
    const start = process.hrtime.bigint();
    await new Promise<void>((resolve, reject) => {
      const child = spawn('bash', ['-c', `${command} > ${file}`], { stdio: 'ignore' });
      child.once('error', reject);
      child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`exited ${code}`))));
    });
    const ms = msSince(start);
    return { ms, bytes: (await fs.stat(file)).size };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/**
 * (c) Output firehose: one run printing a million 100-byte lines, stored as its log, beside the
 * same command writing to a file; one SSE reader follows it live. RSS is this process's, which
 * holds the server (and the benchmark's own small client).
 */
export async function firehoseBenchmark(client: BenchClient, sql: postgres.Sql, baseUrl: string, admin: { accountId: string; tokenId: string }): Promise<Section> {
  const floor = await toFile(FIREHOSE);
  const before = process.memoryUsage();
  const rssBefore = before.rss;
  let rssPeak = rssBefore;
  // What the RSS peak was made of: the V8 heap, and buffers outside it.
  let atPeak = process.memoryUsage();
  // The tool launcher (a child process) holds what the server has not taken yet.
  let launcherPeak = 0;
  let launcherFirst = 0;
  const sample = setInterval(() => {
    const now = process.memoryUsage();
    if (now.rss > rssPeak) [rssPeak, atPeak] = [now.rss, now];
    const launcher = launcherRss();
    launcherFirst ||= launcher;
    launcherPeak = Math.max(launcherPeak, launcher);
  }, 100);
  const cpuBefore = process.cpuUsage();
  const wallStart = process.hrtime.bigint();
  try {
    const run = expectStatus(await client.request<{ id: string }>('POST', '/v1/runs', { tool: 'bash', command: FIREHOSE }), 201, 'POST /v1/runs');
    const follower = readStream(baseUrl, run.id, await ticketFor(sql, run.id, admin), false);
    const ended = await waitEnded(client, run.id);
    await follower.done;
    const cpu = process.cpuUsage(cpuBefore);
    const wall = msSince(wallStart);
    const ms = new Date(ended.finished_at).getTime() - new Date(ended.started_at).getTime();
    const mbps = ended.log_bytes / 2 ** 20 / (ms / 1000);
    const floorMbps = floor.bytes / 2 ** 20 / (floor.ms / 1000);
    const linesPerSecond = LINES / (ms / 1000);
    if (ended.status !== 'succeeded' || ended.log_bytes !== floor.bytes) {
      throw new Error(`firehose run ended ${ended.status} with ${ended.log_bytes} log bytes, the file has ${floor.bytes}`);
    }
    return {
      rows: [
        { metric: `firehose: ${LINES / 1000}k lines stored`, value: linesPerSecond, baseline: LINES / (floor.ms / 1000), unit: 'lines/s' },
        { metric: 'firehose: log stored', value: mbps, baseline: floorMbps, unit: 'MB/s', budget: { min: 50 } },
        { metric: 'firehose: server process RSS peak', value: rssPeak / 2 ** 20, baseline: rssBefore / 2 ** 20, unit: 'MiB', budget: { max: 300 } },
        // Baseline: its RSS when first seen (it starts with the first run unless an earlier section started it).
        { metric: 'firehose: tool launcher RSS peak', value: launcherPeak / 2 ** 20, baseline: launcherFirst / 2 ** 20, unit: 'MiB' },
      ],
      notes: [
        `firehose: ${(floor.bytes / 2 ** 20).toFixed(0)} MiB in ${LINES} lines (\`${FIREHOSE.slice(0, 40)}... | head -n ${LINES}\`); run started to finished ${(ms / 1000).toFixed(1)} s, ` +
          `to a file ${(floor.ms / 1000).toFixed(1)} s; one SSE reader got ${(follower.bytes / 2 ** 20).toFixed(0)} MiB, its stream ended ${((follower.endedAt! - new Date(ended.finished_at).getTime()) / 1000).toFixed(1)} s after the run; ` +
          `process CPU ${((cpu.user + cpu.system) / 1000 / wall).toFixed(2)} cores over ${(wall / 1000).toFixed(1)} s; RSS before ${(rssBefore / 2 ** 20).toFixed(0)} MiB (baseline column); ` +
          `V8 heap used/total and buffers before ${mib(before.heapUsed)}/${mib(before.heapTotal)} and ${mib(before.arrayBuffers)} MiB, at the peak ${mib(atPeak.heapUsed)}/${mib(atPeak.heapTotal)} and ${mib(atPeak.arrayBuffers)} MiB`,
        'firehose: structured events (an ansible run\'s per-host task results, the structured output a tool has) are section (o)',
      ],
    };
  } finally {
    clearInterval(sample);
  }
}

/**
 * (d) Live readers: READERS SSE streams on one run printing a timestamped line every 5 ms for
 * about ten seconds; the lag of each line from print to each reader, and the process's CPU.
 */
export async function sseBenchmark(client: BenchClient, sql: postgres.Sql, baseUrl: string, admin: { accountId: string; tokenId: string }): Promise<Section> {
  const command = `import time\nfor i in range(${TICKS}):\n    print('tick', time.time_ns(), flush=True)\n    time.sleep(0.005)\n`;
  const run = expectStatus(await client.request<{ id: string }>('POST', '/v1/runs', { tool: 'python', command }), 201, 'POST /v1/runs');
  const tickets = await Promise.all(Array.from({ length: READERS }, () => ticketFor(sql, run.id, admin)));
  const cpuBefore = process.cpuUsage();
  const wallStart = process.hrtime.bigint();
  const readers = tickets.map((ticket) => readStream(baseUrl, run.id, ticket, true));
  const ended = await waitEnded(client, run.id);
  await Promise.all(readers.map((r) => r.done));
  const cpu = process.cpuUsage(cpuBefore);
  const wall = msSince(wallStart);
  const lags = readers.flatMap((r) => r.lags);
  const complete = readers.filter((r) => r.lags.length === TICKS).length;
  // What one reader alone sees, on a run of its own: the floor the 200 are measured against.
  const single = expectStatus(await client.request<{ id: string }>('POST', '/v1/runs', { tool: 'python', command }), 201, 'POST /v1/runs');
  const alone = readStream(baseUrl, single.id, await ticketFor(sql, single.id, admin), true);
  await waitEnded(client, single.id);
  await alone.done;
  const runMs = new Date(ended.finished_at).getTime() - new Date(ended.started_at).getTime();
  return {
    rows: [
      { metric: `SSE: ${READERS} readers on one run, delivery lag p50`, value: percentile(lags, 50), baseline: percentile(alone.lags, 50), unit: 'ms' },
      { metric: `SSE: ${READERS} readers on one run, delivery lag p99`, value: percentile(lags, 99), baseline: percentile(alone.lags, 99), unit: 'ms' },
      { metric: `SSE: process CPU with ${READERS} readers`, value: (cpu.user + cpu.system) / 1000 / wall, baseline: 1, unit: 'cores' },
    ],
    notes: [
      `sse: a python run printing ${TICKS} timestamped lines 5 ms apart (${(runMs / 1000).toFixed(1)} s); ${READERS} readers of GET /v1/runs/{id}/stream, ` +
        `${complete} got every line (${lags.length} lines in all); baseline is one reader alone on a run of its own. ` +
        `CPU is this process's (server and the ${READERS} readers' parsing) over ${(wall / 1000).toFixed(1)} s, PostgreSQL's not included; the baseline column is one core`,
    ],
  };
}
