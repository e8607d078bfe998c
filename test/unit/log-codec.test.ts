import { randomBytes } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import { decodeLog, encodeLog, LOG_CHUNK_BYTES, LOG_ENCODING } from '../../core/logs/log-codec';

const roundTrip = async (data: Buffer, chunkBytes?: number) => {
  const chunks = await encodeLog(data, chunkBytes);
  const decoded = await Promise.all(chunks.map((c) => decodeLog(c.encoding, c.data)));
  return { chunks, bytes: Buffer.concat(decoded) };
};

test('repetitive output is deflated, in pieces of at most the chunk size, and reads back byte for byte', async () => {
  const line = 'cairn firehose 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 abcdefgh\n';
  const data = Buffer.from(line.repeat(6000)); // 600 kB: three pieces
  const { chunks, bytes } = await roundTrip(data);
  expect(bytes.equals(data)).toBe(true);
  expect(chunks.map((c) => c.at)).toEqual([0, LOG_CHUNK_BYTES, 2 * LOG_CHUNK_BYTES]);
  expect(chunks.every((c) => c.encoding === LOG_ENCODING.deflateRaw)).toBe(true);
  const stored = chunks.reduce((n, c) => n + c.data.length, 0);
  expect(stored).toBeLessThan(data.length / 20);
  // Plain raw deflate, readable by any zlib.
  expect(deflateRawSync(data.subarray(0, LOG_CHUNK_BYTES), { level: 1 }).length).toBe(chunks[0].data.length);
});

test('bytes that do not shrink are kept raw, and multi-byte characters cut between pieces join again', async () => {
  const noise = randomBytes(10_000);
  const { chunks, bytes } = await roundTrip(noise);
  expect(chunks).toEqual([{ at: 0, encoding: LOG_ENCODING.raw, data: noise }]);
  expect(bytes.equals(noise)).toBe(true);

  const text = Buffer.from('café € 😀 '.repeat(20));
  const small = await roundTrip(text, 7); // every piece ends mid-character somewhere
  expect(small.bytes.toString('utf8')).toBe(text.toString('utf8'));
  expect(new Set(small.chunks.map((c) => c.encoding))).toEqual(new Set([LOG_ENCODING.raw]));
});

test('a chunk in an encoding this release does not know, or deflate data that is damaged, is an error rather than garbage', async () => {
  await expect(decodeLog(7, Buffer.from('x'))).rejects.toThrow(/encoding 7/);
  await expect(decodeLog(LOG_ENCODING.deflateRaw, Buffer.from([0xff, 0xff, 0xff]))).rejects.toThrow();
  expect(await encodeLog(Buffer.alloc(0))).toEqual([]);
});
