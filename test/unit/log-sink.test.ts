import { LogSink } from '../../runtime/log-sink';

test('writes arrive in order, batched, and close stores everything', async () => {
  const stored: string[] = [];
  const sink = new LogSink(async (data) => {
    stored.push(data.toString());
  }, () => {}, 10, 8);
  for (const part of ['ab', 'cd', 'efgh', 'ij']) sink.write(Buffer.from(part));
  await sink.close();
  expect(stored.join('')).toBe('abcdefghij');
  expect(stored.length).toBeLessThan(4);
});

test('a failed store keeps the bytes and a later flush stores them in order', async () => {
  const stored: string[] = [];
  let failures = 2;
  const errors: unknown[] = [];
  const sink = new LogSink(async (data) => {
    if (failures-- > 0) throw new Error('database away');
    stored.push(data.toString());
  }, (err) => errors.push(err), 5);
  sink.write(Buffer.from('one '));
  await sink.flush();
  sink.write(Buffer.from('two '));
  await sink.flush();
  sink.write(Buffer.from('three'));
  await sink.close(1);
  expect(stored.join('')).toBe('one two three');
  expect(errors).toHaveLength(2);
});

test('close gives up after its tries and says how much was not stored', async () => {
  const sink = new LogSink(async () => {
    throw new Error('gone');
  }, () => {});
  sink.write(Buffer.from('12345'));
  await expect(sink.close(1, 3)).rejects.toThrow('could not store the last 5 bytes of output');
});
