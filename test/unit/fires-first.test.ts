import type { ActivitySlotInfo, CustomSlotSupplier, LocalActivitySlotInfo, SlotPermit, SlotReserveContext } from '@temporalio/worker';
import { FiresFirst } from '../../workers/fires-first';

const reserve: SlotReserveContext = { slotType: 'activity', taskQueue: 'q', workerIdentity: 'w', workerBuildId: '', isSticky: false };
const fireInfo: LocalActivitySlotInfo = { type: 'local-activity', activityType: 'fireSchedule' };
const planInfo: LocalActivitySlotInfo = { type: 'local-activity', activityType: 'planFire' };
const runInfo: ActivitySlotInfo = { type: 'activity', activityType: 'executeRun' };

/** Whether the promise settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await new Promise((resolve) => setTimeout(resolve, ms));
  return settled;
}

/** Starts a fire in one of the schedule worker's slots; answers its end. */
async function startFire(fires: CustomSlotSupplier<LocalActivitySlotInfo>, info = fireInfo): Promise<() => void> {
  const permit = await fires.reserveSlot({ ...reserve, slotType: 'local-activity' }, new AbortController().signal);
  fires.markSlotUsed({ slotInfo: info, permit });
  return () => fires.releaseSlot({ slotInfo: info, permit });
}

