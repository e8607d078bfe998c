import { newId } from '../core/ids';
import { finalStateOf, type ExecutionOutcome } from '../core/run-outcome';
import { runView } from '../core/run-view';
import type { Sql } from '../store/db';
import { getRunForUpdate, listChildRuns, updateRunIf, type Run } from '../store/runs';
import { appendEntry, serviceOrigin } from './audit';

/** Runs move under compare-and-set; a move that loses a race reads again, a bounded number of times. */
export const MAX_MOVE_TRIES = 20;

/**
 * Ends a run: its terminal status, its `run.finished` event and its `run.ended` chain entry in one
 * transaction, under the run's row lock. A run already ended is left as it is, so every path that
 * can end a run (the workflow, a cancel, the sweeper) may call this and the end is still recorded
 * exactly once.
 */
export async function recordRunEnd(sql: Sql, runId: string, outcome: ExecutionOutcome): Promise<Run | undefined> {
  return sql.begin(async (tx) => {
    const current = await getRunForUpdate(tx, runId);
    if (!current || current.finished_at) return undefined;
    const ended = await updateRunIf(
      tx,
      current,
      { ...finalStateOf(outcome, current.cancel_requested_by), finished_at: new Date() },
      { kind: 'run.finished', body: (next) => ({ run: runView(next) }) },
    );
    if (!ended) throw new Error(`run ${runId} changed under its row lock`);
    await appendEntry(tx, serviceOrigin('RUN', `/v1/runs/${runId}`), ended.status, {
      id: newId('aud'),
      body: { kind: 'run.ended', run_id: runId, status: ended.status, exit_code: ended.exit_code, error: ended.error },
      run_id: runId,
    });
    return ended;
  });
}

/**
 * Ends every step or shard of a parent that has not ended: it never ran. Called before the parent's
 * own end by its workflow, and for a parent that ended with no workflow (rejected, or canceled
 * while held); the sweeper repeats it for a parent whose server died in between.
 */
export async function endUnrunChildren(sql: Sql, parentRunId: string, message: string): Promise<void> {
  for (const child of await listChildRuns(sql, parentRunId)) {
    if (!child.finished_at) await recordRunEnd(sql, child.id, { kind: 'not_run', message });
  }
}
