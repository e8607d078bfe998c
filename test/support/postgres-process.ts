// A standalone embedded PostgreSQL for tests, in its own process so a test can stop and restart it.
// Usage: node bin/run-ts.js test/support/postgres-process.ts <data-dir>
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../../embedded/postgres';

/**
 * A test cluster is thrown away with its run, so it need not survive a crash of the machine:
 * without fsync and full-page writes its commits cost no disk flush. A killed postmaster still
 * loses nothing it committed (the written pages are in the kernel's cache), so tests of a
 * PostgreSQL outage behave as on a durable one.
 */
const THROWAWAY_SETTINGS = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' };

async function main() {
  const dataDir = process.argv[3] ?? process.argv[2];
  const pg = await startEmbeddedPostgres(dataDir, (line) => process.stderr.write(`${line}\n`));
  // All three take effect on a reload; ALTER SYSTEM keeps them for a restart of the cluster.
  const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
  try {
    for (const [name, value] of Object.entries(THROWAWAY_SETTINGS)) await sql.unsafe(`ALTER SYSTEM SET ${name} = ${value}`);
    await sql`SELECT pg_reload_conf()`;
  } finally {
    await sql.end();
  }
  process.stdout.write(`postgres url: ${pg.url}\n`);
  const stop = () => pg.stop().then(() => process.exit(0), () => process.exit(1));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  // The cluster runs on its own; this process lives until it is told to stop it.
  setInterval(() => undefined, 1 << 30);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
