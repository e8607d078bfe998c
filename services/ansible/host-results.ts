import { noHostFailure, RELAUNCH_VERDICTS, type AnsibleResults } from '../../core/ansible/ansible-results';
import { badRequest, conflict, notFound } from '../../core/errors';
import type { EvidenceHostSummary, EvidenceTaskSummary } from '../../core/runs/evidence';
import type { Run } from '../../core/runs/run';
import type { ExecutionOutcome } from '../../core/runs/run-outcome';
import type { Db, Sql } from '../../store/db';
import {
  fleetWindow,
  hostsWithStatus,
  listHostRuns,
  listRunHostResults,
  listRunTaskResults,
  previousRunId,
  pruneResultHistory,
  replaceRunResults,
  taskWindow,
} from '../../store/host-results';
import type { Caller } from '../../store/tokens';
import { readableRun, readerOf } from '../access/access';

/**
 * Per-host and per-task results of ansible runs (spec part A 2.1 rules 1 and 3, 2.13, 3.1, 4.1,
 * 4.4; part B 8): stored when a run's process exits, and every read over them. Reads cover only
 * runs the caller may read (services/access.ts), so a host or task seen only in others' runs is
 * not shown.
 */

/** Fleet and task window: default 10, cap 100 (spec part B 8). Host history: default 10, cap 500. */
export const WINDOW_DEFAULT = 10;
export const WINDOW_CAP = 100;
export const HOST_RUNS_DEFAULT = 10;
export const HOST_RUNS_CAP = 500;

/**
 * Stores what an ansible run's callback plugin reported (read from its work dir by
 * activities/run-results.ts), replacing an earlier attempt's, and returns the run's outcome: a
 * clean exit whose playbook targeted no host is a failure with the reason (spec part A 2.1 rule 1).
 */
export async function storeAnsibleResults(sql: Sql, run: Run, results: AnsibleResults | undefined, outcome: Extract<ExecutionOutcome, { kind: 'exited' }>): Promise<ExecutionOutcome> {
  if (!results) return outcome;
  const finishedAt = new Date();
  await sql.begin((tx) => replaceRunResults(tx, run.id, results.hosts, results.tasks, finishedAt));
  const noHosts = noHostFailure(results);
  if (noHosts && outcome.exitCode === 0) return { kind: 'exited_failed', exitCode: 0, message: noHosts };
  return outcome;
}

/** A run's host and task summaries, as its evidence shows them. */
export async function runSummaries(db: Db, run: Run): Promise<{ hosts: EvidenceHostSummary[]; tasks: EvidenceTaskSummary[] }> {
  if (run.tool !== 'ansible') return { hosts: [], tasks: [] };
  const [hosts, tasks] = await Promise.all([listRunHostResults(db, run.id), listRunTaskResults(db, run.id)]);
  return {
    hosts: hosts.map((h) => ({ host: h.host, status: h.status, counts: h.counts })),
    tasks: tasks.map((t) => ({
      play: t.play,
      task: t.task,
      counts: t.counts as Record<string, number>,
      hosts: t.hosts,
      started_at: t.started_at?.toISOString() ?? null,
      finished_at: t.finished_at?.toISOString() ?? null,
      duration_ms: t.duration_ms,
    })),
  };
}

/** The hosts relaunch-failed runs again: those the run left failed or unreachable; 409 when none. */
export async function hostsToRelaunch(db: Db, run: Run): Promise<string[]> {
  if (run.tool !== 'ansible') {
    throw conflict(`run ${run.id} is not an ansible run; relaunch-failed runs again the hosts an ansible run left failed or unreachable`, { tool: run.tool });
  }
  const hosts = await hostsWithStatus(db, run.id, RELAUNCH_VERDICTS);
  if (hosts.length === 0) throw conflict(`run ${run.id} left no host failed or unreachable; there is nothing to relaunch`);
  return hosts;
}

/** A host pattern naming exactly these hosts, for `limit`: each name as itself, joined by commas. */
export function limitOf(hosts: string[]): string {
  return hosts.join(',');
}

/** A window or limit from a query: default when absent, the cap when larger (echoed by the caller). */
export function boundedCount(value: string | undefined, field: string, fallback: number, cap: number): number {
  if (value === undefined || value === '') return fallback;
  if (!/^[0-9]+$/.test(value) || Number(value) < 1) throw badRequest(`${field} must be a whole number of at least 1`, { field });
  return Math.min(Number(value), cap);
}

const ms = (run: Run): number | null => (run.started_at && run.finished_at ? run.finished_at.getTime() - run.started_at.getTime() : null);

/**
 * A run against a baseline (spec part A 4.1): each host's verdict at both ends and what changed
 * (`fixed`, `broken`, `changed`, `same`, `added`, `removed`), each task's duration at both ends,
 * and the runs' durations. `with` is a run id or `prev`, the run before it from the same source
 * (store/host-results.ts previousRunId).
 */
