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
