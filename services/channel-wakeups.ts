import type { Logger } from 'pino';
import type { Sql } from '../store/db';

/**
 * Wakes waiters of this process when a PostgreSQL NOTIFY arrives on one channel, whichever server
 * wrote: writers notify in the statement or transaction that wrote (the payload is the key, such
 * as a run id or a queue), and each server LISTENs once per channel and wakes every waiter on the
 * key. A notification sent while the listening connection was being re-established is lost, so
 * every wait has a limit too, after which the waiter looks anyway.
 */
export class ChannelWakeups {
  private readonly waiting = new Map<string, Set<() => void>>();
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly channel: string,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    const { unlisten } = await this.sql.listen(
      this.channel,
      (key) => this.wake(key),
      () => this.logger.debug({ channel: this.channel }, 'listening for notifications'),
    );
    this.unlisten = unlisten;
  }

  async stop(): Promise<void> {
    await this.unlisten?.().catch(() => undefined);
  }

  private wake(key: string): void {
    for (const done of [...(this.waiting.get(key) ?? [])]) done();
  }

  /** Resolves at the key's next notification, after `maxWaitMs`, or when the signal aborts, whichever comes first. */
  waitFor(key: string, maxWaitMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const waiters = this.waiting.get(key) ?? this.waiting.set(key, new Set()).get(key)!;
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        waiters.delete(done);
        if (waiters.size === 0 && this.waiting.get(key) === waiters) this.waiting.delete(key);
        resolve();
      };
      const timer = setTimeout(done, maxWaitMs);
      signal?.addEventListener('abort', done);
      waiters.add(done);
    });
  }
}
