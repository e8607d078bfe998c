import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Sql } from '../store/db';
import { getRun } from '../store/runs';
import { recordToolResults } from '../activities/run-results';
import { RESULTS_FILE } from '../tools/ansible';
import type { BenchClient } from './http';
import type { Section } from './report';
import { submitTrue, waitSucceeded } from './run-client';
import { percentile, timed } from './stats';

const HOSTS = 1000;
const TASKS = 100;
const ROUNDS = 3;

/**
 * The results file of a play of `TASKS` tasks over `HOSTS` hosts, as Cairn's callback plugin
 * (tools/ansible/cairn_results.py) writes it: a line per task naming each host's result, a line
 * per host with its counts, and the end line. Each host's result in a task is one structured event.
 */
function resultsFile(): string {
  const hosts = Array.from({ length: HOSTS }, (_, i) => `host-${String(i).padStart(4, '0')}.example.internal`);
  const lines: string[] = [];
  const start = Date.UTC(2026, 0, 1);
  for (let t = 0; t < TASKS; t++) {
    const results: Record<string, string> = {};
    hosts.forEach((host, i) => (results[host] = (i + t) % 17 === 0 ? 'changed' : 'ok'));
    lines.push(
      JSON.stringify({
        type: 'task',
        play: 'configure the fleet',
        task: `task ${t}: ensure the service is configured`,
        hosts: results,
        started: new Date(start + t * 1000).toISOString(),
        finished: new Date(start + t * 1000 + 900).toISOString(),
      }),
    );
  }
  for (const host of hosts) lines.push(JSON.stringify({ type: 'host', host, counts: { ok: TASKS - 6, changed: 6 } }));
  lines.push(JSON.stringify({ type: 'end' }));
  return `${lines.join('\n')}\n`;
}

/**
 * (o) Structured events: an ansible run's results, 100 tasks over 1,000 hosts (100,000 per-host
 * task results), read from the results file, parsed and stored as Cairn does it when a run
 * exits (services/host-results.ts recordToolResults), beside writing the same bytes to a file.
 * The run is a finished one of the install's, read as an ansible run: what is measured is the
 * ingestion, not ansible-playbook producing 100,000 results, which takes far longer than storing them.
 */
export async function structuredEventsBenchmark(client: BenchClient, sql: Sql): Promise<Section> {
  const finished = await waitSucceeded(client, (await submitTrue(client)).id, 50);
  const stored = await getRun(sql, finished.id);
  if (!stored) throw new Error(`structured events: run ${finished.id} is not in the store`);
  const run = { ...stored, tool: 'ansible' as const };
  const workDir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-bench-events-'));
  try {
    const text = resultsFile();
    const samples = await timed(ROUNDS, 1, () => fs.writeFile(path.join(workDir, 'plain.jsonl'), text));
    await fs.writeFile(path.join(workDir, RESULTS_FILE), text);
    const ingest = await timed(ROUNDS, 0, () => recordToolResults(sql, run, workDir, { kind: 'exited', exitCode: 0, signal: null }));
    const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM run_task_results WHERE run_id = ${run.id}`;
    if (n !== TASKS) throw new Error(`structured events: ${n} task results stored, expected ${TASKS}`);

    const events = HOSTS * TASKS;
    const perSecond = (ms: number) => events / (ms / 1000);
    const ms = percentile(ingest, 50);
    const fileMs = percentile(samples, 50);
    return {
      rows: [
        { metric: `structured events stored (${events / 1000}k host results)`, value: perSecond(ms), baseline: perSecond(fileMs), unit: 'events/s', budget: { min: 20_000 } },
      ],
      notes: [
        `events: ${TASKS} tasks x ${HOSTS} hosts, ${(Buffer.byteLength(text) / 2 ** 20).toFixed(1)} MiB of results; read, parsed and stored in ${ms.toFixed(0)} ms ` +
          `(median of ${ROUNDS}, each replacing the last); the same bytes written to a file in ${fileMs.toFixed(1)} ms`,
      ],
    };
  } finally {
    await fs.rm(workDir, { recursive: true, force: true });
  }
}
