import type { Db } from './db';
import { RUN_ACTIVITY_CHANNEL } from './events';

/**
 * Appends captured output at the end of the run's log in one statement: the offset is taken from
 * the run row (whose lock orders concurrent appends), the chunk stored, and live streams told.
 */
export async function appendLog(db: Db, runId: string, data: Buffer): Promise<void> {
  if (data.length === 0) return;
  await db`
    WITH grown AS (
      UPDATE runs SET log_bytes = log_bytes + ${data.length} WHERE id = ${runId} RETURNING log_bytes - ${data.length} AS start
    ), stored AS (
      INSERT INTO run_log_chunks (run_id, start_offset, data) SELECT ${runId}, start, ${data} FROM grown RETURNING run_id
    )
    SELECT pg_notify(${RUN_ACTIVITY_CHANNEL}, run_id) FROM stored`;
}

export interface LogChunk {
  start_offset: number;
  data: Buffer;
}

/** Chunks that hold bytes at or after `from`, in order, a page at a time. */
export async function readLogChunks(db: Db, runId: string, from: number, limit = 256): Promise<LogChunk[]> {
  return db<LogChunk[]>`
    SELECT start_offset, data FROM run_log_chunks
    WHERE run_id = ${runId} AND start_offset + length(data) > ${from}
    ORDER BY start_offset LIMIT ${limit}`;
}

/** The log bytes in [from, to), chunk by chunk, read a page of chunks at a time; a failed read throws. */
export async function* logByteRange(db: Db, runId: string, from: number, to: number): AsyncGenerator<Buffer> {
  let offset = from;
  while (offset < to) {
    const chunks = await readLogChunks(db, runId, offset);
    if (chunks.length === 0) return;
    for (const chunk of chunks) {
      const start = Math.max(offset, chunk.start_offset) - chunk.start_offset;
      const end = Math.min(chunk.data.length, to - chunk.start_offset);
      if (end > start) yield chunk.data.subarray(start, end);
      offset = chunk.start_offset + chunk.data.length;
      if (offset >= to) return;
    }
  }
}

/** The log bytes in [from, to) as one buffer (the caller bounds the range). */
export async function readLogRange(db: Db, runId: string, from: number, to: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of logByteRange(db, runId, from, to)) parts.push(part);
  return Buffer.concat(parts);
}
