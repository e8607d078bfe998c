import type { ActivitySlotInfo, CustomSlotSupplier, FixedSizeSlotSupplier, LocalActivitySlotInfo, SlotInfo, SlotPermit, WorkflowSlotInfo } from '@temporalio/worker';
import { GiveWay, Slots } from '../core/slots';
import type { StartLater } from '../services/runs/runs';

/**
 * Longest a new execution waits behind schedule fires. Fires come in bursts (every schedule due at
 * the top of a minute) that end in seconds; a fire that hangs, or fires that never stop, still
 * let runs start after this. Long enough for a loaded machine's burst to end (10 seconds let the
 * last minute's runs into the next minute's fires: `(g)` over two minutes, p99 17.3 s against 10.0).
 */
export const MAX_EXECUTION_DEFER_MS = 30_000;

/**
 * Longest a fire's run start waits for the fires after it. A fire records its run and goes on; the
 * workflow starts once the burst has passed (the pool would not take the run before it anyway).
 */
export const MAX_START_DEFER_MS = 15_000;

/**
 * How long the outbox keeps a fire's run start for the server that made the fire: past the longest
 * deferral and the line of starts behind it. A server that dies meanwhile leaves the start to any
 * server's dispatcher after this.
 */
export const START_GRACE_SECONDS = 30;

/** Deferred run starts made at once, once the fires have passed. */
const START_SLOTS = 8;

/** How often fires still owed are counted while a burst goes on. */
const OWED_POLL_MS = 250;

/** How long a failed count of owed fires is not asked again (the store is likely down: one warning, not one a fire). */
const PROBE_REST_MS = 5_000;

/** How far back a fire still owed counts (a schedule stuck at a fire counts no longer than this). */
export const OWED_WINDOW_SECONDS = 60;

/** The local activity that makes a fire (activities/schedules.ts). */
const FIRE_ACTIVITY = 'fireSchedule';

/** A worker's tuner names every kind of slot: the kinds no rule touches are a fixed number. */
export const fixedSlots = (numSlots: number): FixedSizeSlotSupplier => ({ type: 'fixed-size', numSlots });

export interface FiresFirstOptions {
  maxDeferMs?: number;
  maxStartDeferMs?: number;
  /** Fires due and not made yet, in the store; without it, only the fires in flight count. */
  owedFires?: () => Promise<number>;
  /** Told why asking for owed fires failed; the burst then counts its fires in flight alone. */
  onProbeError?: (err: Error) => void;
}

/**
 * Schedule fires before new executions, in a process that does both (`cairn serve`'s own pool).
 * A fire is the durable record of a run at its time, and its lateness is what a schedule promises;
 * the runs it starts (and every other) can wait a moment. So while a burst of fires goes on:
 *
 * - its pool takes no new execution, for at most MAX_EXECUTION_DEFER_MS; executions already going
 *   go on. Both are Temporal slot suppliers (the SDK's seam for how a worker hands out task
 *   slots), each with its worker's fixed number of slots; a `cairn worker` process makes no fires
 *   and uses fixed slots alone;
 * - the workflows of the runs fires recorded are not started yet, for at most MAX_START_DEFER_MS
 *   (`startLater`): each waits in the outbox, kept for this server for START_GRACE_SECONDS.
 *
 * A burst is more than the fires in flight: Temporal hands a thousand timers due at one instant
 * over several seconds, so there are gaps between fires in which the pool would rush in. So from
 * a burst's first fire, `owedFires` (the store's count of fires due and not made) is asked every
 * OWED_POLL_MS until none is owed, and while some are, the burst counts as going on.
 */
export class FiresFirst {
  private readonly firing = new GiveWay();
  private readonly starts = new Slots(START_SLOTS);
  private readonly deferred = new Set<Promise<void>>();
  private readonly settling = new AbortController();
  private watching = false;
  private probeRestsUntil = 0;
  private readonly maxDeferMs: number;
  private readonly maxStartDeferMs: number;

  constructor(private readonly options: FiresFirstOptions = {}) {
    this.maxDeferMs = options.maxDeferMs ?? MAX_EXECUTION_DEFER_MS;
    this.maxStartDeferMs = options.maxStartDeferMs ?? MAX_START_DEFER_MS;
  }

