import { Worker } from '@temporalio/worker';
import os from 'node:os';
import { createGraphActivities } from '../activities/graphs';
import { createNotifyActivities } from '../activities/notify';
import type { DeliverySettings } from '../core/notifications/notification-settings';
import { workflowBundle } from './bundle';
import { startExecutionWorker, type ExecutionWorkerOptions, type RunningWorker } from './execution';
import { notifyTaskQueue } from '../workflows/ids';
import { startScheduleWorker } from './schedules';
import { FiresFirst, OWED_WINDOW_SECONDS } from './fires-first';
import { countOwedFires } from '../store/schedules';
import type { ServerContext } from '../services/context';

export interface PoolWorkerOptions extends ExecutionWorkerOptions {
  /** Where notification deliveries may go, and the accounts they send through. */
  delivery: DeliverySettings;
  /** `cairn serve` only: the server's context, whose schedules this process fires (workers/schedules.ts). */
  schedules?: ServerContext;
  /**
   * Runs workflow code on this process's main thread (the SDK's debugMode, which its replayer uses)
   * instead of a worker thread for each of the three workers here. An in-process test server's
   * choice only (cli/serve.ts ServerHarness): each thread loads the SDK and the bundle afresh, about
   * two thirds of a CPU-second, and a main-thread workflow has no deadlock timeout. The SDK's
   * promise hook for workflow stack traces then sees every promise of the process; the test
   * harness takes it out (test/support/workflow-hooks.ts).
   */
  workflowsOnMainThread?: boolean;
}

/** Delivery attempts this process makes at once, across every target (each target at most four). */
const DELIVERY_SLOTS = 64;

/**
 * The worker for the default pool (`serve`'s own, or `cairn worker` without --queue): it runs the
 * workflows of every run, with the graph's store writes as local activities, and executes the
 * tools of runs on the default queue. Beside it, on their own task queue, a second worker runs
 * notification delivery workflows and their attempts, so a slow receiver never holds a slot a
 * run or a graph needs.
 */
export async function startPoolWorker(options: PoolWorkerOptions): Promise<RunningWorker> {
  const workflowCode = {
    workflowBundle: await workflowBundle({
      info: (line) => options.logger.info(line),
      warn: (line) => options.logger.warn(line),
    }),
    debugMode: options.workflowsOnMainThread === true,
  };
  const deliveries = await Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: notifyTaskQueue(options.poolQueue),
    identity: `${process.pid}@${os.hostname()}`,
    ...workflowCode,
    activities: createNotifyActivities({ sql: options.sql, logger: options.logger, sealer: options.sealer, delivery: options.delivery }),
    maxConcurrentLocalActivityExecutions: DELIVERY_SLOTS,
    maxConcurrentActivityTaskExecutions: 1,
    shutdownGraceTime: '2s',
  });
  const delivering = deliveries.run();
  delivering.catch((err) => options.logger.error({ err }, 'the notification delivery worker stopped with an error'));
  // Only a process that fires schedules puts its fires first.
  const firing = options.schedules;
  const firesFirst = firing
    ? new FiresFirst({
        owedFires: () => countOwedFires(firing.sql, OWED_WINDOW_SECONDS),
        onProbeError: (err) => options.logger.warn({ err: err.message }, 'could not count the schedule fires owed; runs wait for the fires in flight only'),
      })
    : undefined;
  let pool: RunningWorker;
  try {
    pool = await startExecutionWorker(options, {
      queue: '',
      taskQueue: options.poolQueue,
      workflows: { ...workflowCode, activities: createGraphActivities({ sql: options.sql }) },
      firesFirst,
    });
  } catch (err) {
    deliveries.shutdown();
    await delivering.catch(() => undefined);
    throw err;
  }
  let schedules: { stop(): Promise<void> } | undefined;
  if (firing && firesFirst) {
    try {
      schedules = await startScheduleWorker(options, workflowCode, firing, firesFirst);
    } catch (err) {
      await pool.stop();
      deliveries.shutdown();
      await delivering.catch(() => undefined);
      throw err;
    }
  }
  return {
    id: pool.id,
    async stop() {
      await schedules?.stop();
      // No fire is made now: the runs fires recorded are started before the process goes.
      await firesFirst?.settle();
      await pool.stop();
      if (deliveries.getState() === 'RUNNING') deliveries.shutdown();
      await delivering.catch(() => undefined);
    },
  };
}
