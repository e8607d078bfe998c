// `npm run bench`: a throwaway Cairn install, three benchmarks each beside a baseline from the same
// run, then a table. Budgets are reported, never enforced: a missed one still exits 0.
import { auditBenchmark } from './audit';
import { startBenchEnvironment, Teardown } from './environment';
import { benchClient } from './http';
import { latencyBenchmark } from './latency';
import { listBenchmark } from './list';
import { loadLine, machineLine, renderTable, type Section } from './report';
import { msSince } from './stats';
import { throughputBenchmark } from './throughput';

const log = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const started = process.hrtime.bigint();
  const teardown = new Teardown();
  let startup: Promise<unknown> = Promise.resolve();
  // Ctrl-C or a kill still stops PostgreSQL and Temporal and removes the data dir; mid-start, it
  // waits for the start to finish so the services it launched are on the teardown list.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\n${signal}: tearing down\n`);
      void startup
        .catch(() => undefined)
        .then(() => teardown.run())
        .finally(() => process.exit(130));
    });
  }

  log(machineLine());
  const sections: Section[] = [];
  try {
    log('starting a fresh Cairn install (embedded Temporal dev server, PostgreSQL, pool worker)...');
    const starting = startBenchEnvironment(teardown);
    startup = starting;
    const env = await starting;
    const client = benchClient(env.url, env.adminToken);
    teardown.push('closing the HTTP client', async () => client.close());
    log(`ready in ${(msSince(started) / 1000).toFixed(1)} s: ${env.url}, ${env.databaseKind}, pool size ${env.server.context.config.poolSize}`);

    log('(a) run latency...');
    sections.push(await latencyBenchmark(client));
    log('(b) throughput...');
    sections.push(await throughputBenchmark(client));
    log('(c) list with 100k runs stored...');
    sections.push(await listBenchmark(client, env.sql));
    log('(d) audit chain of 100k entries, in memory...');
    sections.push(await auditBenchmark());
  } finally {
    await teardown.run();
    // Whatever finished is printed even when a later benchmark failed.
    if (sections.length) {
      log('');
      log(renderTable(sections.flatMap((s) => s.rows)));
      log('');
      for (const note of sections.flatMap((s) => s.notes)) log(note);
    }
    log(`total time ${(msSince(started) / 1000).toFixed(0)} s; ${loadLine()} at the end`);
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`benchmark failed: ${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
