/**
 * Batches a tool's output into appends: a flush every interval or whenever a batch fills, one flush
 * at a time so chunks land in the order they were written. A failed append keeps its bytes and is
 * tried again on the next flush, so a database hiccup delays the log and loses nothing.
 */
export class LogSink {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private flushing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly append: (data: Buffer) => Promise<void>,
    private readonly onError: (err: unknown) => void,
    private readonly intervalMs = 100,
    private readonly batchBytes = 256 * 1024,
  ) {}

  write(chunk: Buffer): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes >= this.batchBytes) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.intervalMs);
  }

  /** Resolves once everything written so far is stored (or has failed to store this time). */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.flushing = this.flushing.then(async () => {
      if (this.pendingBytes === 0) return;
      const data = Buffer.concat(this.pending);
      this.pending = [];
      this.pendingBytes = 0;
      try {
        await this.append(data);
      } catch (err) {
        this.pending.unshift(data);
        this.pendingBytes += data.length;
        this.onError(err);
      }
    });
    return this.flushing;
  }

  /** Flushes until everything is stored, retrying a failing store with a pause between tries. */
  async close(retryMs = 1000, maxTries = 30): Promise<void> {
    for (let i = 0; i < maxTries; i++) {
      await this.flush();
      if (this.pendingBytes === 0) return;
      await new Promise((r) => setTimeout(r, retryMs));
    }
    throw new Error(`could not store the last ${this.pendingBytes} bytes of output`);
  }
}
