import type { Db, Sql } from './db';
import { readingReadable } from './facts';

/**
 * The estate over fact readings (spec part A 2.13, 4.4; schema/018_facts_estate.sql). Each host's
 * state at an instant is its newest kept reading gathered at or before it, found by one index
 * probe per host (`fact_hosts` x `fact_readings_host`), never by scanning every reading.
 */

/**
 * Runs an estate statement with PostgreSQL's JIT off: the planner's row guesses for the jsonb
 * functions put these statements past the JIT threshold, and compiling costs far more than the
 * statement itself. In a transaction of its own unless `db` is one already.
 */
async function withoutJit<T>(db: Db, work: (tx: Db) => Promise<T>): Promise<T> {
  if ('begin' in db) {
    return (db as Sql).begin(async (tx) => {
      await tx`SET LOCAL jit = off`;
      return work(tx);
    }) as Promise<T>;
  }
  await db`SET LOCAL jit = off`;
  return work(db);
}

/** The newest kept reading of every host at `at`: id, host, run. */
const latestAt = (db: Db, at: Date) => db`
  SELECT l.id, l.host, l.run_id, l.digest, l.gathered_at
  FROM fact_hosts h
  CROSS JOIN LATERAL (
    SELECT f.id, f.host, f.run_id, f.digest, f.gathered_at FROM fact_readings f
    WHERE f.host = h.host AND f.facts IS NOT NULL AND f.gathered_at <= ${at}
    ORDER BY f.gathered_at DESC, f.id DESC
    LIMIT 1
  ) l`;

/** The oldest kept reading's time: the estate's horizon; null with none. */
export async function estateHorizon(db: Db): Promise<Date | null> {
  const [row] = await db<{ horizon: Date | null }[]>`SELECT min(gathered_at) AS horizon FROM fact_readings WHERE facts IS NOT NULL`;
  return row.horizon;
}

export interface EstateHost {
  host: string;
  inventory_id: string;
  run_id: string | null;
  gathered_at: Date;
  size_bytes: number;
  facts: Record<string, unknown>;
}

/**
 * The estate at `at`, host order, one page: the hosts the reader may read (every host's newest
 * reading's run readable, or gone), how many there are, and how many were withheld.
 */
export async function estateAt(
  db: Db,
  at: Date,
  page: { limit: number; offset: number },
  readerId?: string,
): Promise<{ hosts: EstateHost[]; total: number; withheld: number }> {
  const rows = await withoutJit(db, (db) => db<(Partial<EstateHost> & { total: number; withheld: number })[]>`
    WITH latest AS MATERIALIZED (${latestAt(db, at)}),
    judged AS MATERIALIZED (
      SELECT l.id, l.host, ${readingReadable(db, readerId, 'r')} AS readable
      FROM latest l ${readerId === undefined ? db`` : db`LEFT JOIN runs r ON r.id = l.run_id`}
    ),
    counts AS (
      SELECT (count(*) FILTER (WHERE readable))::int AS total, (count(*) FILTER (WHERE NOT readable))::int AS withheld FROM judged
    )
    SELECT c.total, c.withheld, p.*
    FROM counts c
    LEFT JOIN LATERAL (
      -- The page's hosts first, then only their facts.
      SELECT f.host, f.inventory_id, f.run_id, f.gathered_at, f.size_bytes, f.facts
      FROM (SELECT id, host FROM judged WHERE readable ORDER BY host LIMIT ${page.limit} OFFSET ${page.offset}) j
      JOIN fact_readings f ON f.id = j.id
      ORDER BY j.host
    ) p ON true`);
  const { total, withheld } = rows[0];
  return { hosts: rows.filter((r) => r.host != null).map(({ total: _t, withheld: _w, ...host }) => host as EstateHost), total, withheld };
}

export interface DiffHost {
  host: string;
  state: 'added' | 'changed' | 'unobserved';
  from_gathered_at: Date | null;
  to_gathered_at: Date;
  from_run_id: string | null;
  to_run_id: string | null;
  /** A changed host's differing top-level keys: [key, value at from, value at to], null where absent. */
  keys: [string, unknown, unknown][] | null;
}

export interface DiffCounts {
  added: number;
  changed: number;
  unobserved: number;
  unchanged: number;
  withheld: number;
}

/**
 * The estate's change between two instants: counts of every state over the hosts the reader may
 * read at `to` (and how many were withheld: a reading at either end from a run the reader may not
 * read), and one page, host order, of the added, changed and unobserved hosts; a changed host with
 * its differing top-level fact keys and each end's value.
 */
