import type { ActivitySlotInfo, CustomSlotSupplier, FixedSizeSlotSupplier, LocalActivitySlotInfo, SlotInfo, SlotPermit, SlotReserveContext, WorkflowSlotInfo } from '@temporalio/worker';

/**
 * Longest a new execution waits behind schedule fires. Fires come in bursts (every schedule due at
 * the top of a minute) that end in seconds; a fire that hangs, or fires that never stop, still
 * let runs start after this.
 */
export const MAX_EXECUTION_DEFER_MS = 10_000;

/** The local activity that makes a fire (activities/schedules.ts). */
const FIRE_ACTIVITY = 'fireSchedule';

/** A worker's tuner names every kind of slot: the kinds no rule touches are a fixed number. */
export const fixedSlots = (numSlots: number): FixedSizeSlotSupplier => ({ type: 'fixed-size', numSlots });

interface Permit extends SlotPermit {
  /** Set once the slot holds a fire, so its release ends the fire. */
  fire?: boolean;
}

/**
 * Schedule fires before new executions, in a process that does both (`cairn serve`'s own pool).
 * A fire is the durable record of a run at its time, and its lateness is what a schedule promises;
 * the runs it starts (and every other) can wait a moment. So while this process makes a fire, its
 * pool takes no new execution, for at most MAX_EXECUTION_DEFER_MS; executions already going go
 * on. Both are Temporal slot suppliers (the SDK's seam for how a worker hands out task slots),
 * each with its worker's fixed number of slots; a `cairn worker` process makes no fires and uses
 * fixed slots alone.
 */
export class FiresFirst {
  private firing = 0;
  private readonly waiters = new Set<() => void>();

  constructor(private readonly maxDeferMs = MAX_EXECUTION_DEFER_MS) {}

  /** Fires in flight in this process. */
  get fires(): number {
    return this.firing;
  }

  /** The schedule worker's local activity slots: `slots` at once, counting the fires among them. */
  fireSlots(slots: number): CustomSlotSupplier<LocalActivitySlotInfo> {
    return new Slots<LocalActivitySlotInfo>(slots, {
      used: (info, permit) => {
        if (info.activityType !== FIRE_ACTIVITY) return;
        permit.fire = true;
        this.firing++;
      },
      released: (permit) => {
        if (!permit.fire) return;
        permit.fire = false;
        this.firing--;
        if (this.firing === 0) this.wakeAll();
      },
      subscribe: (wake) => this.subscribe(wake),
    });
  }

  /** The pool's slots of one kind: `slots` at once, and none newly given while a fire is in flight (for at most the deferral's bound). */
  executionSlots<SI extends ActivitySlotInfo | WorkflowSlotInfo>(slots: number): CustomSlotSupplier<SI> {
    return new Slots<SI>(slots, {
      defers: () => this.firing > 0,
      maxDeferMs: this.maxDeferMs,
      subscribe: (wake) => this.subscribe(wake),
    });
  }

  private subscribe(wake: () => void): () => void {
    this.waiters.add(wake);
    return () => this.waiters.delete(wake);
  }

  private wakeAll(): void {
    for (const wake of [...this.waiters]) wake();
  }
}

interface SlotRules<SI extends SlotInfo> {
  /** Whether a new slot waits now, for at most `maxDeferMs` from its reservation. */
  defers?: () => boolean;
  maxDeferMs?: number;
  used?: (info: SI, permit: Permit) => void;
  released?: (permit: Permit) => void;
  /** Calls `wake` whenever `defers` may have turned false; answers how to stop. */
  subscribe: (wake: () => void) => () => void;
}

/** A fixed number of slots, handed out in the order asked, under the rules given. */
class Slots<SI extends SlotInfo> implements CustomSlotSupplier<SI> {
  readonly type = 'custom' as const;
  private taken = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    private readonly size: number,
    private readonly rules: SlotRules<SI>,
  ) {}

  async reserveSlot(_ctx: SlotReserveContext, abort: AbortSignal): Promise<SlotPermit> {
    await this.turn(abort);
    const until = Date.now() + (this.rules.maxDeferMs ?? 0);
    while (this.rules.defers?.() && Date.now() < until) await this.deferred(until, abort);
    return {};
  }

  tryReserveSlot(): SlotPermit | null {
    if (this.taken >= this.size || this.queue.length > 0 || this.rules.defers?.()) return null;
    this.taken++;
    return {};
  }

  markSlotUsed(ctx: { slotInfo: SI; permit: SlotPermit }): void {
    this.rules.used?.(ctx.slotInfo, ctx.permit as Permit);
  }

  releaseSlot(ctx: { permit: SlotPermit }): void {
    this.rules.released?.(ctx.permit as Permit);
    this.taken--;
    this.queue.shift()?.();
  }

  /** Takes one of the slots, waiting in line for one to be released when all are taken. */
  private async turn(abort: AbortSignal): Promise<void> {
    if (this.taken < this.size && this.queue.length === 0) {
      this.taken++;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const granted = () => {
        abort.removeEventListener('abort', aborted);
        this.taken++;
        resolve();
      };
      const aborted = () => {
        this.queue.splice(this.queue.indexOf(granted), 1);
        reject(abort.reason);
      };
      if (abort.aborted) return reject(abort.reason);
      this.queue.push(granted);
      abort.addEventListener('abort', aborted, { once: true });
    });
  }

  /** Waits until the rules may let a slot go, `until` passes or the reservation is given up (which frees the slot taken). */
  private deferred(until: number, abort: AbortSignal): Promise<void> {
    const giveUp = (reject: (reason: unknown) => void) => {
      this.taken--;
      this.queue.shift()?.();
      reject(abort.reason);
    };
    return new Promise<void>((resolve, reject) => {
      if (abort.aborted) return giveUp(reject);
      const done = () => {
        clearTimeout(timer);
        unsubscribe();
        abort.removeEventListener('abort', aborted);
      };
      const woke = () => {
        done();
        resolve();
      };
      const aborted = () => {
        done();
        giveUp(reject);
      };
      const timer = setTimeout(woke, Math.max(0, until - Date.now()));
      const unsubscribe = this.rules.subscribe(woke);
      abort.addEventListener('abort', aborted, { once: true });
    });
  }
}
