import { GiveWay } from '../../core/slots';

const tick = () => new Promise((resolve) => setImmediate(resolve));

test('with nothing in progress, work that gives way goes at once', async () => {
  const way = new GiveWay();
  let went = false;
  void way.yielded(60_000).then(() => (went = true));
  await tick();
  expect(went).toBe(true);
});

test('work that gives way goes when the last piece in progress ends, not before', async () => {
  const way = new GiveWay();
  const ends: (() => void)[] = [];
  const piece = () => way.during(() => new Promise<void>((resolve) => ends.push(resolve)));
  const first = piece();
  const second = piece();
  let went = false;
  void way.yielded(60_000).then(() => (went = true));
  ends[0]();
  await first;
  await tick();
  expect(went).toBe(false);
  ends[1]();
  await second;
  await tick();
  expect(went).toBe(true);
});

test('work that gives way goes after the time given, however long the rest is in progress', async () => {
  const way = new GiveWay();
  let end!: () => void;
  const piece = way.during(() => new Promise<void>((resolve) => (end = resolve)));
  const started = Date.now();
  await way.yielded(50);
  expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  end();
  await piece;
});

test('a piece that fails still ends its turn', async () => {
  const way = new GiveWay();
  await expect(way.during(() => Promise.reject(new Error('refused')))).rejects.toThrow('refused');
  let went = false;
  void way.yielded(60_000).then(() => (went = true));
  await tick();
  expect(went).toBe(true);
});

test('cleared waits out work begun while it waits as well, and goes at its deadline however much goes on', async () => {
  const way = new GiveWay();
  const endFirst = way.begin();
  let went = false;
  const clear = way.cleared(Date.now() + 60_000).then(() => (went = true));
  // The first ends and the next begins at once: a single yielded() would have gone.
  endFirst();
  const endSecond = way.begin();
  await tick();
  expect(went).toBe(false);
  endSecond();
  await clear;
  expect(went).toBe(true);

  const endLong = way.begin();
  const started = Date.now();
  await way.cleared(started + 50);
  expect(Date.now() - started).toBeGreaterThanOrEqual(45);
  expect(way.count).toBe(1);
  endLong();
  const aborted = new AbortController();
  way.begin();
  const given = way.cleared(Date.now() + 60_000, aborted.signal);
  aborted.abort(new Error('stopping'));
  await expect(given).rejects.toThrow('stopping');
});