describe('fires before executions (workers/fires-first.ts)', () => {
  it('gives an execution no slot while a fire is in flight, and gives it the moment the fire ends', async () => {
    const order = new FiresFirst({ maxDeferMs: 60_000 });
    const fires = order.fireSlots(4);
    const executions = order.executionSlots(4);
    const endFire = await startFire(fires);
    expect(order.fires).toBe(1);
    const execution = executions.reserveSlot(reserve, new AbortController().signal);
    expect(await settlesWithin(execution, 50)).toBe(false);
    // Eager reservations do not wait: none while the fire goes.
    expect(executions.tryReserveSlot(reserve)).toBeNull();
    endFire();
    expect(order.fires).toBe(0);
    expect(await settlesWithin(execution, 50)).toBe(true);
    expect(executions.tryReserveSlot(reserve)).not.toBeNull();
  });

  it('counts only fires: planning a fire holds no execution back', async () => {
    const order = new FiresFirst({ maxDeferMs: 60_000 });
    const endPlan = await startFire(order.fireSlots(4), planInfo);
    expect(order.fires).toBe(0);
    expect(await settlesWithin(order.executionSlots(1).reserveSlot(reserve, new AbortController().signal), 50)).toBe(true);
    endPlan();
  });

  it('holds an execution back no longer than its bound, however long the fire takes', async () => {
    const order = new FiresFirst({ maxDeferMs: 100 });
    const endFire = await startFire(order.fireSlots(1));
    const started = Date.now();
    await order.executionSlots(1).reserveSlot(reserve, new AbortController().signal);
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    expect(order.fires).toBe(1);
    endFire();
  });

  it('hands out no more slots than it has, in the order asked, and a slot released goes to the next in line', async () => {
    const executions = new FiresFirst().executionSlots(2);
    const permits: SlotPermit[] = [await executions.reserveSlot(reserve, new AbortController().signal), await executions.reserveSlot(reserve, new AbortController().signal)];
    const third = executions.reserveSlot(reserve, new AbortController().signal);
    const fourth = executions.reserveSlot(reserve, new AbortController().signal);
    expect(executions.tryReserveSlot(reserve)).toBeNull();
    expect(await settlesWithin(third, 30)).toBe(false);
    executions.releaseSlot({ slotInfo: runInfo, permit: permits[0] });
    expect(await settlesWithin(third, 30)).toBe(true);
    expect(await settlesWithin(fourth, 30)).toBe(false);
    executions.releaseSlot({ permit: permits[1] });
    expect(await settlesWithin(fourth, 30)).toBe(true);
  });

  it('gives a reservation up when the worker aborts it, waiting for a slot or behind a fire, and frees what it took', async () => {
    const order = new FiresFirst({ maxDeferMs: 60_000 });
    const executions = order.executionSlots(1);
    const held = await executions.reserveSlot(reserve, new AbortController().signal);
    const inLine = new AbortController();
    const waiting = executions.reserveSlot(reserve, inLine.signal);
    inLine.abort(new Error('poll ended'));
    await expect(waiting).rejects.toThrow('poll ended');
    executions.releaseSlot({ permit: held });

    const endFire = await startFire(order.fireSlots(1));
    const behindFire = new AbortController();
    const deferred = executions.reserveSlot(reserve, behindFire.signal);
    behindFire.abort(new Error('shutting down'));
    await expect(deferred).rejects.toThrow('shutting down');
    endFire();
    // The aborted reservations hold nothing: the one slot is free.
    expect(executions.tryReserveSlot(reserve)).not.toBeNull();
  });

  describe('a burst: fires the store still owes', () => {
    it('keeps executions and starts waiting in the gap between two fires while the store owes fires, and lets them go when it owes none', async () => {
      let owed = 2;
      let asked = 0;
      const order = new FiresFirst({ maxDeferMs: 60_000, maxStartDeferMs: 60_000, owedFires: async () => (asked++, owed) });
      const fires = order.fireSlots(4);
      const endFire = await startFire(fires);
      endFire();
      // No fire in flight, but two still owed: the burst goes on.
      const execution = order.executionSlots(1).reserveSlot(reserve, new AbortController().signal);
      const made: number[] = [];
      order.startLater.defer(async () => void made.push(Date.now()));
      expect(await settlesWithin(execution, 300)).toBe(false);
      expect(made).toEqual([]);
      owed = 0;
      expect(await settlesWithin(execution, 400)).toBe(true);
      expect(made).toHaveLength(1);
      // Asked every quarter second while fires were owed, and no more once none was.
      const askedThen = asked;
      expect(askedThen).toBeGreaterThanOrEqual(2);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(asked).toBe(askedThen);
      expect(order.fires).toBe(0);
    });

    it('asks nothing before a fire, counts only the fires in flight when asking fails, and rests a while before asking again', async () => {
      let asked = 0;
      const problems: string[] = [];
      const order = new FiresFirst({
        maxDeferMs: 60_000,
        owedFires: async () => {
          asked++;
          throw new Error('the store is down');
        },
        onProbeError: (err) => problems.push(err.message),
      });
      expect(await settlesWithin(order.executionSlots(1).reserveSlot(reserve, new AbortController().signal), 30)).toBe(true);
      expect(asked).toBe(0);
      const endFire = await startFire(order.fireSlots(1));
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(problems).toEqual(['the store is down']);
      expect(order.fires).toBe(1);
      // A second fire soon after asks nothing: one warning while the store is down, not one a fire.
      const endSecond = await startFire(order.fireSlots(1));
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(asked).toBe(1);
      endSecond();
      endFire();
      expect(await settlesWithin(order.executionSlots(1).reserveSlot(reserve, new AbortController().signal), 30)).toBe(true);
    });
  });

  describe("a fire's run start (startLater)", () => {
    /** A start that records when it was made, and finishes once `gate` settles. */
    function recordingStart(made: number[], gate?: Promise<void>): () => Promise<void> {
      return async () => {
        made.push(Date.now());
        await gate;
      };
    }

    it('is made once no fire is in flight, fires begun meanwhile included, and not in the fire itself', async () => {
      const order = new FiresFirst({ maxDeferMs: 60_000, maxStartDeferMs: 60_000 });
      const fires = order.fireSlots(4);
      const endFirst = await startFire(fires);
      const made: number[] = [];
      order.startLater.defer(recordingStart(made));
      expect(order.pendingStarts).toBe(1);
      const endSecond = await startFire(fires);
      endFirst();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(made).toEqual([]);
      endSecond();
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(made).toHaveLength(1);
      expect(order.pendingStarts).toBe(0);
    });

    it('is made at once when no fire is in flight, and held no longer than its bound while fires go on', async () => {
      const order = new FiresFirst({ maxDeferMs: 60_000, maxStartDeferMs: 100 });
      const made: number[] = [];
      order.startLater.defer(recordingStart(made));
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(made).toHaveLength(1);
      const endFire = await startFire(order.fireSlots(1));
      const deferredAt = Date.now();
      order.startLater.defer(recordingStart(made));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(made).toHaveLength(2);
      expect(made[1] - deferredAt).toBeGreaterThanOrEqual(90);
      expect(order.fires).toBe(1);
      endFire();
    });

    it('makes at most eight starts at once, the rest in the order deferred', async () => {
      const order = new FiresFirst();
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const made: number[] = [];
      const began: number[] = [];
      for (let i = 0; i < 12; i++) order.startLater.defer(async () => {
        began.push(i);
        await recordingStart(made, gate)();
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(began).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      release();
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(began).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
      expect(order.pendingStarts).toBe(0);
    });

    it('is made at once when the server settles, with a fire still in flight, and a failed start leaves nothing pending', async () => {
      const order = new FiresFirst({ maxDeferMs: 60_000, maxStartDeferMs: 60_000 });
      const endFire = await startFire(order.fireSlots(1));
      const made: number[] = [];
      order.startLater.defer(recordingStart(made));
      order.startLater.defer(async () => {
        throw new Error('the store is gone');
      });
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(made).toEqual([]);
      await order.settle();
      expect(made).toHaveLength(1);
      expect(order.pendingStarts).toBe(0);
      // Deferred after settling: made at once.
      order.startLater.defer(recordingStart(made));
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(made).toHaveLength(2);
      endFire();
    });
  });
});
