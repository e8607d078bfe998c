import { finalStateOf, type ExecutionOutcome } from '../core/run-outcome';
import { runView } from '../core/run-view';
import type { Db } from '../store/db';
import { getRun, updateRunIf, type Run } from '../store/runs';

/** Runs move under compare-and-set; a move that loses a race reads again, a bounded number of times. */
export const MAX_MOVE_TRIES = 20;

/**
 * Ends a run: its terminal status and its `run.finished` event in one write. A run already ended is
 * left as it is, so every path that can end a run (the workflow, a cancel, the sweeper) may call
 * this and the end is still recorded exactly once.
 */
export async function recordRunEnd(db: Db, runId: string, outcome: ExecutionOutcome): Promise<Run | undefined> {
  for (let i = 0; i < MAX_MOVE_TRIES; i++) {
    const current = await getRun(db, runId);
    if (!current || current.finished_at) return undefined;
    const ended = await updateRunIf(
      db,
      current,
      { ...finalStateOf(outcome, current.cancel_requested_by), finished_at: new Date() },
      { kind: 'run.finished', body: (next) => ({ run: runView(next) }) },
    );
    if (ended) return ended;
  }
  throw new Error(`run ${runId} kept changing under ${MAX_MOVE_TRIES} tries to end it`);
}
