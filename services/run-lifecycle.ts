import { finalStateOf, type ExecutionOutcome } from '../core/run-outcome';
import { runView } from '../core/run-view';
import type { Sql } from '../store/db';
import { appendEvent } from '../store/events';
import { getRunForUpdate, markFinished, type Run } from '../store/runs';

/**
 * Ends a run: its terminal status and its `run.finished` event in one write. A run already ended is
 * left as it is, so every path that can end a run (the workflow, a cancel, the sweeper) may call
 * this and the end is still recorded exactly once.
 */
export async function recordRunEnd(sql: Sql, runId: string, outcome: ExecutionOutcome): Promise<Run | undefined> {
  return sql.begin(async (tx) => {
    const run = await getRunForUpdate(tx, runId);
    if (!run || run.finished_at) return undefined;
    const ended = await markFinished(tx, runId, finalStateOf(outcome, run.cancel_requested_by));
    await appendEvent(tx, runId, 'run.finished', { run: runView(ended) });
    return ended;
  });
}
