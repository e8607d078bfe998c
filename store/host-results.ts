import type { HostResult, TaskResult } from '../core/ansible/ansible-results';
import { runReadableBy } from './access';
import type { Db } from './db';

/**
 * Each ansible run's per-host and per-task results (spec part A 2.1 rule 3, 4.1, 4.4; part B 8),
 * as its callback plugin reported them, and the reads over them: a run's own, a host's history,
 * the fleet and the tasks over a window of recent runs.
 */

export interface StoredHostResult extends HostResult {
  run_id: string;
  finished_at: Date;
}

export interface StoredTaskResult extends TaskResult {
  run_id: string;
}

/** Replaces a run's results with one attempt's, in one transaction-safe pair of statements. */
export async function replaceRunResults(db: Db, runId: string, hosts: HostResult[], tasks: TaskResult[], finishedAt: Date): Promise<void> {
  await db`DELETE FROM run_host_results WHERE run_id = ${runId}`;
  await db`DELETE FROM run_task_results WHERE run_id = ${runId}`;
  const CHUNK = 1000;
  for (let i = 0; i < hosts.length; i += CHUNK) {
    const rows = hosts.slice(i, i + CHUNK).map((h) => ({ run_id: runId, host: h.host, status: h.status, counts: db.json(h.counts), finished_at: finishedAt }));
    await db`INSERT INTO run_host_results ${db(rows)}`;
  }
  for (let i = 0; i < tasks.length; i += CHUNK) {
    const rows = tasks.slice(i, i + CHUNK).map((t) => ({
      run_id: runId,
      seq: t.seq,
      play: t.play,
      task: t.task,
      counts: db.json(t.counts),
      hosts: db.json(t.hosts),
      started_at: t.started_at,
      finished_at: t.finished_at,
      duration_ms: t.duration_ms,
    }));
    await db`INSERT INTO run_task_results ${db(rows)}`;
  }
}

export async function listRunHostResults(db: Db, runId: string): Promise<StoredHostResult[]> {
  return db<StoredHostResult[]>`SELECT run_id, host, status, counts, finished_at FROM run_host_results WHERE run_id = ${runId} ORDER BY host`;
}

export async function listRunTaskResults(db: Db, runId: string): Promise<StoredTaskResult[]> {
  return db<StoredTaskResult[]>`
    SELECT run_id, seq, play, task, counts, hosts, started_at, finished_at, duration_ms
    FROM run_task_results WHERE run_id = ${runId} ORDER BY seq`;
}

/** A run's hosts left with one of `statuses`. */
export async function hostsWithStatus(db: Db, runId: string, statuses: readonly string[]): Promise<string[]> {
  const rows = await db<{ host: string }[]>`
    SELECT host FROM run_host_results WHERE run_id = ${runId} AND status IN ${db(statuses as string[])} ORDER BY host`;
  return rows.map((r) => r.host);
}

/** Whom a read is for: undefined reads every run (an admin), else only runs the account may read. */
const readable = (db: Db, readerId: string | undefined, alias: string) => (readerId === undefined ? db`true` : runReadableBy(db, readerId, alias));

export interface HostRun {
  run_id: string;
  status: string;
  counts: Record<string, number>;
  finished_at: Date;
  run_status: string;
  template_id: string | null;
}

/** One host's newest per-run outcomes, newest first. */
export async function listHostRuns(db: Db, host: string, limit: number, readerId?: string): Promise<HostRun[]> {
  return db<HostRun[]>`
    SELECT h.run_id, h.status, h.counts, h.finished_at, r.status AS run_status, r.template_id
    FROM run_host_results h JOIN runs r ON r.id = h.run_id
    WHERE h.host = ${host} AND ${readable(db, readerId, 'r')}
    ORDER BY h.finished_at DESC, h.run_id DESC
    LIMIT ${limit}`;
}

export interface FleetRow {
  host: string;
  runs: number;
  failures: number;
  /** Verdicts in the window, newest first. */
  verdicts: string[];
  last_status: string;
  last_run_id: string;
  last_seen: Date;
}

/**
 * Every host with its newest `window` readable runs: how many ended failed or unreachable, the
 * verdicts newest first. Ranked by failures, then by most recent.
 */
export async function fleetWindow(db: Db, window: number, readerId?: string): Promise<FleetRow[]> {
  return db<FleetRow[]>`
    WITH ranked AS (
      SELECT h.host, h.status, h.run_id, h.finished_at,
             row_number() OVER (PARTITION BY h.host ORDER BY h.finished_at DESC, h.run_id DESC) AS n
      FROM run_host_results h JOIN runs r ON r.id = h.run_id
      WHERE ${readable(db, readerId, 'r')}
    )
    SELECT host,
           count(*)::int AS runs,
           count(*) FILTER (WHERE status IN ('failed', 'unreachable'))::int AS failures,
           array_agg(status ORDER BY n) AS verdicts,
           (array_agg(status ORDER BY n))[1] AS last_status,
           (array_agg(run_id ORDER BY n))[1] AS last_run_id,
           max(finished_at) AS last_seen
    FROM ranked WHERE n <= ${window}
    GROUP BY host
    ORDER BY failures DESC, last_seen DESC, host`;
}

