/**
 * What the API, the sweeper and the workflows agree on: workflow names, their inputs and their
 * signals. No workflow implementation lives here, so a process that starts or signals workflows
 * never loads workflow code.
 */
import { defineSignal } from '@temporalio/workflow';

/**
 * Cairn's custom search attributes on the Temporal namespace (the ops window: the Temporal UI and
 * CLI find runs by them, e.g. `CairnRunStatus = 'failed'`). Registered at every start of `serve`
 * and `worker` (cli/temporal-connection.ts `ensureSearchAttributes`); set when a run's workflow
 * starts (services/runs/runs.ts) and the status kept current by the workflow (workflows/run.ts).
 * Every one is a Keyword: matched exactly, never tokenized. Each key is the SDK's
 * `SearchAttributeKey` (what `defineSearchAttributeKey` of @temporalio/common makes), written out
 * because workflow code imports only @temporalio/workflow.
 */
const keyword = <N extends string>(name: N) => ({ name, type: 'KEYWORD' as const });
export const SEARCH_ATTRIBUTES = {
  runStatus: keyword('CairnRunStatus'),
  tool: keyword('CairnTool'),
  requester: keyword('CairnRequester'),
  template: keyword('CairnTemplate'),
  queue: keyword('CairnQueue'),
  source: keyword('CairnSource'),
} as const;

/** The patch id guarding the run workflow's status upserts (replays of earlier histories skip them). */
export const SEARCH_ATTRIBUTES_PATCH = 'cairn-search-attributes';

/** A run's workflow: execute the tool once on the run's queue, within its timeout (workflows/run.ts; `runWorkflow` before release 2026-12). */
export const RUN_WORKFLOW = 'runWorkflowV2';
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
   * workflows/ids.ts `executionTaskQueue`). Absent in workflows started before named queues were
   * routed: their activity runs on the workflow's own task queue, as it always did.
   */
  executionQueue?: string;
  /**
   * False when the server that started the run was set `--temporal-run-status off`: the workflow
   * upserts no `CairnRunStatus` (a billable action on Temporal Cloud). Absent: tracked, as in
   * every workflow started before the setting.
   */
  tracksRunStatus?: false;
}

export interface GraphWorkflowInput {
  parentRunId: string;
  /** Each step's own timeout, seconds; zero means none. */
  stepTimeoutSeconds: number;
  leaseSeconds: number;
  /** Every step's and shard's execution task queue (the parent's queue); see RunWorkflowInput. */
  executionQueue?: string;
  /** For the parent and every step; see RunWorkflowInput. */
  tracksRunStatus?: false;
}

/**
 * A run held at the plan gate (terraform, opentofu) was decided, approved or rejected: its run
 * workflow executes it again, which applies the saved plan or finds the run ended.
 */
export const planDecided = defineSignal('planDecided');

/** An approval step was decided through the API; the workflow reads the decision from the store. */
export const stepDecided = defineSignal<[string]>('stepDecided');

/**
 * Every delivery to one named target (spec part B 6.3), each run's in event order. Workflow id =
 * the target's id (`notifyWorkflowId`), on the notification task queue (workflows/ids.ts
 * `notifyTaskQueue`); started or woken with `deliveryQueued` (the runs' ids) each time deliveries
 * are queued, it reads what to deliver from the store. A schedule's skipped fire is delivered as a
 * run is: its id (`<schedule id>@<fire time>`) stands in a lane where a run's would.
 */
export const NOTIFY_WORKFLOW = 'notifyWorkflow';

export interface NotifyWorkflowInput {
  targetId: string;
  /** The first retry's wait, doubled for each later one (core/notification-kinds.ts retryDelayMs). */
  retryBaseMs: number;
}

export const notifyWorkflowId = (targetId: string) => targetId;

/** Deliveries were queued for these runs (or skipped fires) to the workflow's target. */
export const deliveryQueued = defineSignal<[string[]]>('deliveryQueued');

