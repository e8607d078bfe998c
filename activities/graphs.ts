import { ApplicationFailure } from '@temporalio/common';
import type { ExecutionOutcome } from '../core/runs/run-outcome';
import { runView } from '../core/runs/run-view';
import type { StepDefinition, StepState } from '../core/runs/workflow-graph';
import { endUnrunChildren, moveRun, recordRunEnd, unexplainedRelease } from '../services/runs/run-lifecycle';
import type { Sql } from '../store/db';
import { appendEvent } from '../store/events';
import { markOwed } from '../store/notifications';
import { getRun, getRunForUpdate, listChildRuns, markWorkflowStarted, setRunHold } from '../store/runs';
import { newId } from '../core/ids';
import { approvalBranches } from '../core/runs/approval-branches';
import { entryFields, serviceOrigin } from '../services/audit/audit';

/** A parent's graph as its workflow runs it: the steps and the child run recorded for each. */
export interface LoadedGraph {
  steps: StepDefinition[];
  stepRunIds: Record<string, string>;
}

/** What a graph's parent workflow does to the store: each is idempotent, safe to run twice. */
export function createGraphActivities(deps: { sql: Sql }) {
  const { sql } = deps;

  async function loadGraph(parentRunId: string): Promise<LoadedGraph> {
    const parent = await getRun(sql, parentRunId);
    if (!parent) throw ApplicationFailure.nonRetryable(`run ${parentRunId} does not exist`, 'RunNotFound');
    const children = await listChildRuns(sql, parentRunId);
    return {
      steps: parent.graph as StepDefinition[],
      stepRunIds: Object.fromEntries(children.map((child) => [child.step_name!, child.id])),
    };
  }

  /**
   * The parent starts running (event `run.started`); a parent already ended or canceled says so,
   * and one whose release the audit chain does not record is ended without running a step.
   */
  async function claimParent(parentRunId: string): Promise<'run' | 'finished' | 'canceled'> {
    const { refusal, run: justRead } = await unexplainedRelease(sql, parentRunId);
    if (refusal) {
      await endUnrunChildren(sql, parentRunId, `not run: ${refusal}`);
      await recordRunEnd(sql, parentRunId, { kind: 'refused', message: refusal });
      return 'finished';
    }
    const result = await moveRun<'run' | 'finished' | 'canceled'>(sql, parentRunId, 'start it', (run) => {
      if (!run || run.finished_at) return { settled: 'finished' };
      if (run.cancel_requested_at) return { settled: 'canceled' };
      if (run.status === 'running') return { settled: 'run' };
      return {
        changes: { status: 'running', started_at: new Date(), attempts: run.attempts + 1 },
        event: { kind: 'run.started', body: (next) => ({ run: runView(next, 'preview') }) },
        guard: { notCanceled: true },
      };
    }, justRead);
    return 'settled' in result ? result.settled : 'run';
  }

  async function markStepStarted(stepRunId: string): Promise<void> {
    await markWorkflowStarted(sql, stepRunId);
  }

  /** How a step's run ended, as its graph reads it: anything but success is a failure. */
  async function stepResult(stepRunId: string): Promise<StepState> {
    const run = await getRun(sql, stepRunId);
    return run?.status === 'succeeded' ? 'succeeded' : 'failed';
  }

  /**
   * The workflow reached an approval step: the step is held (blocker approval_needed) and the
   * parent announces `workflow.step_awaiting_approval` with what each answer runs next.
   */
  async function openApproval(parentRunId: string, stepRunId: string, expiresAt: string | null): Promise<void> {
    await sql.begin(async (tx) => {
      const step = await getRunForUpdate(tx, stepRunId);
      if (!step || step.status !== 'pending' || step.finished_at) return;
      const parent = (await getRunForUpdate(tx, parentRunId))!;
      const steps = (parent.graph ?? []) as StepDefinition[];
      const definition = steps.find((s) => s.name === step.step_name)!;
      const hold = { policies: [], agent_hold: false, require_reason: false, distinct_approver: false, expires_at: expiresAt };
      await setRunHold(tx, stepRunId, hold);
      // Into its hold: the event owed for it and its chain entry, in the statement that moves it.
      const held = await moveRun(tx, stepRunId, 'hold it', (current) =>
        current?.status === 'pending' && !current.finished_at
          ? {
              changes: { status: 'held' },
              event: { kind: 'run.held', body: (next) => ({ run: runView({ ...next, hold }, 'preview'), blocker: 'approval_needed', hold }) },
              audit: () =>
                entryFields(serviceOrigin('RUN', `/v1/runs/${stepRunId}`), 'held', {
                  id: newId('aud'),
                  body: { kind: 'run.held', run_id: stepRunId, workflow_run_id: parentRunId, step: definition.name, expires_at: expiresAt },
                  run_id: stepRunId,
                }),
            }
          : { settled: undefined },
      );
      if ('settled' in held) throw new Error(`step ${stepRunId} changed under its row lock`);
      // The workflow, with the step it waits at (spec part B 6.1), owed to the workflow's
      // notification targets from this same transaction (a hold of each step it waits at).
      const seq = await appendEvent(tx, parentRunId, 'workflow.step_awaiting_approval', {
        run: runView(parent, 'preview'),
        awaiting_step: {
          id: stepRunId,
          name: definition.name,
          description: definition.description ?? null,
          ...approvalBranches(steps, definition),
          expires_at: expiresAt,
        },
      });
      if (!parent.parent_run_id) await markOwed(tx, parentRunId, seq, 'workflow.step_awaiting_approval');
    });
  }

  /**
   * Settles an approval step once its decision arrived or its time ran out: a step still held
   * when the timer fired is denied by the timeout. Returns how it was settled, read from the
   * store, so a decision that won the race with the timer is the one that counts.
   */
  async function settleApproval(stepRunId: string, timeoutSeconds: number): Promise<StepState> {
    return sql.begin(async (tx) => {
      const step = (await getRunForUpdate(tx, stepRunId))!;
      if (step.status === 'held' && !step.finished_at) {
        await recordRunEnd(tx, stepRunId, { kind: 'denied', message: `no decision within the approval timeout of ${timeoutSeconds} s` });
        return 'denied' as const;
      }
      return step.status === 'succeeded' ? ('approved' as const) : ('denied' as const);
    });
  }

  async function skipStep(stepRunId: string, message: string): Promise<void> {
    await recordRunEnd(sql, stepRunId, { kind: 'not_run', message });
  }

  /** Ends every child that has not ended (it never ran), then the parent, each once. */
  async function finishParent(parentRunId: string, outcome: ExecutionOutcome): Promise<void> {
    await endUnrunChildren(sql, parentRunId, 'not run: its workflow ended first');
    await recordRunEnd(sql, parentRunId, outcome);
  }

  /** The run's status as recorded, for the workflow's `CairnRunStatus` search attribute; null for a run that is gone. */
  async function runStatus(runId: string): Promise<string | null> {
    return (await getRun(sql, runId))?.status ?? null;
  }

  return { loadGraph, claimParent, markStepStarted, stepResult, openApproval, settleApproval, skipStep, finishParent, runStatus };
}

export type GraphActivities = ReturnType<typeof createGraphActivities>;
