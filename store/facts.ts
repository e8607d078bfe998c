import { runReadableBy } from './access';
import type { Db } from './db';

/**
 * Fact readings (schema/018_facts_estate.sql): one host's facts as one run gathered them. The
 * newest kept reading of a host of an inventory is that inventory's cached facts; a reading over
 * 1 MiB is recorded skipped, without facts. Facts are read only here and by store/estate.ts.
 */

export interface NewReading {
  inventory_id: string;
  host: string;
  run_id: string | null;
  gathered_at: Date;
  size_bytes: number;
  /** The document's text as stored (kept readings only), and its digest. */
  facts?: unknown;
  digest?: string;
  skipped?: string;
}

/** A reading without its facts: what lists show. */
export interface ReadingSummary {
  id: string;
  inventory_id: string;
  host: string;
  run_id: string | null;
  gathered_at: Date;
  size_bytes: number;
  skipped: string | null;
}

export interface Reading extends ReadingSummary {
  facts: Record<string, unknown> | null;
}

/** Whom a read is for: undefined reads every reading (an admin), else those whose run the account may read. */
export function readingReadable(db: Db, readerId: string | undefined, runAlias: string) {
  if (readerId === undefined) return db`true`;
  // A reading whose run is gone (retention) names no run, and is not withheld (spec part A 2.13).
  // coalesce: a run of no template compares its NULL template_id, which would leave the condition NULL.
  return db`coalesce(${db(`${runAlias}.id`)} IS NULL OR ${runReadableBy(db, readerId, runAlias)}, false)`;
}

/** Stores readings, kept and skipped, and remembers their hosts. */
export async function insertReadings(db: Db, readings: NewReading[]): Promise<void> {
  if (readings.length === 0) return;
  const rows = readings.map((r) => ({
    inventory_id: r.inventory_id,
    host: r.host,
    run_id: r.run_id,
    gathered_at: r.gathered_at,
    size_bytes: r.size_bytes,
    digest: r.digest ?? null,
    facts: r.facts === undefined ? null : db.json(r.facts as never),
    skipped: r.skipped ?? null,
  }));
  await db`INSERT INTO fact_readings ${db(rows)}`;
  const hosts = [...new Set(readings.filter((r) => r.skipped === undefined).map((r) => r.host))];
  if (hosts.length) await db`INSERT INTO fact_hosts ${db(hosts.map((host) => ({ host })))} ON CONFLICT DO NOTHING`;
}

/**
 * The newest kept reading of each of an inventory's hosts gathered at or after `since` (null: any
 * age), as the text a run is supplied: host -> facts JSON.
 */
export async function cachedFactTexts(db: Db, inventoryId: string, since: Date | null): Promise<Record<string, string>> {
  const rows = await db<{ host: string; text: string }[]>`
    SELECT DISTINCT ON (host) host, facts::text AS text
    FROM fact_readings
    WHERE inventory_id = ${inventoryId} AND facts IS NOT NULL ${since ? db`AND gathered_at >= ${since}` : db``}
    ORDER BY host, gathered_at DESC, id DESC`;
  return Object.fromEntries(rows.map((r) => [r.host, r.text]));
}

const SUMMARY = (db: Db, alias: string) =>
  db`${db(`${alias}.id`)}::text AS id, ${db(`${alias}.inventory_id`)}, ${db(`${alias}.host`)}, ${db(`${alias}.run_id`)}, ${db(`${alias}.gathered_at`)}, ${db(`${alias}.size_bytes`)}, ${db(`${alias}.skipped`)}`;

/**
 * An inventory's hosts with cached facts: per host its newest reading (kept or skipped), host
 * order, with the count of those a reader may not read (left out).
 */
export async function listInventoryReadings(db: Db, inventoryId: string, readerId?: string): Promise<{ rows: ReadingSummary[]; withheld: number }> {
  const rows = await db<(ReadingSummary & { readable: boolean })[]>`
    SELECT ${SUMMARY(db, 'f')}, ${readingReadable(db, readerId, 'r')} AS readable
    FROM (SELECT DISTINCT ON (host) * FROM fact_readings WHERE inventory_id = ${inventoryId} ORDER BY host, gathered_at DESC, id DESC) f
    LEFT JOIN runs r ON r.id = f.run_id
    ORDER BY f.host`;
  return { rows: rows.filter((r) => r.readable).map(({ readable: _r, ...row }) => row), withheld: rows.filter((r) => !r.readable).length };
}

/** One host's newest kept reading: of one inventory, or of any; with whether the reader may read its run. */
export async function newestReading(db: Db, host: string, inventoryId: string | null, readerId?: string): Promise<(Reading & { readable: boolean }) | undefined> {
  const [row] = await db<(Reading & { readable: boolean })[]>`
    SELECT ${SUMMARY(db, 'f')}, f.facts, ${readingReadable(db, readerId, 'r')} AS readable
    FROM (SELECT * FROM fact_readings
          WHERE host = ${host} AND facts IS NOT NULL ${inventoryId ? db`AND inventory_id = ${inventoryId}` : db``}
          ORDER BY gathered_at DESC, id DESC LIMIT 1) f
    LEFT JOIN runs r ON r.id = f.run_id`;
  return row;
}

/** Deletes an inventory's readings, of one host or of all; returns how many. */
export async function deleteReadings(db: Db, inventoryId: string, host?: string): Promise<number> {
  const rows = await db`DELETE FROM fact_readings WHERE inventory_id = ${inventoryId} ${host !== undefined ? db`AND host = ${host}` : db``} RETURNING id`;
  return rows.length;
}

/** The readings one run stored, without facts (for tests and the run's own accounting). */
export async function listRunReadings(db: Db, runId: string): Promise<ReadingSummary[]> {
  return db<ReadingSummary[]>`SELECT ${SUMMARY(db, 'f')} FROM fact_readings f WHERE f.run_id = ${runId} ORDER BY f.host`;
}

/** A template's fact cache setting (spec part A 2.3), written beside its other fields. */
export async function setTemplateFactCache(db: Db, templateId: string, setting: { use_fact_cache: boolean; fact_cache_timeout: number }): Promise<void> {
  await db`UPDATE templates SET use_fact_cache = ${setting.use_fact_cache}, fact_cache_timeout = ${setting.fact_cache_timeout} WHERE id = ${templateId}`;
}

/** A template's fact cache setting as it is now; undefined when the template is gone. */
export async function templateFactCache(
  db: Db,
  templateId: string,
): Promise<{ use_fact_cache: boolean; fact_cache_timeout: number; inventory_id: string | null; tool: string | null; kind: string } | undefined> {
  const [row] = await db<{ use_fact_cache: boolean; fact_cache_timeout: number; inventory_id: string | null; tool: string | null; kind: string }[]>`
    SELECT use_fact_cache, fact_cache_timeout, inventory_id, tool, kind FROM templates WHERE id = ${templateId}`;
  return row;
}
