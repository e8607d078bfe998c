import { LogSink } from '../../runtime/log-sink';
import { MaskedOutput } from '../../runtime/masked-output';
import { createMasker } from '../../core/masker';

/** An append the test finishes by hand, so the sink can be caught holding bytes. */
function manualStore() {
  const stored: string[] = [];
  const calls: Array<{ data: Buffer; done: () => void; fail: (err: Error) => void }> = [];
  const append = (data: Buffer) =>
    new Promise<void>((resolve, reject) => {
      calls.push({ data, done: () => (stored.push(data.toString()), resolve()), fail: reject });
    });
  return { stored, calls, append };
}

const tick = () => new Promise((r) => setImmediate(r));

test('under its bound a write asks nothing of the writer', () => {
  const sink = new LogSink(async () => {}, () => {}, 10, 8, 16);
  expect(sink.write(Buffer.from('12345'))).toBeUndefined();
  expect(sink.write(Buffer.from('6789abcdef'))).toBeUndefined();
  return sink.close();
});

test('past its bound a write returns a promise that resolves once the stored bytes bring it back under', async () => {
  const store = manualStore();
  const sink = new LogSink(store.append, () => {}, 1000, 4, 10);
  expect(sink.write(Buffer.from('aaaa'))).toBeUndefined(); // a full batch: its append starts
  await tick();
  expect(store.calls).toHaveLength(1);
  expect(sink.write(Buffer.from('bbbb'))).toBeUndefined();
  let released = false;
  const wait = sink.write(Buffer.from('cccc'));
  expect(wait).toBeInstanceOf(Promise);
  void wait!.then(() => (released = true));
  expect(sink.held).toBe(12);
  // The first append is stored: 8 bytes are left, under the bound, and the writer may go on.
  store.calls[0].done();
  await tick();
  await tick();
  expect(released).toBe(true);
  // What arrived meanwhile went as one append, in order.
  expect(store.calls).toHaveLength(2);
  expect(store.calls[1].data.toString()).toBe('bbbbcccc');
  store.calls[1].done();
  await sink.close();
  expect(store.stored.join('')).toBe('aaaabbbbcccc');
});

test('a writer kept waiting is released after a failed store is retried and succeeds', async () => {
  jest.useFakeTimers();
  try {
    let fail = true;
    const stored: string[] = [];
    const errors: unknown[] = [];
    const sink = new LogSink(
      async (data) => {
        if (fail) throw new Error('database away');
        stored.push(data.toString());
      },
      (err) => errors.push(err),
      1000,
      4,
      6,
    );
    let released = false;
    void sink.write(Buffer.from('12345678'))?.then(() => (released = true));
    await jest.advanceTimersByTimeAsync(0);
    expect(errors).toHaveLength(1);
    expect(released).toBe(false);
    // Nothing more is written (the writer waits), yet the sink tries again by itself.
    fail = false;
    await jest.advanceTimersByTimeAsync(1000);
    expect(stored).toEqual(['12345678']);
    expect(released).toBe(true);
  } finally {
    jest.useRealTimers();
  }
});

test('a close that gives up lets a waiting writer go', async () => {
  const sink = new LogSink(async () => {
    throw new Error('gone');
  }, () => {}, 1000, 4, 2);
  const wait = sink.write(Buffer.from('12345'));
  expect(wait).toBeInstanceOf(Promise);
  await expect(sink.close(1, 2)).rejects.toThrow('could not store the last 5 bytes of output');
  await expect(wait).resolves.toBeUndefined();
});

test('masked output hands the sink\'s wait back to its writer', async () => {
  const stored: string[] = [];
  const sink = new LogSink(async (data) => {
    stored.push(data.toString());
  }, () => {}, 1000, 4, 8);
  const output = new MaskedOutput(createMasker(['s3cr3t-value']), (data) => sink.write(data));
  const wait = output.write(Buffer.from('first line s3cr3t-value\n'));
  expect(wait).toBeInstanceOf(Promise);
  await wait;
  // Held by the masker (no line end yet): nothing passed on, nothing to wait for.
  expect(output.write(Buffer.from('no line end'))).toBeUndefined();
  output.end();
  await sink.close();
  expect(stored.join('')).toBe('first line [masked]\nno line end');
});
