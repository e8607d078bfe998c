import { newId } from '../../core/ids';
import { finalStateOf, type ExecutionOutcome } from '../../core/runs/run-outcome';
import { runView } from '../../core/runs/run-view';
import type { Db, Sql } from '../../store/db';
import type { AuditEntryFields } from '../../core/audit/audit-chain';
import { recordedRelease } from '../../store/audit';
import { getRun, listChildRuns, updateRunIf, type RunChanges } from '../../store/runs';
import type { Effect } from '../../store/outbox';
import { entryFields, serviceOrigin } from '../audit/audit';
import { PARENT_KINDS, type Run } from '../../core/runs/run';

/** Runs move under compare-and-set; a move that loses a race reads again, a bounded number of times. */
const MAX_MOVE_TRIES = 20;

/** A move of a run: the changes, the event that reports them, and optionally its chain entry. */
export interface RunMove {
  changes: RunChanges;
  event: { kind: string; body: (next: Run) => Record<string, unknown> };
  guard?: { notCanceled?: boolean };
  audit?: (next: Run) => AuditEntryFields & { run_id: string | null };
  /** After-commit effects the move owes (store/outbox.ts), added only if it is made. */
  owed?: Effect[];
}

/**
 * The one way a run moves. Reads the run, asks `decide` what to do with it, and makes that move as
 * one compare-and-set statement (`updateRunIf`); when another move won the race, reads again and
 * decides anew. `decide` returns `{ settled }` to make no move, with what to answer. Works inside a
 * caller's transaction too (a decision moves its run under the row lock it took). `justRead`: the
 * run as the caller has just read it, taken for the first try instead of reading it again (the
 * compare-and-set finds it stale as it would a fresh read).
 */
export async function moveRun<T>(
  sql: Db,
  runId: string,
  what: string,
  decide: (current: Run | undefined) => RunMove | { settled: T },
  justRead?: Run,
): Promise<{ moved: Run; previous: Run } | { settled: T }> {
  for (let i = 0; i < MAX_MOVE_TRIES; i++) {
    const current = i === 0 && justRead ? justRead : await getRun(sql, runId);
    const move = decide(current);
    if ('settled' in move) return move;
    const moved = await updateRunIf(sql, current!, move.changes, move.event, move.guard, move.audit, move.owed);
    if (moved) return { moved, previous: current! };
  }
  throw new Error(`run ${runId} kept changing under ${MAX_MOVE_TRIES} tries to ${what}`);
}

/**
 * The one way a run ends: its terminal status, its `run.finished` event and its `run.ended` chain
 * entry in one statement, a compare-and-set on the run as read. A run already ended is left as it
 * is, so every path that can end a run (the workflow, a decision, an approval step's timeout, a
 * cancel, the outbox) calls this and the end is still recorded once. A parent's end owes the
 * ending of any step or shard left unended (`run.end_children`): every path ends them before the
 * parent, so this is for a server lost in between.
 */
export async function recordRunEnd(sql: Db, runId: string, outcome: ExecutionOutcome): Promise<Run | undefined> {
  const result = await moveRun(sql, runId, 'end it', (current) => {
    if (!current || current.finished_at) return { settled: undefined };
    return {
      changes: { ...finalStateOf(outcome, current.cancel_requested_by), finished_at: new Date() },
      event: { kind: 'run.finished', body: (next) => ({ run: runView(next, 'preview') }) },
      audit: (next) =>
        entryFields(serviceOrigin('RUN', `/v1/runs/${runId}`), next.status, {
          id: newId('aud'),
          body: { kind: 'run.ended', run_id: runId, status: next.status, exit_code: next.exit_code, error: next.error },
          run_id: runId,
        }),
      owed: PARENT_KINDS.includes(current.kind) ? [{ effect: 'run.end_children', subject: runId, payload: { message: 'not run: its parent ended first' } }] : [],
    };
  });
  return 'settled' in result ? undefined : result.moved;
}

/**
 * Ends every step or shard of a parent that has not ended: it never ran. Called before the parent's
 * own end by its workflow, by a cancel, and by a rejection in its own transaction; the parent's end
 * owes it again (`run.end_children`) for a server lost in between.
 */
export async function endUnrunChildren(sql: Db, parentRunId: string, message: string): Promise<void> {
  for (const child of await listChildRuns(sql, parentRunId)) {
    if (!child.finished_at) await recordRunEnd(sql, child.id, { kind: 'not_run', message });
  }
}

/**
 * Why a run about to execute must not, though it looks released (`refusal`): the audit chain, not
 * the run row, says whether it was held and whether a decision let it go. A run whose row was moved
 * by anything but a recorded move (a hand in the database) is refused here, whatever started it.
 * With the run as read in the same round trip, for the caller's claim (moveRun's `justRead`).
 */
export async function unexplainedRelease(sql: Sql, runId: string): Promise<{ refusal?: string; run?: Run }> {
  const release = await recordedRelease(sql, runId);
  // A run that does not exist is the caller's to report.
  if (!release) return {};
  const { run, root, submittedStatus, approved } = release;
  if (submittedStatus === null) return { run, refusal: `not executed: the audit chain records no submission of run ${root}` };
  if (submittedStatus === 'held' && !approved) return { run, refusal: `not executed: run ${root} was held for approval and no recorded decision released it` };
  return { run };
}
