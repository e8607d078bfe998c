import type { Db } from './db';

/** What was last reported to the forge for a pull request's run (docs/api.md, `pull_request_report`). */
export interface PullRequestReport {
  /** `queued`, `planned`, `applied`, `refused`: the phase the latest report (or attempt) is about. */
  phase?: string;
  /** The commit status last reported: `pending`, `success`, `failure` or `error`. */
  state?: string;
  reported_at?: string;
  comment_posted?: boolean;
  /** A forge call failing and being retried: attempts so far, the error, when it is tried next. */
  failure?: { attempts: number; error: string; next_try_at: string | null } | null;
}

/** A run a review trigger started for a pull request (schema/039). */
export interface PullRequestRun {
  run_id: string;
  trigger_id: string;
  forge: string;
  repository: string;
  number: number;
  head_sha: string;
  purpose: 'plan' | 'apply';
  report: PullRequestReport;
  created_at: Date;
}

export async function insertPullRequestRun(db: Db, row: Omit<PullRequestRun, 'report' | 'created_at'>): Promise<void> {
  await db`
    INSERT INTO pull_request_runs (run_id, trigger_id, forge, repository, number, head_sha, purpose)
    VALUES (${row.run_id}, ${row.trigger_id}, ${row.forge}, ${row.repository}, ${row.number}, ${row.head_sha}, ${row.purpose})
    ON CONFLICT (run_id) DO NOTHING`;
}

export async function getPullRequestRun(db: Db, runId: string): Promise<PullRequestRun | undefined> {
  const [row] = await db<PullRequestRun[]>`SELECT * FROM pull_request_runs WHERE run_id = ${runId}`;
  return row;
}

/** The latest plan of a pull request under a trigger. */
export async function latestPullRequestPlan(db: Db, triggerId: string, repository: string, number: number): Promise<PullRequestRun | undefined> {
  const [row] = await db<PullRequestRun[]>`
    SELECT * FROM pull_request_runs WHERE trigger_id = ${triggerId} AND repository = ${repository} AND number = ${number} AND purpose = 'plan'
    ORDER BY created_at DESC, run_id DESC LIMIT 1`;
  return row;
}

/** Merges into the run's report. */
export async function updatePullRequestReport(db: Db, runId: string, report: PullRequestReport): Promise<void> {
  await db`UPDATE pull_request_runs SET report = report || ${db.json(report as never)} WHERE run_id = ${runId}`;
}
