import type { Db } from './db';

/** A ticket belongs to the token that minted it: revoking the token or deleting its account deletes the ticket. */
export async function createStreamTicket(
  db: Db,
  ticket: { hash: Buffer; runId: string; accountId: string; tokenId: string; ttlSeconds: number },
): Promise<void> {
  await db`
    INSERT INTO stream_tickets (ticket_hash, run_id, account_id, token_id, expires_at)
    VALUES (${ticket.hash}, ${ticket.runId}, ${ticket.accountId}, ${ticket.tokenId}, now() + make_interval(secs => ${ticket.ttlSeconds}))`;
  // Spent and expired tickets are worthless; clearing them here keeps the table small without a job.
  await db`DELETE FROM stream_tickets WHERE expires_at < now() - interval '1 hour'`;
}

/**
 * Spends a ticket for this run: true once, for an unexpired ticket whose minting token is still
 * live (not expired, its account not disabled; a revoked token's tickets are gone with it); every
 * later use is refused.
 */
export async function redeemStreamTicket(db: Db, hash: Buffer, runId: string): Promise<boolean> {
  const rows = await db`
    UPDATE stream_tickets s SET used_at = now()
    FROM tokens t, accounts a
    WHERE s.ticket_hash = ${hash} AND s.run_id = ${runId} AND s.used_at IS NULL AND s.expires_at > now()
      AND t.id = s.token_id AND (t.expires_at IS NULL OR t.expires_at > now())
      AND a.id = t.account_id AND NOT a.disabled
    RETURNING s.run_id`;
  return rows.length > 0;
}
