import { randomBytes } from 'node:crypto';
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
