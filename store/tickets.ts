import type { Db } from './db';

export async function createStreamTicket(
  db: Db,
  ticket: { hash: Buffer; runId: string; accountId: string; ttlSeconds: number },
): Promise<void> {
  await db`
    INSERT INTO stream_tickets (ticket_hash, run_id, account_id, expires_at)
    VALUES (${ticket.hash}, ${ticket.runId}, ${ticket.accountId}, now() + make_interval(secs => ${ticket.ttlSeconds}))`;
  // Spent and expired tickets are worthless; clearing them here keeps the table small without a job.
  await db`DELETE FROM stream_tickets WHERE expires_at < now() - interval '1 hour'`;
}

/** Spends a ticket for this run: true once, for an unexpired ticket; every later use is refused. */
export async function redeemStreamTicket(db: Db, hash: Buffer, runId: string): Promise<boolean> {
  const rows = await db`
    UPDATE stream_tickets SET used_at = now()
    WHERE ticket_hash = ${hash} AND run_id = ${runId} AND used_at IS NULL AND expires_at > now()
    RETURNING run_id`;
  return rows.length > 0;
}