/** Hosts with per-host results, by the verdict of each host's newest result (ok, changed, failed, unreachable, skipped). */
export async function hostsByLatestVerdict(db: Db): Promise<{ status: string; n: number }[]> {
  return db<{ status: string; n: number }[]>`
    SELECT status, count(*)::int AS n FROM (
      SELECT DISTINCT ON (host) host, status FROM run_host_results ORDER BY host, finished_at DESC, run_id DESC
    ) latest GROUP BY status ORDER BY status`;
}

export interface TaskTrendRow {
  play: string | null;
  task: string;
  /** Durations in ms, newest first. */
  durations: number[];
  run_ids: string[];
  last_at: Date;
}

/** Every task (by play and name) with its newest `window` readable durations. */
export async function taskWindow(db: Db, window: number, readerId?: string): Promise<TaskTrendRow[]> {
  return db<TaskTrendRow[]>`
    WITH ranked AS (
      SELECT t.play, t.task, t.duration_ms, t.run_id, t.finished_at,
             row_number() OVER (PARTITION BY t.play, t.task ORDER BY t.finished_at DESC, t.run_id DESC) AS n
      FROM run_task_results t JOIN runs r ON r.id = t.run_id
      WHERE t.duration_ms IS NOT NULL AND t.finished_at IS NOT NULL AND ${readable(db, readerId, 'r')}
    )
    SELECT play, task, array_agg(duration_ms ORDER BY n) AS durations, array_agg(run_id ORDER BY n) AS run_ids, max(finished_at) AS last_at
    FROM ranked WHERE n <= ${window}
    GROUP BY play, task
    ORDER BY last_at DESC, task`;
}

/**
 * The run before `run` (ids sort by creation) from the same source, for `compare?with=prev`: the newest ended run created
 * before it of the same template, or without one the same tool, playbook and inventory asked for
 * by the same account; only runs the reader may read.
 */
export async function previousRunId(
  db: Db,
  run: { id: string; template_id: string | null; tool: string; account_id: string | null; spec: { playbook?: string; inventory_id?: string; inventory?: string; command: string } },
  readerId?: string,
): Promise<string | undefined> {
  const same = run.template_id
    ? db`r.template_id = ${run.template_id}`
    : db`r.template_id IS NULL AND r.tool = ${run.tool} AND r.account_id IS NOT DISTINCT FROM ${run.account_id}
         AND r.spec->>'playbook' IS NOT DISTINCT FROM ${run.spec.playbook ?? null}
         AND r.spec->>'inventory_id' IS NOT DISTINCT FROM ${run.spec.inventory_id ?? null}
         AND r.spec->>'inventory' IS NOT DISTINCT FROM ${run.spec.inventory ?? null}
         AND (${run.spec.playbook ?? null}::text IS NOT NULL OR r.spec->>'command' = ${run.spec.command})`;
  const [row] = await db<{ id: string }[]>`
    SELECT r.id FROM runs r
    WHERE r.id < ${run.id} AND r.finished_at IS NOT NULL AND r.parent_run_id IS NULL
      AND ${same} AND ${readable(db, readerId, 'r')}
    ORDER BY r.id DESC LIMIT 1`;
  return row?.id;
}

/**
 * `--retain-history`: deletes every per-host summary past the newest `keep` of its host, and every
 * per-task summary past the newest `keep` of its task (by play and name). Runs themselves stay.
 */
export async function pruneResultHistory(db: Db, keep: number): Promise<{ hosts: number; tasks: number }> {
  const hosts = await db`
    DELETE FROM run_host_results h USING (
      SELECT run_id, host FROM (
        SELECT run_id, host, row_number() OVER (PARTITION BY host ORDER BY finished_at DESC, run_id DESC) AS n FROM run_host_results
      ) r WHERE n > ${keep}
    ) d WHERE h.run_id = d.run_id AND h.host = d.host`;
  const tasks = await db`
    DELETE FROM run_task_results t USING (
      SELECT run_id, seq FROM (
        SELECT run_id, seq, row_number() OVER (PARTITION BY play, task ORDER BY finished_at DESC NULLS LAST, run_id DESC, seq DESC) AS n
        FROM run_task_results
      ) r WHERE n > ${keep}
    ) d WHERE t.run_id = d.run_id AND t.seq = d.seq`;
  return { hosts: hosts.count, tasks: tasks.count };
}
