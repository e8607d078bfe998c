import { condition, continueAsNew, proxyLocalActivities, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { NotifyActivities } from '../activities/notify';
import { PER_TARGET_CONCURRENCY } from '../core/notifications/notification-kinds';
import { deliveryQueued, type NotifyWorkflowInput } from './definitions';

/** How long a target's workflow with nothing to deliver waits for more before it closes (a later delivery starts it again). */
const IDLE_MS = 60 * 1000;
/** Past this many history events the workflow hands over to a fresh run of itself. */
const HISTORY_LIMIT = 10_000;
/** Runs whose next delivery one activity makes, one after another. */
const BATCH = 25;

/**
 * Every delivery to one named target (spec part B 6.3). Each run's deliveries go one after another
 * in event order: a delivery waits until every earlier one to this target for the same run has
 * arrived, failed after its retries, or been skipped. Runs go side by side: at most four
 * activities at once, each making the next delivery of up to 25 runs one after another, so at
 * most four attempts to the target at once. A run whose attempt failed waits on a durable timer
 * (base, 2x, 4x, 8x the retry base: four more tries, about three minutes by default) without
 * holding anyone up.
 *
 * A lane is a run's, or a schedule's skipped fire's (`schedule.skipped`): the same order, retries
 * and records hold for both, and the store tells them apart (store/notifications.ts).
 *
 * What to deliver and how each attempt went live in the store (the delivery rows), so a repeated
 * signal, a restarted workflow or a second server does not start a delivery over once it is
 * recorded as arrived. Delivery is at least once: an attempt whose outcome was lost (a worker
 * stopped mid-send) is made again, with the same Idempotency-Key; a fresh run of the
 * workflow (after it closed idle, or handed over at its history limit) finds every open delivery
 * there, a retry's due time included.
 */
export async function notifyWorkflow(input: NotifyWorkflowInput): Promise<void> {
  // Each attempt in a batch is bounded by its own 10 s send timeout. A batch cut short by a
  // stopping worker records nothing for the attempt it was making; the worker that picks the
  // workflow up makes it again, uncounted.
  const store = proxyLocalActivities<NotifyActivities>({
    startToCloseTimeout: '60s',
    retry: { initialInterval: '500ms', maximumInterval: '10s' },
  });

  /** Runs told of by a signal (or found open at start), not yet taken up. */
  const wanted = new Set<string>();
  /** Runs being delivered: ready for their next attempt, in a batch, or waiting out a retry. */
  const active = new Set<string>();
  const ready: string[] = [];
  let changes = 0;
  setHandler(deliveryQueued, (runIds) => {
    for (const runId of runIds) wanted.add(runId);
    changes++;
  });

  let handingOver = false;
  const inFlight = new Set<Promise<void>>();
  const waits = new Set<Promise<void>>();
  const settle = (runId: string) => {
    active.delete(runId);
    changes++;
  };
  const requeue = (runId: string) => {
    ready.push(runId);
    changes++;
  };

  const deliver = async (runIds: string[]) => {
    const results = await store.deliverBatch({ targetId: input.targetId, runIds, retryBaseMs: input.retryBaseMs });
    for (const runId of runIds) {
      const result = results[runId];
      if ('none' in result) settle(runId);
      else if ('waitMs' in result) {
        const wait = (async () => {
          // Handing over mid-wait: the next run finds the retry's due time in the store.
          await Promise.race([sleep(result.waitMs), condition(() => handingOver)]);
          if (handingOver) settle(runId);
          else requeue(runId);
        })();
        waits.add(wait);
        void wait.finally(() => waits.delete(wait));
      } else requeue(runId);
    }
  };

  for (const runId of await store.openDeliveryRuns(input.targetId)) wanted.add(runId);
  for (;;) {
    for (const runId of [...wanted]) {
      if (active.has(runId)) continue;
      wanted.delete(runId);
      active.add(runId);
      ready.push(runId);
    }
    if (!handingOver && workflowInfo().historyLength > HISTORY_LIMIT) handingOver = true;
    while (!handingOver && ready.length > 0 && inFlight.size < PER_TARGET_CONCURRENCY) {
      const batch = ready.splice(0, BATCH);
      const flight: Promise<void> = deliver(batch).finally(() => {
        inFlight.delete(flight);
        changes++;
      });
      inFlight.add(flight);
    }
    if (handingOver) {
      await Promise.all([...inFlight, ...waits]);
      await continueAsNew<typeof notifyWorkflow>(input);
    }
    const seen = changes;
    if (active.size > 0 || wanted.size > 0) await condition(() => changes > seen);
    else if (!(await condition(() => changes > seen, IDLE_MS))) return;
  }
}
