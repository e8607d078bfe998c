import { decodeLog, encodeLog, LOG_ENCODING } from '../core/logs/log-codec';
import type { Db } from './db';
import { RUN_ACTIVITY_CHANNEL } from './events';

/** Most bytes one read of a log returns: a reader holds about this much at a time, however the log was chunked. */
export const LOG_READ_BYTES = 1024 * 1024;
/** Most chunk rows one read touches, so a log written in tiny pieces is read in bounded steps too. */
const LOG_READ_ROWS = 1024;

/**
 * Appends captured output at the end of the run's log in one statement: the offset is taken from
 * the run row (whose lock orders concurrent appends), the chunks stored, and live streams told.
 * The output is compressed here, before PostgreSQL sees it (core/logs/log-codec.ts: pieces of at
 * most 256 KiB, each deflated and marked with its encoding), and the column is stored without
 * PostgreSQL's own compression (schema 043): a firehose of output then costs the database a
 * fraction of its bytes. They travel as base64 text, which PostgreSQL decodes about twice as fast
 * as the hex text a bytea parameter is sent as.
 */
export async function appendLog(db: Db, runId: string, data: Buffer): Promise<void> {
  if (data.length === 0) return;
  const chunks = await encodeLog(data);
  await db`
    WITH grown AS (
      UPDATE runs SET log_bytes = log_bytes + ${data.length} WHERE id = ${runId} RETURNING log_bytes - ${data.length} AS start
    ), stored AS (
      INSERT INTO run_log_chunks (run_id, start_offset, encoding, data)
      SELECT ${runId}, grown.start + piece.at, piece.encoding, decode(piece.data, 'base64')
      FROM grown, unnest(${chunks.map((c) => c.at)}::bigint[], ${chunks.map((c) => c.encoding)}::smallint[], ${chunks.map((c) => c.data.toString('base64'))}::text[])
        AS piece (at, encoding, data)
      RETURNING run_id
    )
    SELECT pg_notify(${RUN_ACTIVITY_CHANNEL}, run_id) FROM (SELECT DISTINCT run_id FROM stored) AS appended`;
}

/** A stored chunk of a log as a read returns it: its start, its encoding, its (cut, when raw) bytes as base64. */
export interface LogChunkRow {
  start: number;
  encoding: number;
  data: string;
}

/**
 * The query of the chunks holding the log bytes [from, until), as rows `start, encoding, data`
 * ({@link LogChunkRow}), for a statement of its own or a branch of a larger one. The chunk holding
 * `from` is found through the primary key; a raw chunk (all of those stored before schema 043) is
 * cut in the database, so only the wanted part of it leaves. Data goes as base64 text, like
 * appendLog's: a third shorter than bytea's hex (the line breaks PostgreSQL puts in it are skipped
 * by Buffer.from).
 */
export function logChunksQuery(db: Db, runId: string, from: number, until: number) {
  return db`
    SELECT start_offset AS start, encoding,
           encode(CASE WHEN encoding = ${LOG_ENCODING.raw}
                       THEN substring(data FROM (greatest(${from}::bigint - start_offset, 0) + 1)::int
                                           FOR (${until}::bigint - greatest(start_offset, ${from}::bigint))::int)
                       ELSE data END, 'base64') AS data
    FROM run_log_chunks
    WHERE run_id = ${runId}
      AND start_offset >= coalesce(
        (SELECT max(start_offset) FROM run_log_chunks WHERE run_id = ${runId} AND start_offset <= ${from}::bigint), 0)
      AND start_offset < ${until}::bigint
    ORDER BY start_offset LIMIT ${LOG_READ_ROWS}`;
}

/** The log bytes [from, until) of the rows {@link logChunksQuery} returned, in order: compressed ones inflated here and cut like raw ones. */
export async function logBytesOfChunks(rows: readonly LogChunkRow[], from: number, until: number): Promise<Buffer> {
  const parts = await Promise.all(
    rows.map(async (row) => {
      const stored = Buffer.from(row.data, 'base64');
      if (row.encoding === LOG_ENCODING.raw) return stored;
      const bytes = await decodeLog(row.encoding, stored);
      const skip = Math.max(from - row.start, 0);
      return bytes.subarray(skip, Math.max(skip, until - row.start));
    }),
  );
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

/** The stored log bytes from byte `from` on, at most `maxBytes` of them (fewer at the end of what is stored so far). */
export async function readLogBytes(db: Db, runId: string, from: number, maxBytes = LOG_READ_BYTES): Promise<Buffer> {
  const until = from + maxBytes;
  return logBytesOfChunks(await db<LogChunkRow[]>`${logChunksQuery(db, runId, from, until)}`, from, until);
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