/**
 * One schedule's workflow (workflows/schedule.ts): plan the next fire, sleep until it, fire,
 * continue as new. Workflow id = schedule id (`scheduleWorkflowId`), on the schedules' task queue.
 */
export const SCHEDULE_WORKFLOW = 'scheduleWorkflow';

export interface ScheduleWorkflowInput {
  scheduleId: string;
  /** The fire (epoch milliseconds) the previous run of the workflow made; the next is planned after it. Absent on a first start. */
  after?: number | null;
}

export const scheduleWorkflowId = (scheduleId: string) => scheduleId;

/**
 * The most events one run of a schedule's workflow records before it continues as new (sooner
 * when Temporal suggests it): saves are signals, each one a plan, so a schedule saved often grows
 * its history without firing.
 */
export const SCHEDULE_HISTORY_EVENTS = 1000;

/** The schedule was saved (or disabled): the workflow plans again. */
export const scheduleChanged = defineSignal<[]>('scheduleChanged');

/**
 * One project's updates (workflows/project.ts): fetch its repository on the pool (activities/projects.ts)
 * and record the commit, then another while one more was asked for. Workflow id = project id
 * (`projectWorkflowId`), on the pool queue; started or told with `projectUpdateRequested` by every
 * save of the project.
 */
export const PROJECT_UPDATE_WORKFLOW = 'projectUpdateWorkflow';

export interface ProjectUpdateWorkflowInput {
  projectId: string;
  /** --git-timeout: how long one fetch may take. */
  fetchTimeoutSeconds: number;
}

export const projectWorkflowId = (projectId: string) => projectId;

/** The project was saved: one more update after the one under way. */
export const projectUpdateRequested = defineSignal<[]>('projectUpdateRequested');

/**
 * A job the API asks of a worker and waits for (workflows/job.ts, activities/jobs.ts): read an
 * inventory, run a dynamic source's script, read a project's tree. Workflow id `job_…`, on the
 * pool queue; its activity on `taskQueue`, the execution queue of the inventory or project.
 */
export const JOB_WORKFLOW = 'jobWorkflow';

export interface JobWorkflowInput {
  /** The activity (activities/jobs.ts) that does the job. */
  job: 'inventoryHostsJob' | 'resolveInventoryJob' | 'composedInventoryJob' | 'inventoryScriptJob' | 'projectTreeJob' | 'projectArchiveJob';
  input: unknown;
  taskQueue: string;
}

/**
 * One normal rotation of the federation signing keys (workflows/key-rotation.ts,
 * activities/federation.ts; spec part A 3.4): the new key, published at `publishedAt`, starts
 * signing `overlapSeconds` later and the old key retires; as long again later the old key is
 * removed. Workflow id = the new key's id (`keyRotationWorkflowId`), on the schedules' task queue,
 * which only `cairn serve` polls (it holds the install key the steps need).
 */
export const KEY_ROTATION_WORKFLOW = 'keyRotationWorkflow';

export interface KeyRotationWorkflowInput {
  newKeyId: string;
  oldKeyId: string;
  /** Epoch milliseconds the new key was published at. */
  publishedAt: number;
  overlapSeconds: number;
}

export const keyRotationWorkflowId = (newKeyId: string) => newKeyId;

/** The workflow that tells a forge about a pull request review's run, or posts one notice (workflows/pull-request.ts). */
export const PULL_REQUEST_WORKFLOW = 'pullRequestWorkflow';

/** A comment (and, with `state` and `headSha`, a commit status) about no run: a refused plan or apply. */
export interface PullRequestNotice {
  triggerId: string;
  forge: 'github' | 'gitlab' | 'gitea';
  repository: string;
  number: number;
  headSha?: string;
  state?: 'pending' | 'success' | 'failure' | 'error';
  description?: string;
  comment: string;
}

export type PullRequestWorkflowInput = { runId: string; notice?: undefined } | { notice: PullRequestNotice; runId?: undefined };
