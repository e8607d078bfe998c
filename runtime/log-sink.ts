/** Bytes a sink may hold (waiting and being stored) before it asks its writer to wait. */
export const LOG_SINK_HELD_BYTES = 2 * 1024 * 1024;

/** How soon a store that failed while its writer waits is tried again. */
const RETRY_WHILE_WAITING_MS = 1000;

/**
 * Batches a tool's output into appends: a flush every interval or whenever a batch fills, one flush
 * at a time so chunks land in the order they were written. What arrives while a flush is being
 * stored joins the next one, so a fast tool gets batches as large as the database's pace makes
 * them (up to the held bound) and one round trip each. A failed append keeps its bytes and is
 * tried again on the next flush, so a database hiccup delays the log and loses nothing.
 *
 * Backpressure: once more than `heldBytes` are held, {@link write} returns a promise that resolves
 * when the sink is back under it; a writer that waits for it (the launcher stops reading the
 * tool's output meanwhile, runtime/launcher.ts) keeps the held bytes bounded, and a tool faster
 * than the database blocks on its full pipe instead of filling the server's memory.
 */
export class LogSink {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes of the append under way. */
  private storingBytes = 0;
  private flushing: Promise<void> = Promise.resolve();
  /** A flush is chained and has not taken the pending bytes yet: it will take whatever comes before it does. */
  private flushQueued = false;
  private timer: NodeJS.Timeout | undefined;
  private waiters: Array<() => void> = [];

  constructor(
    private readonly append: (data: Buffer) => Promise<void>,
    private readonly onError: (err: unknown) => void,
    private readonly intervalMs = 100,
    private readonly batchBytes = 1024 * 1024,
    private readonly heldBytes = LOG_SINK_HELD_BYTES,
  ) {}

  /**
   * Takes a chunk. Returns a promise when the sink holds more than its bound: the writer should
   * send no more until it resolves (more is still accepted and stored, only not bounded).
   */
  write(chunk: Buffer): Promise<void> | undefined {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes >= this.batchBytes) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.intervalMs);
    if (this.held <= this.heldBytes) return undefined;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Bytes written and not stored yet. */
  get held(): number {
    return this.pendingBytes + this.storingBytes;
  }

  /** Resolves once everything written so far is stored (or has failed to store this time). */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.flushQueued) return this.flushing;
    this.flushQueued = true;
    this.flushing = this.flushing.then(async () => {
      this.flushQueued = false;
      if (this.pendingBytes === 0) return;
      const data = this.pending.length === 1 ? this.pending[0] : Buffer.concat(this.pending, this.pendingBytes);
      this.pending = [];
      this.pendingBytes = 0;
      this.storingBytes = data.length;
      let failed = false;
      try {
        await this.append(data);
      } catch (err) {
        failed = true;
        this.pending.unshift(data);
        this.pendingBytes += data.length;
        this.onError(err);
      } finally {
        this.storingBytes = 0;
      }
      this.afterAppend(failed);
    });
    return this.flushing;
  }

  /** Wakes waiting writers once under the bound; otherwise keeps storing for them (a waiting writer writes nothing that would). */
  private afterAppend(failed: boolean): void {
    if (this.waiters.length === 0) return;
    if (this.held <= this.heldBytes) {
      const waiters = this.waiters;
      this.waiters = [];
      for (const wake of waiters) wake();
    } else if (failed) {
      this.timer ??= setTimeout(() => void this.flush(), RETRY_WHILE_WAITING_MS);
    } else {
      void this.flush();
    }
  }

  /** Flushes until everything is stored, retrying a failing store with a pause between tries. */
  async close(retryMs = 1000, maxTries = 30): Promise<void> {
    for (let i = 0; i < maxTries; i++) {
      await this.flush();
      if (this.pendingBytes === 0) return;
      await new Promise((r) => setTimeout(r, retryMs));
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    // Nothing more will be written: let any waiting writer go.
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
    throw new Error(`could not store the last ${this.pendingBytes} bytes of output`);
  }
}
