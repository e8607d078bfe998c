import type { Db } from './db';
import { readingReadable } from './facts';

/**
 * The estate over fact readings (spec part A 2.13, 4.4; schema/018_facts_estate.sql). Each host's
 * state at an instant is its newest kept reading gathered at or before it, found by one index
 * probe per host (`fact_hosts` x `fact_readings_host`), never by scanning every reading.
 */

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
  const rows = await db<(Partial<EstateHost> & { total: number; withheld: number })[]>`
    WITH latest AS MATERIALIZED (${latestAt(db, at)}),
    judged AS MATERIALIZED (
      SELECT l.id, l.host, ${readingReadable(db, readerId, 'r')} AS readable
      FROM latest l LEFT JOIN runs r ON r.id = l.run_id
    ),
    counts AS (
      SELECT (count(*) FILTER (WHERE readable))::int AS total, (count(*) FILTER (WHERE NOT readable))::int AS withheld FROM judged
    )
    SELECT c.total, c.withheld, p.*
    FROM counts c
    LEFT JOIN LATERAL (
      SELECT f.host, f.inventory_id, f.run_id, f.gathered_at, f.size_bytes, f.facts
      FROM judged j JOIN fact_readings f ON f.id = j.id
      WHERE j.readable
      ORDER BY j.host
      LIMIT ${page.limit} OFFSET ${page.offset}
    ) p ON true`;
  const { total, withheld } = rows[0];
  return { hosts: rows.filter((r) => r.host != null).map(({ total: _t, withheld: _w, ...host }) => host as EstateHost), total, withheld };
}

export interface DiffHost {
  host: string;
  /** added, changed, unchanged or unobserved. */
  state: 'added' | 'changed' | 'unchanged' | 'unobserved';
  from_gathered_at: Date | null;
  to_gathered_at: Date;
  from_run_id: string | null;
  to_run_id: string | null;
}

export interface DiffKey {
  host: string;
  key: string;
  from_value: unknown;
  to_value: unknown;
}

/**
 * The estate's change between two instants: every host the reader may read at `to` with its state
 * (unchanged ones counted, not listed), the differing top-level fact keys of changed hosts with
 * each end's value, and how many hosts were withheld (a reading at either end from a run the
 * reader may not read).
 */
export async function estateDiff(
  db: Db,
  from: Date,
  to: Date,
  readerId?: string,
): Promise<{ hosts: DiffHost[]; keys: DiffKey[]; unchanged: number; withheld: number }> {
  const rows = await db<(DiffHost & { readable: boolean; n: number; from_id: string | null; to_id: string })[]>`
    WITH a AS MATERIALIZED (${latestAt(db, from)}),
    b AS MATERIALIZED (${latestAt(db, to)}),
    j AS (
      SELECT b.host,
             CASE WHEN a.id IS NULL THEN 'added'
                  WHEN a.id = b.id THEN 'unobserved'
                  WHEN a.digest IS NOT DISTINCT FROM b.digest THEN 'unchanged'
                  ELSE 'changed' END AS state,
             a.gathered_at AS from_gathered_at, b.gathered_at AS to_gathered_at,
             a.run_id AS from_run_id, b.run_id AS to_run_id, a.id::text AS from_id, b.id::text AS to_id,
             ${readingReadable(db, readerId, 'rb')} AND ${readingReadable(db, readerId, 'ra')} AS readable
      FROM b LEFT JOIN a ON a.host = b.host
      LEFT JOIN runs rb ON rb.id = b.run_id
      LEFT JOIN runs ra ON ra.id = a.run_id
    )
    SELECT host, state, from_gathered_at, to_gathered_at, from_run_id, to_run_id, from_id, to_id, readable, 1 AS n
    FROM j WHERE state <> 'unchanged' OR NOT readable
    UNION ALL
    SELECT NULL, 'unchanged', NULL, NULL, NULL, NULL, NULL, NULL, true, count(*)::int FROM j WHERE state = 'unchanged' AND readable
    ORDER BY host NULLS FIRST`;
  const unchanged = rows.find((r) => r.host === null)?.n ?? 0;
  const listed = rows.filter((r) => r.host !== null);
  const withheld = listed.filter((r) => !r.readable).length;
  const readable = listed.filter((r) => r.readable);
  const changed = readable.filter((h) => h.state === 'changed');
  const keys = changed.length ? await changedKeys(db, changed.map((h) => ({ host: h.host, from_id: h.from_id!, to_id: h.to_id }))) : [];
  const hosts = readable.map(({ readable: _r, n: _n, from_id: _f, to_id: _t, ...h }) => h);
  return { hosts, keys, unchanged, withheld };
}

/** The differing top-level fact keys of each host between two of its readings. */
async function changedKeys(db: Db, pairs: { host: string; from_id: string; to_id: string }[]): Promise<DiffKey[]> {
  return db<DiffKey[]>`
    SELECT p.host, k.key, fa.facts -> k.key AS from_value, fb.facts -> k.key AS to_value
    FROM unnest(${db.array(pairs.map((p) => p.host))}::text[], ${db.array(pairs.map((p) => p.from_id))}::bigint[], ${db.array(pairs.map((p) => p.to_id))}::bigint[])
         AS p(host, from_id, to_id)
    JOIN fact_readings fa ON fa.id = p.from_id
    JOIN fact_readings fb ON fb.id = p.to_id
    CROSS JOIN LATERAL (SELECT jsonb_object_keys(fa.facts) AS key UNION SELECT jsonb_object_keys(fb.facts)) k
    WHERE (fa.facts -> k.key) IS DISTINCT FROM (fb.facts -> k.key)
    ORDER BY p.host, k.key`;
}
