import type { Db, Sql } from './db';
import { RUN_ACTIVITY_CHANNEL } from './events';

/** Appends captured output at the end of the run's log; the run row lock orders concurrent appends. */
export async function appendLog(db: Sql, runId: string, data: Buffer): Promise<void> {
  if (data.length === 0) return;
  await db.begin(async (tx) => {
    const [row] = await tx<{ start: number }[]>`
      UPDATE runs SET log_bytes = log_bytes + ${data.length} WHERE id = ${runId} RETURNING log_bytes - ${data.length} AS start`;
    if (!row) return;
    await tx`INSERT INTO run_log_chunks (run_id, start_offset, data) VALUES (${runId}, ${row.start}, ${data})`;
    await tx`SELECT pg_notify(${RUN_ACTIVITY_CHANNEL}, ${runId})`;
  });
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
