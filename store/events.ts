import type { Db } from './db';
import type { RunEvent } from '../core/runs/run';

/** Channel announcing "run <id> has new events or log" to every server's live streams. */
export const RUN_ACTIVITY_CHANNEL = 'cairn_run_activity';

/**
 * Appends an event with the run's next sequence number. Call it inside the transaction that makes
 * the change the event reports, so the two commit together or not at all.
 */
export async function appendEvent(db: Db, runId: string, kind: string, body: Record<string, unknown>): Promise<number> {
  // One round trip: take the sequence number, insert, and notify listeners (delivered at commit).
  const [{ seq }] = await db<{ seq: number }[]>`
    WITH next AS (
      UPDATE runs SET next_event_seq = next_event_seq + 1 WHERE id = ${runId} RETURNING next_event_seq - 1 AS seq
    ), inserted AS (
      INSERT INTO run_events (run_id, seq, kind, body)
      SELECT ${runId}, seq, ${kind}, ${db.json(body as never)} FROM next RETURNING seq
    )
    SELECT seq, pg_notify(${RUN_ACTIVITY_CHANNEL}, ${runId}) FROM inserted`;
  return seq;
}

/** The query of a run's next `limit` events after `after`, as rows `seq, kind, body, at`, for a statement of its own or a branch of a larger one. */
export function eventsAfterQuery(db: Db, runId: string, after: number, limit: number) {
  return db`SELECT seq, kind, body, at FROM run_events WHERE run_id = ${runId} AND seq > ${after} ORDER BY seq LIMIT ${limit}`;
}

export async function listEvents(db: Db, runId: string, after: number, limit: number): Promise<RunEvent[]> {
  return db<RunEvent[]>`${eventsAfterQuery(db, runId, after, limit)}`;
}

const EVENT_PAGE = 500;

/** Every event after `after`, in order, read a page at a time; a failed read throws. */
export async function* eventsAfter(db: Db, runId: string, after: number): AsyncGenerator<RunEvent> {
  let cursor = after;
  for (;;) {
    const page = await listEvents(db, runId, cursor, EVENT_PAGE);
    yield* page;
    if (page.length < EVENT_PAGE) return;
    cursor = page[page.length - 1].seq;
  }
}
