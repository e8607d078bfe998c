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
    if (this.running >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await work();
    } finally {
      // The slot passes straight to the next waiter, or is freed.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/**
 * Work that other work gives way to: while any is in progress, `yielded` waits, for at most the
 * time given, so a burst of it is not slowed by work that can just as well start after it.
 */
export class GiveWay {
  private inProgress = 0;
  private readonly waiting = new Set<() => void>();

  async during<T>(work: () => Promise<T>): Promise<T> {
    this.inProgress++;
    try {
      return await work();
    } finally {
      if (--this.inProgress === 0) for (const go of [...this.waiting]) go();
    }
  }

  /** Resolves once none is in progress, or after `maxMs`, whichever comes first. */
  yielded(maxMs: number): Promise<void> {
    if (this.inProgress === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const go = () => {
        clearTimeout(timer);
        this.waiting.delete(go);
        resolve();
      };
      const timer = setTimeout(go, maxMs);
      this.waiting.add(go);
    });
  }
}
