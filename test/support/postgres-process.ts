// A standalone embedded PostgreSQL for tests, in its own process so a test can stop and restart it.
// Usage: node bin/run-ts.js test/support/postgres-process.ts <data-dir>
import { startEmbeddedPostgres } from '../../embedded/postgres';

async function main() {
  const dataDir = process.argv[3] ?? process.argv[2];
  const pg = await startEmbeddedPostgres(dataDir, (line) => process.stderr.write(`${line}\n`));
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
