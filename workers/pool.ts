import { bundleWorkflowCode, NativeConnection, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { ToolLauncher } from '../activities/launcher';
import { createGraphActivities } from '../activities/graphs';
import { createRunActivities } from '../activities/runs';
import type { Sealer } from '../core/seal';
import type { Sql } from '../store/db';
import type { Metrics } from '../services/metrics';
import { prepareSandbox, type RunIsolationSettings } from './sandbox-setup';

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The workflow bundle, built once per process: every worker here runs the same workflow code. */
function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath: require.resolve('../workflows/index'), logger: quietBundlerLogger });
  return bundle;
}

const quietBundlerLogger = {
  log: () => {},
  trace: () => {},
  debug: () => {},
  info: () => {},
  warn: (message: string) => process.stderr.write(`workflow bundler: ${message}\n`),
  error: (message: string) => process.stderr.write(`workflow bundler: ${message}\n`),
};

export interface PoolWorkerOptions {
  /** Shared with the server's client; the caller closes it. */
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  poolSize: number;
  sql: Sql;
  logger: Logger;
  metrics: Metrics;
  /** Opens the secrets sealed to a run at execution; undefined without the install's encryption key. */
  sealer?: Sealer;
  /** How tools are isolated from the service (--run-isolation, --run-network, --run-user). */
  isolation: RunIsolationSettings;
  /** The server's own secrets, which the output masker hides from every run's log. */
  serverSecrets: string[];
}

/** Where runs get their scratch work dirs. */
export const WORK_ROOT = path.join(os.tmpdir(), 'cairn-runs');

export interface RunningWorker {
  /** Stops polling; runs still executing are cancelled after a short grace and requeued elsewhere. */
  stop(): Promise<void>;
}

/** A Temporal worker for the server's own pool: it runs run workflows and executes their tools. */
export async function startPoolWorker(options: PoolWorkerOptions): Promise<RunningWorker> {
  const { connection } = options;
  const sandbox = await prepareSandbox(options.isolation, WORK_ROOT, (line) => options.logger.info(line));
  const launcher = new ToolLauncher(sandbox);
  const activities = createRunActivities({
    launcher,
    sql: options.sql,
    logger: options.logger,
    sealer: options.sealer,
    sandbox,
    serverSecrets: options.serverSecrets,
    workRoot: WORK_ROOT,
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
  const worker = await Worker.create({
    connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    workflowBundle: await workflowBundle(),
    activities: { ...activities, ...createGraphActivities({ sql: options.sql }) },
    maxConcurrentActivityTaskExecutions: options.poolSize,
    maxConcurrentLocalActivityExecutions: Math.max(options.poolSize, 16),
    // Cancels reach an activity through its heartbeat: throttle heartbeats to a second so a cancel lands fast.
    maxHeartbeatThrottleInterval: '1s',
    defaultHeartbeatThrottleInterval: '1s',
    shutdownGraceTime: '5s',
  });
  const running = worker.run();
  options.metrics.workerUp.set(1);
  running.catch((err) => options.logger.error({ err }, 'the pool worker stopped with an error'));
  return {
    async stop() {
      options.metrics.workerUp.set(0);
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await launcher.stop();
    },
  };
}
