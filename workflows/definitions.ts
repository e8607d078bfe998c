/**
 * What the API, the sweeper and the workflows agree on: workflow names, their inputs and their
 * signals. No workflow implementation lives here, so a process that starts or signals workflows
 * never loads workflow code.
 */
import { defineSignal } from '@temporalio/workflow';

/** A run's workflow: execute the tool once on the run's queue, raced against its timeout. */
export const RUN_WORKFLOW = 'runWorkflow';
/** A pipeline's, saved workflow's or split's workflow: its steps or shards as child run workflows. */
export const GRAPH_WORKFLOW = 'graphWorkflow';

export interface RunWorkflowInput {
  runId: string;
  /** Zero means no limit. */
  timeoutSeconds: number;
  /**
   * The lease: a worker that renews none for this long has lost the run, and it is requeued. The
   * executing activity renews it by heartbeat (see activities/runs.ts).
   */
  leaseSeconds: number;
  /**
   * The Temporal task queue the executing activity is scheduled on (the run's queue, through
   * workers/names.ts `executionTaskQueue`). Absent in workflows started before named queues were
   * routed: their activity runs on the workflow's own task queue, as it always did.
   */
  executionQueue?: string;
}

export interface GraphWorkflowInput {
  parentRunId: string;
  /** Each step's own timeout, seconds; zero means none. */
  stepTimeoutSeconds: number;
  leaseSeconds: number;
  /** Every step's and shard's execution task queue (the parent's queue); see RunWorkflowInput. */
  executionQueue?: string;
}

/** An approval step was decided through the API; the workflow reads the decision from the store. */
export const stepDecided = defineSignal<[string]>('stepDecided');
