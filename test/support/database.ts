import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { connectDatabase } from '../../store/db';
import { migrate } from '../../store/migrate';

const SCHEMA_DIR = path.resolve(__dirname, '../../schema');

/** The shared test PostgreSQL, as set up by global-setup. */
export function testDatabaseServerUrl(): string {
  const url = process.env.CAIRN_TEST_DATABASE_URL;
  if (!url) throw new Error('CAIRN_TEST_DATABASE_URL is not set; run the tests through jest (global-setup)');
  return url;
}

const databaseUrl = (serverUrl: string, name: string) => {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
};

/**
 * The database every test database is copied from: the schema with every migration applied and
 * recorded, so a test server's start finds nothing to apply. Named by a digest of the migrations
 * and of the code that applies them, so a changed schema makes a new template and checkouts of
 * different revisions sharing one PostgreSQL never use each other's. It is built under a temporary
 * name and renamed into place, so test runs starting together each find a whole one; once built
 * nobody connects to it (PostgreSQL copies a template only while no one is connected to it).
 */
export async function prepareTemplateDatabase(serverUrl: string): Promise<string> {
  const hash = createHash('sha256').update(await fs.readFile(path.resolve(__dirname, '../../store/migrate.ts')));
  for (const file of (await fs.readdir(SCHEMA_DIR)).sort()) hash.update(`${file}\0`).update(await fs.readFile(path.join(SCHEMA_DIR, file))).update('\0');
  const name = `cairn_template_${hash.digest('hex').slice(0, 16)}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    if ((await admin`SELECT 1 FROM pg_database WHERE datname = ${name}`).length) return name;
    const building = `${name}_${randomBytes(4).toString('hex')}`;
    await admin.unsafe(`CREATE DATABASE ${building}`);
    const sql = connectDatabase(databaseUrl(serverUrl, building), { max: 1 });
    try {
      await migrate(sql);
    } finally {
      await sql.end();
    }
    try {
      await admin.unsafe(`ALTER DATABASE ${building} RENAME TO ${name}`);
    } catch (err) {
      // Another test run renamed its copy into place first (42P04: the name exists).
      await admin.unsafe(`DROP DATABASE ${building}`);
      if ((err as { code?: string }).code !== '42P04') throw err;
    }
    return name;
  } finally {
    await admin.end();
  }
}

/** The template global-setup prepared. */
function testTemplateDatabase(): string {
  const name = process.env.CAIRN_TEST_TEMPLATE_DATABASE;
  if (!name) throw new Error('CAIRN_TEST_TEMPLATE_DATABASE is not set; run the tests through jest (global-setup)');
  return name;
}

/**
 * A fresh database on the shared server, copied from the migrated template (or empty, for a test
 * of the migrations themselves); drop() removes it with every connection to it.
 */
export async function createTestDatabase(options: { empty?: boolean } = {}): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const serverUrl = testDatabaseServerUrl();
  const name = `cairn_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(options.empty ? `CREATE DATABASE ${name}` : `CREATE DATABASE ${name} TEMPLATE ${testTemplateDatabase()}`);
  } finally {
    await admin.end();
  }
  return {
    url: databaseUrl(serverUrl, name),
    name,
    async drop() {
      const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
      await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await sql.end();
    },
  };
}

/** Applies the migrations numbered before `version`, recorded as applied, to an empty database: the schema of an install made before it. */
export async function schemaBefore(sql: postgres.Sql, version: string): Promise<void> {
  await sql`CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`;
  for (const file of (await fs.readdir(SCHEMA_DIR)).filter((f) => /^\d+_.*\.sql$/.test(f) && f < version).sort()) {
    await sql.unsafe(await fs.readFile(path.join(SCHEMA_DIR, file), 'utf8'));
    await sql`INSERT INTO schema_migrations (version) VALUES (${file})`;
  }
}

/**
 * Rows of `table` PostgreSQL read while `work` ran: the session's per-transaction counters before
 * and after, in one transaction that is then rolled back (the counters may hold earlier
 * transactions' reads not yet flushed, and are never flushed within one).
 */
export async function rowsReadOf(sql: postgres.Sql, table: string, work: (tx: postgres.Sql) => Promise<unknown>): Promise<number> {
  const rolledBack = new Error('rolled back');
  let read = -1;
  await sql
    .begin(async (tx) => {
      const counted = async () =>
        (await tx<{ n: number }[]>`
          SELECT (pg_stat_get_xact_tuples_returned(${table}::regclass) + pg_stat_get_xact_tuples_fetched(${table}::regclass))::int AS n`)[0].n;
      const before = await counted();
      await work(tx as unknown as postgres.Sql);
      read = (await counted()) - before;
      throw rolledBack;
    })
    .catch((err: unknown) => {
      if (err !== rolledBack) throw err;
    });
  return read;
}
