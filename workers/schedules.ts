import { Worker, type WorkerOptions } from '@temporalio/worker';
import os from 'node:os';
import type { Logger } from 'pino';
import { createScheduleActivities } from '../activities/schedules';
import { createFederationActivities } from '../activities/federation';
import { createReviewActivities } from '../activities/review';
import type { ServerContext } from '../services/context';
import { scheduleTaskQueue } from '../workflows/ids';
import { fixedSlots, type FiresFirst } from './fires-first';

/**
 * Fires a server makes at once (each submits a run: the store, the gate, a workflow start), and
 * schedule workflow tasks it runs at once (each holds its slot while its fire runs).
 */
const FIRE_SLOTS = 64;
/** Key rotation and review report steps at once (the SDK's own default without a tuner). */
const ACTIVITY_SLOTS = 100;

/**
 * The schedules' worker, in `cairn serve` only (its fires launch runs, which needs the server's
 * context): it runs every schedule's workflow on its own task queue, with the plan and the fire as
 * local activities, so a pool busy with tools never makes a fire late. Federation key rotations
 * (workflows/key-rotation.ts) run here too: their steps change the install's signing keys; and pull
 * request reviews' reports (workflows/pull-request.ts), which read runs and post to forges.
 */
export async function startScheduleWorker(
  options: { connection: WorkerOptions['connection']; namespace: string; logger: Logger },
  workflowCode: Required<Pick<WorkerOptions, 'workflowBundle' | 'debugMode'>>,
  ctx: ServerContext,
  firesFirst: FiresFirst,
): Promise<{ stop(): Promise<void> }> {
  const worker = await Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: scheduleTaskQueue(ctx.config.poolQueue),
    identity: `${process.pid}@${os.hostname()}`,
    ...workflowCode,
    activities: { ...createScheduleActivities(ctx, firesFirst.startLater), ...createFederationActivities(ctx), ...createReviewActivities(ctx) },
    tuner: {
      localActivityTaskSlotSupplier: firesFirst.fireSlots(FIRE_SLOTS),
      workflowTaskSlotSupplier: fixedSlots(FIRE_SLOTS),
      activityTaskSlotSupplier: fixedSlots(ACTIVITY_SLOTS),
      nexusTaskSlotSupplier: fixedSlots(1),
    },
    shutdownGraceTime: '2s',
  });
  const running = worker.run();
  running.catch((err) => options.logger.error({ err }, 'the schedule worker stopped with an error'));
  return {
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
    },
  };
}