export async function estateDiff(
  db: Db,
  from: Date,
  to: Date,
  page: { limit: number; offset: number },
  readerId?: string,
): Promise<{ hosts: DiffHost[]; counts: DiffCounts }> {
  // One statement: each host's reading at both ends (index only) and its state; then, for the
  // page's changed hosts only, the differing keys, each document read by its id.
  const rows = await withoutJit(db, (db) => db<(DiffHost & { counts: DiffCounts | null })[]>`
    WITH ends AS MATERIALIZED (
      -- Per host, one probe for its reading at "to", and one for "from" only when that reading is newer.
      SELECT b.host, b.id AS to_id, b.run_id AS to_run_id, b.digest AS to_digest, b.gathered_at AS to_gathered_at,
             a.id AS from_id, a.run_id AS from_run_id, a.digest AS from_digest, a.gathered_at AS from_gathered_at,
             b.gathered_at <= ${from} AS same
      FROM fact_hosts h
      CROSS JOIN LATERAL (
        SELECT f.id, f.run_id, f.digest, f.gathered_at, f.host FROM fact_readings f
        WHERE f.host = h.host AND f.facts IS NOT NULL AND f.gathered_at <= ${to}
        ORDER BY f.gathered_at DESC, f.id DESC LIMIT 1
      ) b
      LEFT JOIN LATERAL (
        SELECT f.id, f.run_id, f.digest, f.gathered_at FROM fact_readings f
        WHERE b.gathered_at > ${from} AND f.host = h.host AND f.facts IS NOT NULL AND f.gathered_at <= ${from}
        ORDER BY f.gathered_at DESC, f.id DESC LIMIT 1
      ) a ON true
    ),
    j AS MATERIALIZED (
      SELECT e.host,
             CASE WHEN e.same THEN 'unobserved'
                  WHEN e.from_id IS NULL THEN 'added'
                  WHEN e.from_digest IS NOT DISTINCT FROM e.to_digest THEN 'unchanged'
                  ELSE 'changed' END AS state,
             CASE WHEN e.same THEN e.to_gathered_at ELSE e.from_gathered_at END AS from_gathered_at, e.to_gathered_at,
             CASE WHEN e.same THEN e.to_run_id ELSE e.from_run_id END AS from_run_id, e.to_run_id, e.from_id, e.to_id,
             ${readerId === undefined ? db`true` : db`${readingReadable(db, readerId, 'rb')} AND ${readingReadable(db, readerId, 'ra')}`} AS readable
      FROM ends e
      ${
        readerId === undefined
          ? db``
          : db`LEFT JOIN runs rb ON rb.id = e.to_run_id LEFT JOIN runs ra ON ra.id = (CASE WHEN e.same THEN e.to_run_id ELSE e.from_run_id END)`
      }
    )
    SELECT NULL AS host, NULL AS state, NULL AS from_gathered_at, NULL AS to_gathered_at, NULL AS from_run_id, NULL AS to_run_id, NULL AS keys,
           jsonb_build_object(
             'added', count(*) FILTER (WHERE readable AND state = 'added'),
             'changed', count(*) FILTER (WHERE readable AND state = 'changed'),
             'unobserved', count(*) FILTER (WHERE readable AND state = 'unobserved'),
             'unchanged', count(*) FILTER (WHERE readable AND state = 'unchanged'),
             'withheld', count(*) FILTER (WHERE NOT readable)) AS counts
    FROM j
    UNION ALL
    SELECT p.host, p.state, p.from_gathered_at, p.to_gathered_at, p.from_run_id, p.to_run_id,
           CASE WHEN p.state = 'changed' THEN (
             SELECT jsonb_agg(jsonb_build_array(k.key, fa.facts -> k.key, fb.facts -> k.key) ORDER BY k.key)
             FROM (
               SELECT e.key FROM jsonb_each(fb.facts) e WHERE e.value IS DISTINCT FROM fa.facts -> e.key
               UNION ALL
               SELECT o.key FROM jsonb_object_keys(fa.facts) o(key) WHERE NOT fb.facts ? o.key
             ) k
           ) END,
           NULL
    FROM (SELECT * FROM j WHERE readable AND state <> 'unchanged' ORDER BY host LIMIT ${page.limit} OFFSET ${page.offset}) p
    -- Each changed host's two documents, read once each by id.
    LEFT JOIN LATERAL (SELECT f.facts FROM fact_readings f WHERE f.id = p.from_id AND p.state = 'changed') fa ON true
    LEFT JOIN LATERAL (SELECT f.facts FROM fact_readings f WHERE f.id = p.to_id AND p.state = 'changed') fb ON true`);
  const counts = rows.find((r) => r.counts !== null)!.counts!;
  const hosts = rows.filter((r) => r.counts === null).map(({ counts: _c, ...h }) => h);
  hosts.sort((x, y) => (x.host < y.host ? -1 : x.host > y.host ? 1 : 0));
  return { hosts, counts };
}
