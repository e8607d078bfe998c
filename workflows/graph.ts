import {
  CancellationScope,
  condition,
  executeChild,
  isCancellation,
  patched,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { GraphActivities } from '../activities/graphs';
import type { ExecutionOutcome } from '../core/runs/run-outcome';
import { graphOutcome, graphSettled, nextSteps, type StepState } from '../core/runs/workflow-graph';
import { runWorkflow, runWorkflowV2 } from './run';
import { SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTES_PATCH, stepDecided, type GraphWorkflowInput } from './definitions';

/** Graphs started from release 2026-12 on start their steps as `runWorkflowV2` (workflows/run.ts). */
const STEPS_V2_PATCH = 'cairn-steps-run-workflow-v2';

/**
 * A pipeline, saved workflow or split: one parent run whose steps are child runs, each its own
 * run workflow (child workflow id = step run id). Ready steps start together; an approval step
 * waits for its decision (a signal) raced against its `approval_timeout`, while other branches
 * go on. The graph's rules live in core/workflow-graph.ts.
 */
export async function graphWorkflow(input: GraphWorkflowInput): Promise<void> {
  const store = proxyLocalActivities<GraphActivities>({
    startToCloseTimeout: '30s',
    // Store writes must outlast a database outage: retry until they land.
    retry: { initialInterval: '500ms', maximumInterval: '10s', nonRetryableErrorTypes: ['RunNotFound'] },
  });
  const decided = new Set<string>();
  setHandler(stepDecided, (stepRunId) => void decided.add(stepRunId));

  // `CairnRunStatus` (set at start) follows the parent's recorded end; see workflows/run.ts.
  const tracksStatus = input.tracksRunStatus !== false && patched(SEARCH_ATTRIBUTES_PATCH);
  // A graph recorded before this patch started its steps as runWorkflow, and replays so.
  const stepWorkflow = patched(STEPS_V2_PATCH) ? runWorkflowV2 : runWorkflow;
  const publishStatus = async () => {
    if (!tracksStatus) return;
    const status = await store.runStatus(input.parentRunId);
    if (status) upsertSearchAttributes([{ key: SEARCH_ATTRIBUTES.runStatus, value: status }]);
  };

  const claim = await store.claimParent(input.parentRunId);
  if (claim === 'finished') return publishStatus();
  const { steps, stepRunIds } = await store.loadGraph(input.parentRunId);
  if (claim === 'canceled') {
    await store.finishParent(input.parentRunId, { kind: 'canceled' });
    return publishStatus();
  }

  const states = new Map<string, StepState>(steps.map((s) => [s.name, 'waiting']));
  const inFlight = new Map<string, Promise<[string, StepState]>>();

  const runStep = async (name: string): Promise<[string, StepState]> => {
    const stepRunId = stepRunIds[name];
    await store.markStepStarted(stepRunId);
    try {
      await executeChild(stepWorkflow, {
        workflowId: stepRunId,
        taskQueue: workflowInfo().taskQueue,
        // A finished step's workflow is never started again under its run id.
        workflowIdReusePolicy: 'REJECT_DUPLICATE',
        args: [
          {
            runId: stepRunId,
            timeoutSeconds: input.stepTimeoutSeconds,
            leaseSeconds: input.leaseSeconds,
            executionQueue: input.executionQueue,
            tracksRunStatus: input.tracksRunStatus,
          },
        ],
      });
    } catch (err) {
      if (isCancellation(err)) throw err;
      // The child recorded its own end; its status below says how it went.
    }
    return [name, await store.stepResult(stepRunId)];
  };

  const awaitDecision = async (name: string): Promise<[string, StepState]> => {
    const step = steps.find((s) => s.name === name)!;
    const stepRunId = stepRunIds[name];
    const timeoutSeconds = step.approval_timeout ?? 0;
    const expiresAt = timeoutSeconds > 0 ? new Date(Date.now() + timeoutSeconds * 1000).toISOString() : null;
    await store.openApproval(input.parentRunId, stepRunId, expiresAt);
    if (timeoutSeconds > 0) await condition(() => decided.has(stepRunId), timeoutSeconds * 1000);
    else await condition(() => decided.has(stepRunId));
    return [name, await store.settleApproval(stepRunId, timeoutSeconds)];
  };

  let outcome: ExecutionOutcome;
  try {
    for (;;) {
      const { ready, skipped } = nextSteps(steps, states);
      for (const { name, why } of skipped) {
        states.set(name, 'skipped');
        await store.skipStep(stepRunIds[name], why);
      }
      for (const name of ready) {
        const approval = steps.find((s) => s.name === name)!.type === 'approval';
        states.set(name, approval ? 'awaiting_approval' : 'running');
        inFlight.set(name, approval ? awaitDecision(name) : runStep(name));
      }
      // A skip can settle or unblock others: look again before waiting.
      if (skipped.length > 0 || ready.length > 0) continue;
      if (graphSettled(states)) break;
      const [name, state] = await Promise.race(inFlight.values());
      inFlight.delete(name);
      states.set(name, state);
    }
    const result = graphOutcome(steps, states);
    outcome = result.ok ? { kind: 'completed' } : { kind: 'children_failed', message: result.error };
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Canceled: the children were canceled with it; let them record their own ends first.
    await CancellationScope.nonCancellable(() => Promise.allSettled(inFlight.values()));
    outcome = { kind: 'canceled' };
  }
  await CancellationScope.nonCancellable(() => store.finishParent(input.parentRunId, outcome));
  await CancellationScope.nonCancellable(publishStatus);
}
