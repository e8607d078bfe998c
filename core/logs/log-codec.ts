import { promisify } from 'node:util';
import { constants, deflateRaw, inflateRaw } from 'node:zlib';

/**
 * How a stored log chunk's bytes are encoded (run_log_chunks.encoding, schema 043). Chunks stored
 * before schema 043 are all `raw`; each chunk says its own encoding, so old and new read alike.
 */
export const LOG_ENCODING = { raw: 0, deflateRaw: 1 } as const;
export type LogEncoding = (typeof LOG_ENCODING)[keyof typeof LOG_ENCODING];

/**
 * Most output bytes one stored chunk holds: a read of a few bytes in the middle of a log inflates
 * at most this much, and a large append compresses as several pieces on zlib's thread pool at once.
 */
export const LOG_CHUNK_BYTES = 256 * 1024;

const deflate = promisify(deflateRaw);
const inflate = promisify(inflateRaw);

/** A piece of output as it is stored: its place in the append, its encoding and its stored bytes. */
export interface EncodedChunk {
  /** Offset of the piece within the appended bytes. */
  at: number;
  encoding: LogEncoding;
  data: Buffer;
}

/**
 * Splits output into pieces of at most LOG_CHUNK_BYTES and deflates each at zlib's fastest level
 * (output is repetitive text, so even level 1 shrinks it many times, at a few hundred MB/s a core,
 * off the event loop). A piece that would not get smaller is kept raw.
 */
export async function encodeLog(data: Buffer, chunkBytes = LOG_CHUNK_BYTES): Promise<EncodedChunk[]> {
  const pieces: number[] = [];
  for (let at = 0; at < data.length; at += chunkBytes) pieces.push(at);
  return Promise.all(
    pieces.map(async (at) => {
      const raw = data.subarray(at, Math.min(at + chunkBytes, data.length));
      const packed = await deflate(raw, { level: constants.Z_BEST_SPEED });
      return packed.length < raw.length ? { at, encoding: LOG_ENCODING.deflateRaw, data: packed } : { at, encoding: LOG_ENCODING.raw, data: raw };
    }),
  );
}

/** The output bytes a stored chunk holds; an encoding this release does not know is an error, never garbage. */
export async function decodeLog(encoding: number, data: Buffer): Promise<Buffer> {
  if (encoding === LOG_ENCODING.raw) return data;
  if (encoding === LOG_ENCODING.deflateRaw) return inflate(data);
  throw new Error(`a stored log chunk has encoding ${encoding}, which this release cannot read`);
}