export async function compareRuns(db: Db, caller: Caller, runId: string, withRun: string): Promise<Record<string, unknown>> {
  const run = await readableRun(db, caller, runId);
  let baselineId = withRun;
  if (withRun === 'prev') {
    const previous = await previousRunId(db, run, readerOf(caller));
    if (!previous) throw notFound(`a run before ${run.id} from the same source`);
    baselineId = previous;
  }
  if (baselineId === run.id) throw badRequest('with: a run is not compared with itself', { field: 'with' });
  const baseline = await readableRun(db, caller, baselineId);
  const [afterHosts, beforeHosts, afterTasks, beforeTasks] = await Promise.all([
    listRunHostResults(db, run.id),
    listRunHostResults(db, baseline.id),
    listRunTaskResults(db, run.id),
    listRunTaskResults(db, baseline.id),
  ]);
  const before = new Map(beforeHosts.map((h) => [h.host, h.status]));
  const after = new Map(afterHosts.map((h) => [h.host, h.status]));
  const bad = (s: string) => s === 'failed' || s === 'unreachable';
  const hosts = [...new Set([...before.keys(), ...after.keys()])].sort().map((host) => {
    const b = before.get(host) ?? null;
    const a = after.get(host) ?? null;
    const change = b === null ? 'added' : a === null ? 'removed' : b === a ? 'same' : bad(b) && !bad(a) ? 'fixed' : !bad(b) && bad(a) ? 'broken' : 'changed';
    return { host, before: b, after: a, change };
  });
  const key = (t: { play: string | null; task: string }) => `${t.play ?? ''}\u0000${t.task}`;
  const beforeTask = new Map<string, number | null>();
  for (const t of beforeTasks) if (!beforeTask.has(key(t))) beforeTask.set(key(t), t.duration_ms);
  const seen = new Set<string>();
  const tasks: Record<string, unknown>[] = [];
  for (const t of afterTasks) {
    if (seen.has(key(t))) continue;
    seen.add(key(t));
    const b = beforeTask.get(key(t)) ?? null;
    tasks.push({ play: t.play, task: t.task, before_ms: b, after_ms: t.duration_ms, delta_ms: b !== null && t.duration_ms !== null ? t.duration_ms - b : null });
  }
  for (const t of beforeTasks) {
    if (seen.has(key(t))) continue;
    seen.add(key(t));
    tasks.push({ play: t.play, task: t.task, before_ms: t.duration_ms, after_ms: null, delta_ms: null });
  }
  const counts: Record<string, number> = {};
  for (const h of hosts) counts[h.change] = (counts[h.change] ?? 0) + 1;
  const [bMs, aMs] = [ms(baseline), ms(run)];
  return {
    run: { id: run.id, status: run.status },
    baseline: { id: baseline.id, status: baseline.status, chosen_by: withRun === 'prev' ? 'prev' : 'with' },
    hosts,
    host_changes: counts,
    tasks,
    duration: { before_ms: bMs, after_ms: aMs, delta_ms: bMs !== null && aMs !== null ? aMs - bMs : null },
  };
}

/**
 * Hosts ranked by failures over each host's newest `window` runs (spec part A 2.13, 4.4). A host
 * is `flaky` when its verdict flipped between failing (failed, unreachable) and not at least
 * twice within the window.
 */
export async function fleet(db: Db, caller: Caller, window: number): Promise<Record<string, unknown>[]> {
  const rows = await fleetWindow(db, window, readerOf(caller));
  return rows.map((row) => {
    const failing = row.verdicts.map((v) => v === 'failed' || v === 'unreachable');
    let flips = 0;
    for (let i = 1; i < failing.length; i++) if (failing[i] !== failing[i - 1]) flips++;
    return {
      host: row.host,
      runs: row.runs,
      failures: row.failures,
      failure_rate: row.runs ? Math.round((row.failures / row.runs) * 1000) / 1000 : 0,
      flaky: flips >= 2,
      last_status: row.last_status,
      last_run_id: row.last_run_id,
      last_seen: row.last_seen,
    };
  });
}

/**
 * Per-task duration trends over each task's newest `window` runs (spec part A 2.13, 4.4): the
 * newest duration, the mean, min and max over the window, and `trend_ms`, the newest minus the
 * mean of the ones before it (null with a single reading).
 */
export async function taskTrends(db: Db, caller: Caller, window: number): Promise<Record<string, unknown>[]> {
  const rows = await taskWindow(db, window, readerOf(caller));
  return rows.map((row) => {
    const d = row.durations.map(Number);
    const earlier = d.slice(1);
    const mean = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
    return {
      play: row.play,
      task: row.task,
      runs: d.length,
      latest_ms: d[0],
      mean_ms: mean(d),
      min_ms: Math.min(...d),
      max_ms: Math.max(...d),
      trend_ms: earlier.length ? d[0] - mean(earlier) : null,
      durations_ms: d,
      last_run_id: row.run_ids[0],
      last_at: row.last_at,
    };
  });
}

/** One host's newest per-run outcomes. */
export async function hostRuns(db: Db, caller: Caller, host: string, limit: number): Promise<Record<string, unknown>[]> {
  const rows = await listHostRuns(db, host, limit, readerOf(caller));
  return rows.map((r) => ({ run_id: r.run_id, status: r.status, counts: r.counts, finished_at: r.finished_at, run_status: r.run_status, template_id: r.template_id }));
}

/** How often the sweeper applies `--retain-history`. */
const PRUNE_EVERY_MS = 60_000;
let lastPrune = 0;

/** The sweeper's share: with `--retain-history N`, once a minute, summaries past the newest N of each host and task go. */
export async function sweepResultHistory(sql: Sql, keep: number | undefined, now = Date.now()): Promise<{ hosts: number; tasks: number } | undefined> {
  if (keep === undefined || now - lastPrune < PRUNE_EVERY_MS) return undefined;
  lastPrune = now;
  return pruneResultHistory(sql, keep);
}
