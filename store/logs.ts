import type { Db } from './db';
import { RUN_ACTIVITY_CHANNEL } from './events';

/** Most bytes one read of a log returns: a reader holds about this much at a time, however the log was chunked. */
export const LOG_READ_BYTES = 1024 * 1024;
/** Most chunk rows one read touches, so a log written in tiny pieces is read in bounded steps too. */
const LOG_READ_ROWS = 1024;

/**
 * Appends captured output at the end of the run's log in one statement: the offset is taken from
 * the run row (whose lock orders concurrent appends), the chunk stored, and live streams told.
 * The bytes travel as base64 text, which PostgreSQL decodes about twice as fast as the hex text a
 * bytea parameter is sent as (and which is a third shorter): a large log's appends are the
 * database's work, so this is most of what a firehose of output costs.
 */
export async function appendLog(db: Db, runId: string, data: Buffer): Promise<void> {
  if (data.length === 0) return;
  await db`
    WITH grown AS (
      UPDATE runs SET log_bytes = log_bytes + ${data.length} WHERE id = ${runId} RETURNING log_bytes - ${data.length} AS start
    ), stored AS (
      INSERT INTO run_log_chunks (run_id, start_offset, data)
      SELECT ${runId}, start, decode(${data.toString('base64')}, 'base64') FROM grown RETURNING run_id
    )
    SELECT pg_notify(${RUN_ACTIVITY_CHANNEL}, run_id) FROM stored`;
}

/**
 * The stored log bytes from byte `from` on, at most `maxBytes` of them (fewer at the end of what
 * is stored so far). Only the wanted part of each chunk leaves the database: the chunk holding
 * `from` is found through the primary key and cut there, and the last one is cut at the bound.
 */
export async function readLogBytes(db: Db, runId: string, from: number, maxBytes = LOG_READ_BYTES): Promise<Buffer> {
  const until = from + maxBytes;
  // As base64 text, like appendLog's: a third shorter than bytea's hex (the line breaks PostgreSQL
  // puts in it are skipped by Buffer.from).
  const rows = await db<{ data: string }[]>`
    SELECT encode(substring(data FROM (greatest(${from}::bigint - start_offset, 0) + 1)::int
                          FOR (${until}::bigint - greatest(start_offset, ${from}::bigint))::int), 'base64') AS data
    FROM run_log_chunks
    WHERE run_id = ${runId}
      AND start_offset >= coalesce(
        (SELECT max(start_offset) FROM run_log_chunks WHERE run_id = ${runId} AND start_offset <= ${from}::bigint), 0)
      AND start_offset < ${until}::bigint
    ORDER BY start_offset LIMIT ${LOG_READ_ROWS}`;
  return rows.length === 1 ? Buffer.from(rows[0].data, 'base64') : Buffer.concat(rows.map((row) => Buffer.from(row.data, 'base64')));
}

/** The log bytes in [from, to), a bounded read at a time; a failed read throws. */
export async function* logByteRange(db: Db, runId: string, from: number, to: number): AsyncGenerator<Buffer> {
  let offset = from;
  while (offset < to) {
    const data = await readLogBytes(db, runId, offset, Math.min(LOG_READ_BYTES, to - offset));
    if (data.length === 0) return;
    yield data;
    offset += data.length;
  }
}

/** The log bytes in [from, to) as one buffer (the caller bounds the range). */
export async function readLogRange(db: Db, runId: string, from: number, to: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of logByteRange(db, runId, from, to)) parts.push(part);
  return Buffer.concat(parts);
}
