import type { Run } from '../runs/run';
/**
 * An ansible run's per-host and per-task results, as Cairn's callback plugin reports them
 * (tools/ansible/cairn_results.py), read into summaries (spec part A 2.1 rule 3, 4.1, 4.4). Pure.
 * The lines are written by the run itself, so every field is checked and bounded here.
 */

/** Result kinds a host's counts and a task's counts carry. */
export const RESULT_KINDS = ['ok', 'changed', 'failed', 'unreachable', 'skipped', 'rescued', 'ignored'] as const;
export type ResultKind = (typeof RESULT_KINDS)[number];

/** A host's verdict over a run, worst first. */
export const HOST_VERDICTS = ['unreachable', 'failed', 'changed', 'ok', 'skipped'] as const;
export type HostVerdict = (typeof HOST_VERDICTS)[number];

/** Verdicts relaunch-failed runs again (spec part A 3.1). */
export const RELAUNCH_VERDICTS: readonly HostVerdict[] = ['failed', 'unreachable'];

export interface HostResult {
  host: string;
  status: HostVerdict;
  counts: Record<ResultKind, number>;
}

export interface TaskResult {
  seq: number;
  play: string | null;
  task: string;
  counts: Partial<Record<ResultKind, number>>;
  /** Each host's result on the task. */
  hosts: Record<string, string>;
  started_at: Date | null;
  finished_at: Date | null;
  duration_ms: number | null;
}

export interface AnsibleResults {
  hosts: HostResult[];
  tasks: TaskResult[];
  /** The plugin saw the playbook's end: its stats were written. */
  ended: boolean;
}

/** At most this many hosts and tasks are kept from one run; names longer than this are cut. */
export const MAX_RESULT_HOSTS = 100_000;
export const MAX_RESULT_TASKS = 10_000;
const MAX_NAME = 1024;

const name = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value.slice(0, MAX_NAME) : null);
const count = (value: unknown): number => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? Math.min(value, 1e9) : 0);
const time = (value: unknown): Date | null => (typeof value === 'number' && Number.isFinite(value) && value > 0 ? new Date(Math.round(value * 1000)) : null);

/** A host's verdict from its counts: unreachable, failed, changed, ok, else skipped. */
export function hostVerdict(counts: Record<ResultKind, number>): HostVerdict {
  if (counts.unreachable > 0) return 'unreachable';
  if (counts.failed > 0) return 'failed';
  if (counts.changed > 0) return 'changed';
  if (counts.ok > 0) return 'ok';
  return 'skipped';
}

/** Reads the plugin's JSON lines; a line that is not a well-formed record is skipped. */
export function parseAnsibleResults(text: string): AnsibleResults {
  const hosts = new Map<string, HostResult>();
  const tasks: TaskResult[] = [];
  let ended = false;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let record: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(line);
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) continue;
      record = parsed as Record<string, unknown>;
    } catch {
      continue;
    }
    if (record.type === 'host') {
      const host = name(record.host);
      if (!host || (hosts.size >= MAX_RESULT_HOSTS && !hosts.has(host))) continue;
      const given = (record.counts && typeof record.counts === 'object' ? record.counts : {}) as Record<string, unknown>;
      const counts = Object.fromEntries(RESULT_KINDS.map((k) => [k, count(given[k])])) as Record<ResultKind, number>;
      hosts.set(host, { host, status: hostVerdict(counts), counts });
    } else if (record.type === 'task') {
      const task = name(record.task);
      if (!task || tasks.length >= MAX_RESULT_TASKS) continue;
      const given = (record.hosts && typeof record.hosts === 'object' && !Array.isArray(record.hosts) ? record.hosts : {}) as Record<string, unknown>;
      const perHost: Record<string, string> = {};
      const counts: Partial<Record<ResultKind, number>> = {};
      for (const [host, status] of Object.entries(given).slice(0, MAX_RESULT_HOSTS)) {
        if (typeof status !== 'string' || !(RESULT_KINDS as readonly string[]).includes(status)) continue;
        perHost[host.slice(0, MAX_NAME)] = status;
        counts[status as ResultKind] = (counts[status as ResultKind] ?? 0) + 1;
      }
      const started = time(record.started);
      const finished = time(record.finished);
      tasks.push({
        seq: tasks.length,
        play: name(record.play),
        task,
        counts,
        hosts: perHost,
        started_at: started,
        finished_at: finished,
        duration_ms: started && finished ? Math.max(0, finished.getTime() - started.getTime()) : null,
      });
    } else if (record.type === 'end') {
      ended = true;
    }
  }
  return { hosts: [...hosts.values()], tasks, ended };
}

/**
 * Why a run that exited 0 still failed (spec part A 2.1 rule 1): its playbook ended having
 * targeted no host. Undefined when it targeted one or more, or the plugin never saw its end.
 */
export function noHostFailure(results: AnsibleResults): string | undefined {
  if (results.ended && results.hosts.length === 0) {
    return 'the inventory and limit matched no host: nothing ran, so the run is not a success';
  }
  return undefined;
}

/** What a run's exit leaves to read: an ansible run's results, and its facts when its fact cache is on over a stored inventory. */
export interface ResultsWanted {
  ansible: boolean;
  facts: boolean;
}

export const resultsWanted = (run: Pick<Run, 'tool' | 'spec'>): ResultsWanted => ({
  ansible: run.tool === 'ansible',
  facts: run.tool === 'ansible' && !!run.spec.fact_cache && !!run.spec.inventory_id,
});

