import type { Db } from './db';

/** A limit: at most `max` hits per subject in a fixed window of `windowSeconds` from its first hit. */
export interface RateLimit {
  bucket: string;
  max: number;
  windowSeconds: number;
}

/** A hit counted in the window that opened at `windowStart`; pass it back to release the hit. */
export type Claim = { granted: true; windowStart: Date } | { granted: false; retryAfterSeconds: number };

/** Windows this long over are deleted as new windows open; longer than every window in use. */
const KEEP_CLOSED_WINDOWS = '1 hour';

/**
 * Counts one hit for the subject, in one atomic upsert, when its window has room; a window that
 * has run its length starts over. A full window counts nothing and says how many seconds remain
 * of it. Every server sharing the database counts in the same row, and concurrent hits queue on it.
 */
export async function claimHit(db: Db, limit: RateLimit, subject: string): Promise<Claim> {
  const [row] = await db<{ window_start: Date; hits: number }[]>`
    INSERT INTO rate_limit_windows AS w (bucket, subject, window_start, hits)
    VALUES (${limit.bucket}, ${subject}, date_trunc('milliseconds', now()), 1)
    ON CONFLICT (bucket, subject) DO UPDATE SET
      window_start = CASE WHEN w.window_start <= now() - make_interval(secs => ${limit.windowSeconds})
                          THEN date_trunc('milliseconds', now()) ELSE w.window_start END,
      hits = CASE WHEN w.window_start <= now() - make_interval(secs => ${limit.windowSeconds}) THEN 1 ELSE w.hits + 1 END
    WHERE w.window_start <= now() - make_interval(secs => ${limit.windowSeconds}) OR w.hits < ${limit.max}
    RETURNING window_start, hits`;
  if (row) {
    if (row.hits === 1) await db`DELETE FROM rate_limit_windows WHERE window_start < now() - ${KEEP_CLOSED_WINDOWS}::interval`;
    return { granted: true, windowStart: row.window_start };
  }
  const [full] = await db<{ seconds: number }[]>`
    SELECT ceil(extract(epoch FROM window_start + make_interval(secs => ${limit.windowSeconds}) - now()))::int AS seconds
    FROM rate_limit_windows WHERE bucket = ${limit.bucket} AND subject = ${subject}`;
  // The window may have closed between the two statements: then a second is soon enough.
  return { granted: false, retryAfterSeconds: Math.max(1, full?.seconds ?? 1) };
}

/** Gives back a hit that turned out not to count (a sign-in that succeeded), if its window is still open. */
export async function releaseHit(db: Db, limit: RateLimit, subject: string, windowStart: Date): Promise<void> {
  await db`
    UPDATE rate_limit_windows SET hits = hits - 1
    WHERE bucket = ${limit.bucket} AND subject = ${subject} AND window_start = ${windowStart} AND hits > 0`;
}

/** Forgets the subject's window: its count starts again from nothing. */
export async function clearHits(db: Db, limit: RateLimit, subject: string): Promise<void> {
  await db`DELETE FROM rate_limit_windows WHERE bucket = ${limit.bucket} AND subject = ${subject}`;
}
