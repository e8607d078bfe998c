import type { RunEvent } from '../core/runs/run';
import type { Db } from './db';
import { eventsAfterQuery } from './events';
import { logBytesOfChunks, logChunksQuery, type LogChunkRow } from './logs';

/** A run's state and what it did after a position, as one snapshot of the store saw them. */
export interface RunActivitySnapshot {
  status: string;
  error: string | null;
  finished: boolean;
  log_bytes: number;
  events: RunEvent[];
  /** Stored log bytes from the position on (not cut at a character boundary). */
  log: Buffer;
}

type ActivityRow =
  | { part: 0; status: string; error: string | null; finished: boolean; log_bytes: number }
  | ({ part: 1 } & RunEvent)
  | ({ part: 2 } & LogChunkRow);

/**
 * The run's row, its next `limits.events` events after `at.after` and up to `limits.logBytes` of
 * its log from `at.logOffset`, in one statement: one round trip instead of three, and one snapshot, so a run
 * finished in it has nothing more to come than the events and log read with it. Undefined when
 * there is no such run.
 */
export async function readRunActivity(
  db: Db,
  runId: string,
  at: { after: number; logOffset: number },
  limits: { events: number; logBytes: number },
): Promise<RunActivitySnapshot | undefined> {
  const until = at.logOffset + limits.logBytes;
  // Each branch's columns are its own; the others' are NULL. The first branch types them.
  const rows = await db<ActivityRow[]>`
    SELECT 0 AS part, status, error, finished_at IS NOT NULL AS finished, log_bytes,
           NULL::integer AS seq, NULL::text AS kind, NULL::jsonb AS body, NULL::timestamptz AS at,
           NULL::bigint AS start, NULL::smallint AS encoding, NULL::text AS data
    FROM runs WHERE id = ${runId}
    UNION ALL
    SELECT 1, NULL, NULL, NULL, NULL, seq, kind, body, at, NULL, NULL, NULL
    FROM (${eventsAfterQuery(db, runId, at.after, limits.events)}) AS events
    UNION ALL
    SELECT 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, start, encoding, data
    FROM (${logChunksQuery(db, runId, at.logOffset, until)}) AS chunks`;
  const run = rows.find((row) => row.part === 0);
  if (!run) return undefined;
  // A UNION ALL keeps no order of its own: each part is put back in its order here.
  const events = rows.filter((row): row is ActivityRow & { part: 1 } => row.part === 1).map(({ seq, kind, body, at }) => ({ seq, kind, body, at }));
  events.sort((a, b) => a.seq - b.seq);
  const chunks = rows.filter((row): row is ActivityRow & { part: 2 } => row.part === 2).map(({ start, encoding, data }) => ({ start, encoding, data }));
  chunks.sort((a, b) => a.start - b.start);
  const log = await logBytesOfChunks(chunks, at.logOffset, until);
  return { status: run.status, error: run.error, finished: run.finished, log_bytes: run.log_bytes, events, log };
}
