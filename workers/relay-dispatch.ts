import { Context, CompleteAsyncError } from '@temporalio/activity';
import { NativeConnection, Worker } from '@temporalio/worker';
import os from 'node:os';
import type { Logger } from 'pino';
import { attemptAlive } from '../services/relay/relay';
import type { ChannelWakeups } from '../services/channel-wakeups';
import type { RelayDispatch, ServerContext } from '../services/context';
import { recordRelayDispatch, waitingRelayLeases } from '../store/relay';
import { executionTaskQueue } from '../workflows/ids';

export interface RelayDispatcher extends RelayDispatch {
  stop(): Promise<void>;
}

/**
 * The server's side of the relay under Temporal. For each named queue a relay worker has claimed
 * from, a Temporal worker here takes the queue's execution attempts (the run workflow's
 * `executeRun`, unchanged) and completes none of them itself: it records the attempt's task token
 * in PostgreSQL and returns CompleteAsyncError. A relay worker then claims the attempt; its
 * heartbeats are the activity's heartbeats and its end report completes it
 * (services/relay/relay.ts). While an attempt waits unclaimed, this process heartbeats it every
 * renewal period so it does not time out, and reports it canceled when the run is.
 */
export function startRelayDispatcher(
  server: ServerContext,
  /** `dispatches` listens on store/relay.ts RELAY_DISPATCH_CHANNEL: waiting claims wake on it. */
  options: { connection: NativeConnection; namespace: string; logger: Logger; dispatches: ChannelWakeups },
): RelayDispatcher {
  const { sql, config } = server;
  const running = new Map<string, Promise<{ worker: Worker; done: Promise<void> }>>();
  const activities = (queue: string) => ({
    async executeRun(runId: string): Promise<void> {
      const info = Context.current().info;
      await recordRelayDispatch(sql, { run_id: runId, queue, attempt: info.attempt, task_token: Buffer.from(info.taskToken) });
      throw new CompleteAsyncError();
    },
  });
  const keepWaitingAlive = async () => {
    for (const lease of await waitingRelayLeases(sql)) {
      await attemptAlive(server, lease, { waiting: 'for a relay worker' }).catch((err) =>
        options.logger.warn({ err: (err as Error).message, runId: lease.run_id }, 'heartbeating a waiting relay attempt failed'),
      );
    }
  };
  let sweeping: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (sweeping) return;
    sweeping = keepWaitingAlive()
      .catch((err) => options.logger.warn({ err: (err as Error).message }, 'the relay sweep failed'))
      .finally(() => (sweeping = undefined));
  }, (config.leaseSeconds * 1000) / 3);
  return {
    waitForDispatch: (queue, maxWaitMs, signal) => options.dispatches.waitFor(queue, maxWaitMs, signal),
    serveQueue(queue) {
      let started = running.get(queue);
      if (!started) {
        started = (async () => {
          const worker = await Worker.create({
            connection: options.connection,
            namespace: options.namespace,
            taskQueue: executionTaskQueue(config.poolQueue, queue),
            identity: `relay:${process.pid}@${os.hostname()}`,
            activities: activities(queue),
            // Each attempt is only recorded here: many may be taken at once.
            maxConcurrentActivityTaskExecutions: 100,
            shutdownGraceTime: '2s',
          });
          const done = worker.run();
          done.catch((err) => options.logger.error({ err, queue }, 'the relay dispatch worker stopped with an error'));
          options.logger.info({ queue }, 'taking attempts of this queue for relay workers');
          return { worker, done };
        })();
        running.set(queue, started);
        started.catch(() => running.delete(queue));
      }
      return started.then(() => undefined);
    },
    async stop() {
      clearInterval(timer);
      await sweeping;
      for (const started of running.values()) {
        const { worker, done } = await started.catch(() => ({ worker: undefined, done: Promise.resolve() }));
        if (worker?.getState() === 'RUNNING') worker.shutdown();
        await done.catch(() => undefined);
      }
    },
  };
}
