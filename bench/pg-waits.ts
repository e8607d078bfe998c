import type postgres from 'postgres';

/** How often PostgreSQL's sessions are looked at. */
const INTERVAL_MS = 200;

export interface WaitSampler {
  /** Stops sampling; a summary of what the install's sessions were doing, busiest first. */
  stop(): Promise<string>;
}

/**
 * Samples pg_stat_activity while a batch runs: for every active session but the sampler's own, what
 * it waited on (`Lock:transactionid`, `IO:WALSync`, or `CPU` when it waited on nothing) and the
 * first words of its statement. Where a scaled-out shape stalls, this says whether PostgreSQL is
 * where it waits, and on what.
 */
export function sampleWaits(sql: postgres.Sql): WaitSampler {
  const counts = new Map<string, number>();
  let samples = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const rows = await sql<{ wait: string; statement: string }[]>`
        SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait,
               left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS statement
        FROM pg_stat_activity
        WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`;
      samples++;
      for (const row of rows) {
        const key = `${row.wait} ${row.statement}`;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const busiest = [...counts].sort((a, b) => b[1] - a[1]).slice(0, 6);
      const active = [...counts.values()].reduce((sum, n) => sum + n, 0);
      return (
        `${(active / Math.max(1, samples)).toFixed(1)} sessions active on average over ${samples} looks; busiest: ` +
        busiest.map(([key, n]) => `${(n / Math.max(1, samples)).toFixed(2)} ${key}`).join(' | ')
      );
    },
  };
}