  /**
   * From a burst's first fire until the store owes none: the burst counts as one piece of work in
   * progress while fires are owed. Stops (and counts nothing) when asking fails or the server settles.
   */
  private async watchOwedFires(): Promise<void> {
    const probe = this.options.owedFires;
    if (!probe || this.watching || this.settling.signal.aborted || Date.now() < this.probeRestsUntil) return;
    this.watching = true;
    let endOwed: (() => void) | undefined;
    try {
      while (!this.settling.signal.aborted) {
        const owed = await probe();
        if (owed > 0) endOwed ??= this.firing.begin();
        else break;
        await new Promise((resolve) => setTimeout(resolve, OWED_POLL_MS));
      }
    } catch (err) {
      this.probeRestsUntil = Date.now() + PROBE_REST_MS;
      this.options.onProbeError?.(err as Error);
    } finally {
      endOwed?.();
      this.watching = false;
    }
  }

  /** How the fires of this process start their runs: once the burst has passed (at most MAX_START_DEFER_MS), START_SLOTS at a time. */
  readonly startLater: StartLater = {
    graceSeconds: START_GRACE_SECONDS,
    defer: (start) => {
      const until = Date.now() + this.maxStartDeferMs;
      const made = this.starts
        .run(async () => {
          // Settling (the server stopping) makes every start now.
          await this.firing.cleared(until, this.settling.signal).catch(() => undefined);
          await start();
        })
        .catch(() => undefined);
      this.deferred.add(made);
      void made.finally(() => this.deferred.delete(made));
    },
  };

  /** Run starts deferred and not yet made. */
  get pendingStarts(): number {
    return this.deferred.size;
  }

  /** Makes every deferred start now, and any deferred later at once, and waits for them: for a server stopping. */
  async settle(): Promise<void> {
    this.settling.abort();
    await Promise.all([...this.deferred]);
  }

  /** Fires in flight in this process, and one more while the store owes fires of a burst. */
  get fires(): number {
    return this.firing.count;
  }

  /** The schedule worker's local activity slots: `slots` at once, counting the fires among them. */
  fireSlots(slots: number): CustomSlotSupplier<LocalActivitySlotInfo> {
    const fireEnds = new WeakMap<SlotPermit, () => void>();
    return slotSupplier<LocalActivitySlotInfo>(slots, {
      used: (info, permit) => {
        if (info.activityType !== FIRE_ACTIVITY) return;
        fireEnds.set(permit, this.firing.begin());
        void this.watchOwedFires();
      },
      released: (permit) => fireEnds.get(permit)?.(),
    });
  }

  /** The pool's slots of one kind: `slots` at once, and none newly given while a burst of fires goes on (for at most the deferral's bound). */
  executionSlots<SI extends ActivitySlotInfo | WorkflowSlotInfo>(slots: number): CustomSlotSupplier<SI> {
    return slotSupplier<SI>(slots, { givesWayTo: this.firing, maxDeferMs: this.maxDeferMs });
  }
}

interface SlotRules<SI extends SlotInfo> {
  /** A new slot waits while this has work in progress, for at most `maxDeferMs` from its reservation. */
  givesWayTo?: GiveWay;
  maxDeferMs?: number;
  used?: (info: SI, permit: SlotPermit) => void;
  released?: (permit: SlotPermit) => void;
}

/** A fixed number of slots, handed out in the order asked, under the rules given. */
function slotSupplier<SI extends SlotInfo>(size: number, rules: SlotRules<SI>): CustomSlotSupplier<SI> {
  const slots = new Slots(size);
  return {
    type: 'custom',
    async reserveSlot(_ctx, abort) {
      await slots.acquire(abort);
      try {
        await rules.givesWayTo?.cleared(Date.now() + (rules.maxDeferMs ?? 0), abort);
      } catch (err) {
        // A reservation given up holds no slot.
        slots.release();
        throw err;
      }
      return {};
    },
    tryReserveSlot() {
      if ((rules.givesWayTo?.count ?? 0) > 0 || !slots.tryAcquire()) return null;
      return {};
    },
    markSlotUsed({ slotInfo, permit }) {
      rules.used?.(slotInfo, permit);
    },
    releaseSlot({ permit }) {
      rules.released?.(permit);
      slots.release();
    },
  };
}
