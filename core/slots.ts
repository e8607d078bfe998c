/**
 * At most `size` pieces of work at once; the rest wait their turn, first come first served. For
 * work a server takes on in the background, so a burst of it cannot crowd out the requests it
 * answers (each piece holds database connections while it runs).
 */
export class Slots {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly size: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await work();
    } finally {
      this.release();
    }
  }

  /** Takes a slot, waiting in line while all are taken; a wait given up through `signal` takes none and rejects with its reason. */
  async acquire(signal?: AbortSignal): Promise<void> {
    if (this.tryAcquire()) return;
    await new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const granted = () => {
        signal?.removeEventListener('abort', aborted);
        resolve();
      };
      const aborted = () => {
        this.waiting.splice(this.waiting.indexOf(granted), 1);
        reject(signal!.reason);
      };
      this.waiting.push(granted);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }

  /** Takes a slot if one is free now. */
  tryAcquire(): boolean {
    if (this.running >= this.size) return false;
    this.running++;
    return true;
  }

  /** Gives back a slot taken. */
  release(): void {
    // The slot passes straight to the next waiter, or is freed.
    const next = this.waiting.shift();
    if (next) next();
    else this.running--;
  }
}

/**
 * Work that other work gives way to: while any is in progress, `yielded` waits, for at most the
 * time given, so a burst of it is not slowed by work that can just as well start after it.
 */
export class GiveWay {
  private inProgress = 0;
  private readonly waiting = new Set<() => void>();

  /** Pieces in progress. */
  get count(): number {
    return this.inProgress;
  }

  async during<T>(work: () => Promise<T>): Promise<T> {
    const end = this.begin();
    try {
      return await work();
    } finally {
      end();
    }
  }

  /** Marks a piece begun, for work whose start and end are apart; answers its end (once). */
  begin(): () => void {
    this.inProgress++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--this.inProgress === 0) for (const go of [...this.waiting]) go();
    };
  }

  /**
   * Resolves once none is in progress, work begun meanwhile included, or at `until` (epoch ms),
   * whichever comes first; a wait given up through `signal` rejects with its reason.
   */
  async cleared(until: number, signal?: AbortSignal): Promise<void> {
    while (this.inProgress > 0 && Date.now() < until) await this.yielded(until - Date.now(), signal);
  }

  /**
   * Resolves once none is in progress, or after `maxMs`, whichever comes first; a wait given up
   * through `signal` rejects with its reason.
   */
  yielded(maxMs: number, signal?: AbortSignal): Promise<void> {
    if (this.inProgress === 0) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const stop = () => {
        clearTimeout(timer);
        this.waiting.delete(go);
        signal?.removeEventListener('abort', aborted);
      };
      const go = () => {
        stop();
        resolve();
      };
      const aborted = () => {
        stop();
        reject(signal!.reason);
      };
      const timer = setTimeout(go, maxMs);
      this.waiting.add(go);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }
}
