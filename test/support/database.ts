import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';

/** The shared test PostgreSQL, as set up by global-setup. */
export function testDatabaseServerUrl(): string {
  const url = process.env.CAIRN_TEST_DATABASE_URL;
  if (!url) throw new Error('CAIRN_TEST_DATABASE_URL is not set; run the tests through jest (global-setup)');
  return url;
}

/** A fresh, empty database on the shared server; drop() removes it with every connection to it. */
export async function createTestDatabase(): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const serverUrl = testDatabaseServerUrl();
  const name = `cairn_test_${randomBytes(6).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
      await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await sql.end();
    },
  };
}

/** Applies the migrations numbered before `version`, recorded as applied: the schema of an install made before it. */
export async function schemaBefore(sql: postgres.Sql, version: string): Promise<void> {
  const dir = path.resolve(__dirname, '../../schema');
  await sql`CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`;
  for (const file of (await fs.readdir(dir)).filter((f) => /^\d+_.*\.sql$/.test(f) && f < version).sort()) {
    await sql.unsafe(await fs.readFile(path.join(dir, file), 'utf8'));
    await sql`INSERT INTO schema_migrations (version) VALUES (${file})`;
  }
}
