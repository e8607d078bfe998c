import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { Sql } from '../../store/db';
import { RUN_ACTIVITY_CHANNEL } from '../../store/events';

/**
 * Wakes live streams when a run gets new events or log, on any server: writers NOTIFY in the same
 * transaction, and each server LISTENs once and fans the run id out to its open streams.
 */
export class RunActivityHub {
  private readonly emitter = new EventEmitter();
  private unlisten: (() => Promise<void>) | undefined;

  constructor(private readonly sql: Sql, private readonly logger: Logger) {
    this.emitter.setMaxListeners(0);
  }

  async start(): Promise<void> {
    const { unlisten } = await this.sql.listen(
      RUN_ACTIVITY_CHANNEL,
      (runId) => this.emitter.emit(runId),
      () => this.logger.debug('listening for run activity'),
    );
    this.unlisten = unlisten;
  }

  async stop(): Promise<void> {
    await this.unlisten?.().catch(() => undefined);
  }

  /** Resolves when the run has news or after the wait, whichever comes first (streams also poll). */
  waitForActivity(runId: string, maxWaitMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.emitter.off(runId, done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, maxWaitMs);
      this.emitter.once(runId, done);
      signal?.addEventListener('abort', done);
    });
  }
}
