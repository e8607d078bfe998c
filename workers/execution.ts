import { NativeConnection, Worker, type ActivitySlotInfo, type WorkerOptions, type WorkflowSlotInfo } from '@temporalio/worker';
import type { ExtensionRegistry } from '../core/extensions';
import os from 'node:os';
import type { Logger } from 'pino';
import { ToolLauncher } from '../runtime/launcher';
import { createJobActivities } from '../activities/jobs';
import { createProjectActivities } from '../activities/projects';
import { createRunActivities } from '../activities/runs';
import type { ProjectFetchSettings } from '../services/projects';
import type { Sealer } from '../core/credentials/seal';
import type { Sql } from '../store/db';
import type { Metrics } from '../services/metrics';
import { announceWorker } from './presence';
import { jobSandbox, type RunIsolationSettings } from '../runtime/sandbox-setup';
import { fixedSlots, type FiresFirst } from './fires-first';

/** Workflow tasks a pool worker runs at once (the SDK's own default without a tuner). */
const WORKFLOW_TASK_SLOTS = 40;

/** What every worker that executes runs needs, whichever queue it serves. */
export interface ExecutionWorkerOptions {
  /** Shared with the server's client; the caller closes it. */
  connection: NativeConnection;
  namespace: string;
  /** The install's pool queue (--pool-queue); named queues' task queues are named from it. */
  poolQueue: string;
  /** Runs this worker executes at once (--pool-size). */
  poolSize: number;
  /** The lease (--lease-seconds): the worker's record is renewed every third of it. */
  leaseSeconds: number;
  sql: Sql;
  logger: Logger;
  metrics: Metrics;
  /** Opens the secrets sealed to a run at execution; undefined without the install's encryption key. */
  sealer?: Sealer;
  /** How tools are isolated from the service and bounded, and where they work (--run-isolation, --run-network, --run-user, the run bounds, --data-dir). */
  isolation: RunIsolationSettings;
  /** The server's own secrets, which the output masker hides from every run's log. */
  serverSecrets: string[];
  /** --federation-issuer, for run identity tokens (services/federation/run-tokens.ts). */
  federationIssuer?: string;
  /** The extension secret sources credentials may read from (cli/plugins.ts). */
  secretSources?: ExtensionRegistry['secretSources'];
  /** What a project fetch checks (the egress rule, --project-local-roots, --git-timeout). */
  projects: ProjectFetchSettings;
}

export interface RunningWorker {
  /** Its row in the `workers` table (GET /v1/workers). */
  id: string;
  /** Stops polling; runs still executing are cancelled after a short grace and requeued elsewhere. */
  stop(): Promise<void>;
}

/** What sets one worker apart from another: the queue, and for the pool, the workflows. */
export interface WorkerRole {
  /** "" for the default pool, else the named queue. */
  queue: string;
  taskQueue: string;
  /** Workflow code and the local activities it calls; only the pool worker runs workflows. */
  workflows?: Pick<WorkerOptions, 'workflowBundle' | 'debugMode' | 'activities'>;
  /** `cairn serve`'s pool: its executions wait behind the schedule fires this process makes. */
  firesFirst?: FiresFirst;
}

/**
 * A Temporal worker that executes runs' tools on its task queue, in the sandbox, through the tool
 * launcher, and records itself in the `workers` table while it polls.
 */
export async function startExecutionWorker(options: ExecutionWorkerOptions, role: WorkerRole): Promise<RunningWorker> {
  const site = await jobSandbox(options.isolation, (line) => options.logger.info(line));
  const launcher = new ToolLauncher(site.sandbox);
  const projects = createProjectActivities({ sql: options.sql, logger: options.logger, sealer: options.sealer, site, settings: options.projects });
  const activities = createRunActivities({
    ensureCommit: projects.ensureCommit,
    launcher,
    sql: options.sql,
    logger: options.logger,
    sealer: options.sealer,
    serverSecrets: options.serverSecrets,
    federationIssuer: options.federationIssuer,
    secretSources: options.secretSources,
    site,
    onExecutionChange: (delta) => options.metrics.workerBusy.inc(delta),
    onFinished: (run) => {
      options.metrics.runsFinished.inc({ status: run.status, tool: run.tool });
      if (run.started_at && run.finished_at) {
        options.metrics.runDuration.observe(
          { tool: run.tool, status: run.status },
          (run.finished_at.getTime() - run.started_at.getTime()) / 1000,
        );
      }
    },
  });
  // Slots of a kind `cairn serve`'s fires come before, or a fixed number of them.
  const executionSlots = <SI extends ActivitySlotInfo | WorkflowSlotInfo>(size: number) => role.firesFirst?.executionSlots<SI>(size) ?? fixedSlots(size);
  let worker: Worker;
  try {
    worker = await Worker.create({
      connection: options.connection,
      namespace: options.namespace,
      taskQueue: role.taskQueue,
      // The SDK's own form, set explicitly: a history's ActivityTaskStarted names the process
      // that executed the attempt, by the pid and host its `workers` row shows.
      identity: `${process.pid}@${os.hostname()}`,
      workflowBundle: role.workflows?.workflowBundle,
      debugMode: role.workflows?.debugMode,
      activities: {
        ...activities,
        updateProject: projects.updateProject,
        ...createJobActivities({ sql: options.sql, site, ensureCommit: projects.ensureCommit }),
        ...role.workflows?.activities,
      },
      tuner: {
        activityTaskSlotSupplier: executionSlots(options.poolSize),
        localActivityTaskSlotSupplier: fixedSlots(Math.max(options.poolSize, 16)),
        workflowTaskSlotSupplier: executionSlots(WORKFLOW_TASK_SLOTS),
        nexusTaskSlotSupplier: fixedSlots(1),
      },
      // Cancels reach an activity through its heartbeat: throttle heartbeats to a second so a cancel lands fast.
      maxHeartbeatThrottleInterval: '1s',
      defaultHeartbeatThrottleInterval: '1s',
      shutdownGraceTime: '5s',
    });
  } catch (err) {
    await launcher.stop();
    throw err;
  }
  const running = worker.run();
  const presence = await announceWorker(options.sql, {
    queue: role.queue,
    taskQueue: role.taskQueue,
    leaseSeconds: options.leaseSeconds,
    logger: options.logger,
  }).catch(async (err) => {
    worker.shutdown();
    await running.catch(() => undefined);
    await launcher.stop();
    throw err;
  });
  options.metrics.workerUp.set(1);
  running.catch((err) => options.logger.error({ err, queue: role.queue }, 'the worker stopped with an error'));
  return {
    id: presence.id,
    async stop() {
      options.metrics.workerUp.set(0);
      await presence.stop().catch((err) => options.logger.warn({ err: (err as Error).message }, "removing this worker's record failed"));
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await launcher.stop();
    },
  };
}
