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
import { imageMallocSettings } from './environment';
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
  /**
   * With `ticks`, each line's lag: from its print, or from the stream's opening when it was printed
   * before (a reader cannot be sent a line before it asks; that line's wait is its catch-up).
   */
  lags: number[];
  /** With `ticks`, lines printed before the stream opened. */
  printedBeforeOpen: number;
  /** From the request to the stream's answer (its headers): the ticket redeemed and the run read. */
  openMs?: number;
  endedAt?: number;
}

/** One SSE client of GET /v1/runs/{id}/stream: counts log bytes; with `ticks`, the lag of each `tick <ns>` line. */
function readStream(baseUrl: string, runId: string, ticket: string, ticks: boolean): Reader {
  const base = new URL(baseUrl);
  const reader: Reader = { done: Promise.resolve(), bytes: 0, lags: [], printedBeforeOpen: 0 };
  const asked = Date.now();
  let openedAt = Infinity;
  reader.done = new Promise((resolve, reject) => {
    const req = http.get({ host: base.hostname, port: base.port, path: `/v1/runs/${runId}/stream?ticket=${ticket}` }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
      openedAt = Date.now();
      reader.openMs = openedAt - asked;
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
            for (const line of data.text.split('\n')) {
              if (!line.startsWith('tick ')) continue;
              const printed = Number(line.slice(5)) / 1e6;
              if (printed < openedAt) reader.printedBeforeOpen++;
              reader.lags.push(now - Math.max(printed, openedAt));
            }
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

/** A process's resident set from /proc, in bytes; 0 once it is gone. */
function rssOf(pid: number | string): number {
  try {
    const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return rss ? Number(rss[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** CPU seconds a process has used, user and system, from /proc (clock ticks of 1/100 s). */
function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The RSS of a server process's tool launcher children (runtime/launcher-process.ts), from /proc; 0 where there is none. */
function launcherRss(serverPid: number): number {
  let total = 0;
  try {
    for (const task of readdirSync(`/proc/${serverPid}/task`)) {
      for (const pid of readFileSync(`/proc/${serverPid}/task/${task}/children`, 'utf8').split(' ').filter(Boolean)) {
        try {
          if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('launcher-process')) total += rssOf(pid);
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

/**
 * What the firehose's log takes in PostgreSQL, beside what the same bytes took stored as before
 * schema 043 (1 MiB chunks of raw bytes, which PostgreSQL compresses with pglz): each value's
 * stored size, as pg_column_size reports it, summed.
 */
async function storedSizes(sql: postgres.Sql, runId: string): Promise<{ now: number; before: number; chunks: number }> {
  const [now] = await sql<{ bytes: number; chunks: number }[]>`
    SELECT sum(pg_column_size(data))::float8 AS bytes, count(*)::int AS chunks FROM run_log_chunks WHERE run_id = ${runId}`;
  await sql`CREATE TEMP TABLE IF NOT EXISTS bench_log_chunks_pglz (start_offset bigint, data bytea)`;
  await sql`TRUNCATE bench_log_chunks_pglz`;
  const piece = Buffer.from(`${LINE}\n`.repeat(Math.floor(2 ** 20 / (LINE.length + 1))));
  const total = LINES * (LINE.length + 1);
  for (let at = 0; at < total; at += piece.length) {
    const data = piece.subarray(0, Math.min(piece.length, total - at));
    await sql`INSERT INTO bench_log_chunks_pglz VALUES (${at}, decode(${data.toString('base64')}, 'base64'))`;
  }
  const [before] = await sql<{ bytes: number }[]>`SELECT sum(pg_column_size(data))::float8 AS bytes FROM bench_log_chunks_pglz`;
  await sql`DROP TABLE bench_log_chunks_pglz`;
  return { now: now.bytes, before: before.bytes, chunks: now.chunks };
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
 * (l) Output firehose: one run printing a million 100-byte lines, stored as its log, beside the
 * same command writing to a file; one SSE reader follows it live. The run goes through a `cairn
 * serve` process of its own (bench/environment.ts), so the RSS and CPU are the server's alone.
 */
export async function firehoseBenchmark(client: BenchClient, sql: postgres.Sql, server: { url: string; pid: number }, admin: { accountId: string; tokenId: string }): Promise<Section> {
  const floor = await toFile(FIREHOSE);
  const rssBefore = rssOf(server.pid);
  let rssPeak = rssBefore;
  // The tool launcher (a child process) holds what the server has not taken yet.
  let launcherPeak = 0;
  let launcherFirst = 0;
  const sample = setInterval(() => {
    rssPeak = Math.max(rssPeak, rssOf(server.pid));
    const launcher = launcherRss(server.pid);
    launcherFirst ||= launcher;
    launcherPeak = Math.max(launcherPeak, launcher);
  }, 100);
  const cpuBefore = cpuSecondsOf(server.pid);
  const wallStart = process.hrtime.bigint();
  try {
    const run = expectStatus(await client.request<{ id: string }>('POST', '/v1/runs', { tool: 'bash', command: FIREHOSE }), 201, 'POST /v1/runs');
    const follower = readStream(server.url, run.id, await ticketFor(sql, run.id, admin), false);
    const ended = await waitEnded(client, run.id);
    await follower.done;
    const cpu = cpuSecondsOf(server.pid) - cpuBefore;
    const wall = msSince(wallStart);
    clearInterval(sample);
    const ms = new Date(ended.finished_at).getTime() - new Date(ended.started_at).getTime();
    const mbps = ended.log_bytes / 2 ** 20 / (ms / 1000);
    const floorMbps = floor.bytes / 2 ** 20 / (floor.ms / 1000);
    const linesPerSecond = LINES / (ms / 1000);
    if (ended.status !== 'succeeded' || ended.log_bytes !== floor.bytes) {
      throw new Error(`firehose run ended ${ended.status} with ${ended.log_bytes} log bytes, the file has ${floor.bytes}`);
    }
    const stored = await storedSizes(sql, run.id);
    return {
      rows: [
        { metric: `firehose: ${LINES / 1000}k lines stored`, value: linesPerSecond, baseline: LINES / (floor.ms / 1000), unit: 'lines/s' },
        { metric: 'firehose: log stored', value: mbps, baseline: floorMbps, unit: 'MB/s', budget: { min: 50 } },
        // Baseline: the same bytes stored as before schema 043 (raw, compressed by PostgreSQL); the budget is to take no more.
        { metric: 'firehose: log size in PostgreSQL', value: stored.now / 2 ** 20, baseline: stored.before / 2 ** 20, unit: 'MiB', budget: { max: Number((stored.before / 2 ** 20).toFixed(2)) } },
        { metric: 'firehose: server process RSS peak', value: rssPeak / 2 ** 20, baseline: rssBefore / 2 ** 20, unit: 'MiB', budget: { max: 300 } },
        // Baseline: its RSS when first seen (it starts with the server's first run).
        { metric: 'firehose: tool launcher RSS peak', value: launcherPeak / 2 ** 20, baseline: launcherFirst / 2 ** 20, unit: 'MiB' },
      ],
      notes: [
        `firehose: ${(floor.bytes / 2 ** 20).toFixed(0)} MiB in ${LINES} lines (\`${FIREHOSE.slice(0, 40)}... | head -n ${LINES}\`) through a \`cairn serve\` process of its own (with the image's malloc settings, ${Object.entries(await imageMallocSettings()).map(([k, v]) => `${k}=${v}`).join(' ')}); run started to finished ${(ms / 1000).toFixed(1)} s, ` +
          `to a file ${(floor.ms / 1000).toFixed(1)} s; one SSE reader got ${(follower.bytes / 2 ** 20).toFixed(0)} MiB, its stream ended ${((follower.endedAt! - new Date(ended.finished_at).getTime()) / 1000).toFixed(1)} s after the run; ` +
          `server process CPU ${(cpu / (wall / 1000)).toFixed(2)} cores over ${(wall / 1000).toFixed(1)} s; its RSS before ${mib(rssBefore)} MiB (baseline column); ` +
          `stored as ${stored.chunks} chunks, ${(stored.now / 2 ** 20).toFixed(2)} MiB (deflated by Cairn); the same bytes as 1 MiB raw chunks compressed by PostgreSQL (pglz), as before schema 043: ${(stored.before / 2 ** 20).toFixed(2)} MiB`,
        'firehose: structured events (an ansible run\'s per-host task results, the structured output a tool has) are section (o)',
      ],
    };
  } finally {
    clearInterval(sample);
  }
}

/**
 * (m) Live readers: READERS SSE streams on one run printing a timestamped line every 5 ms for
 * about ten seconds; the lag of each line to each reader, and the CPU of the `cairn serve` process
 * serving them (one of its own, as in (l); the readers are this process's). The run is under way
 * while the streams open (the run must exist for their tickets), so a reader's first lines were
 * printed before it asked: their lag counts from the stream's opening, and how long the streams
 * took to open is its own row. Counted from the print, those lines' lag was the readers' opening
 * (up to 0.4 s here), which made the p99 of the whole.
 */
export async function sseBenchmark(client: BenchClient, sql: postgres.Sql, server: { url: string; pid: number }, admin: { accountId: string; tokenId: string }): Promise<Section> {
  const baseUrl = server.url;
  const command = `import time\nfor i in range(${TICKS}):\n    print('tick', time.time_ns(), flush=True)\n    time.sleep(0.005)\n`;
  const run = expectStatus(await client.request<{ id: string }>('POST', '/v1/runs', { tool: 'python', command }), 201, 'POST /v1/runs');
  const tickets = await Promise.all(Array.from({ length: READERS }, () => ticketFor(sql, run.id, admin)));
  const cpuBefore = cpuSecondsOf(server.pid);
  const wallStart = process.hrtime.bigint();
  const readers = tickets.map((ticket) => readStream(baseUrl, run.id, ticket, true));
  const ended = await waitEnded(client, run.id);
  await Promise.all(readers.map((r) => r.done));
  const cpu = cpuSecondsOf(server.pid) - cpuBefore;
  const wall = msSince(wallStart);
  const lags = readers.flatMap((r) => r.lags);
  const complete = readers.filter((r) => r.lags.length === TICKS).length;
  // What one reader alone sees, on a run of its own: the floor the 200 are measured against.
  const single = expectStatus(await client.request<{ id: string }>('POST', '/v1/runs', { tool: 'python', command }), 201, 'POST /v1/runs');
  const alone = readStream(baseUrl, single.id, await ticketFor(sql, single.id, admin), true);
  await waitEnded(client, single.id);
  await alone.done;
  const runMs = new Date(ended.finished_at).getTime() - new Date(ended.started_at).getTime();
  const openMs = readers.map((r) => r.openMs!);
  const printedBeforeOpen = readers.reduce((sum, r) => sum + r.printedBeforeOpen, 0);
  return {
    rows: [
      { metric: `SSE: ${READERS} readers on one run, delivery lag p50`, value: percentile(lags, 50), baseline: percentile(alone.lags, 50), unit: 'ms' },
      { metric: `SSE: ${READERS} readers on one run, delivery lag p99`, value: percentile(lags, 99), baseline: percentile(alone.lags, 99), unit: 'ms', budget: { max: 250 } },
      { metric: `SSE: ${READERS} streams opened at once, request to answer p99`, value: percentile(openMs, 99), baseline: alone.openMs!, unit: 'ms' },
      { metric: `SSE: server process CPU with ${READERS} readers`, value: cpu / (wall / 1000), baseline: 1, unit: 'cores' },
    ],
    notes: [
      `sse: a python run printing ${TICKS} timestamped lines 5 ms apart (${(runMs / 1000).toFixed(1)} s); ${READERS} readers of GET /v1/runs/{id}/stream, ` +
        `${complete} got every line (${lags.length} lines in all); baseline is one reader alone on a run of its own. ` +
        `Lag is from the line's print, or from its stream's opening where it was printed before (${printedBeforeOpen} lines, up to ${Math.max(...readers.map((r) => r.printedBeforeOpen))} for one reader); ` +
        `the streams opened in ${percentile(openMs, 50).toFixed(0)} ms at p50, ${Math.max(...openMs).toFixed(0)} ms at most. ` +
        `CPU is the \`cairn serve\` process's (the readers parse in the benchmark's process) over ${(wall / 1000).toFixed(1)} s, PostgreSQL's not included; the baseline column is one core`,
    ],
  };
}
