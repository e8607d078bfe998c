// `npm run bench`: a throwaway Cairn install, benchmarks each beside a baseline from the same
// run, then a table. Budgets are reported, never enforced: a missed one still exits 0.
import { accessBenchmark } from './access';
import { auditBenchmark, auditServerBenchmark } from './audit';
import { firehoseBenchmark, sseBenchmark } from './firehose';
import { millionBenchmark } from './million';
import { temporalCostBenchmark } from './temporal-cost';
import { sandboxStartBenchmark } from './sandbox-start';
import { startBenchEnvironment, startServerProcess, Teardown, type ServerProcess } from './environment';
import { benchClient, type BenchClient } from './http';
import { latencyBenchmark } from './latency';
import { listBenchmark } from './list';
import { estateBenchmark } from './estate';
import { ansibleIngestBenchmark, hasAnsiblePlaybook } from './ansible-ingest';
import { loadLine, machineLine, renderTable, type Section } from './report';
import { msSince } from './stats';
import { throughputBenchmark } from './throughput';
import { scheduleBenchmark } from './schedules';
import { notificationBenchmark } from './notifications';
import { structuredEventsBenchmark } from './structured-events';
import { webhookBenchmark } from './webhooks';
import { planGateBenchmark } from './iac-plan-gate';
import { relayBenchmark } from './relay';
import { capacityBenchmark, postmasterPid, temporalPid } from './capacity';
import { randomBytes } from 'node:crypto';

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
    // `--only a,b,...` runs just those sections (by the letters below) for a quicker pass.
    const onlyArg = process.argv.find((a) => a.startsWith('--only='));
    const only = onlyArg ? new Set(onlyArg.slice('--only='.length).split(',')) : undefined;
    const wanted = (key: string) => !only || only.has(key);
    // The relay section needs the install to serve /relay/v1, and to be Team (every worker is), as
    // the capacity section's `cairn worker` processes need.
    const workerToken = wanted('q') || wanted('s') ? `cairn-bench-${randomBytes(24).toString('base64url')}` : undefined;
    const starting = startBenchEnvironment(teardown, { workerToken });
    startup = starting;
    const env = await starting;
    const client = benchClient(env.url, env.adminToken);
    teardown.push('closing the HTTP client', async () => client.close());
    log(`ready in ${(msSince(started) / 1000).toFixed(1)} s: ${env.url}, ${env.databaseKind}, pool size ${env.server.context.config.poolSize}`);

    const [admin] = await env.sql<{ accountId: string; tokenId: string }[]>`
      SELECT a.id AS "accountId", t.id AS "tokenId" FROM accounts a JOIN tokens t ON t.account_id = a.id
      WHERE a.role = 'admin' ORDER BY t.created_at LIMIT 1`;

    // The install's Temporal dev server and PostgreSQL, whose CPU the sections that split a run's cost charge apart.
    const installPids = async () => ({ temporalPid: await temporalPid(env), postgresPid: await postmasterPid(env) });

    if (wanted('a')) {
      log('(a) run latency...');
      sections.push(await latencyBenchmark(client));
    }
    if (wanted('b')) {
      log('(b) throughput...');
      sections.push(await throughputBenchmark(client));
    }
    if (wanted('k')) {
      log('(k) cost over Temporal: 500 runs, 50 in flight, beside a bare workflow + activity...');
      const temporal = {
        temporalAddress: env.server.temporalAddress,
        namespace: env.server.context.config.temporalNamespace,
        poolSize: env.server.context.config.poolSize,
        isolation: env.server.context.config,
        ...(await installPids()),
      };
      sections.push(await temporalCostBenchmark(client, env.sql, temporal));
    }
    if (wanted('t')) {
      log("(t) sandbox start: a run's sandbox started and ended 300 times, by run network, beside the launcher starting the tool unsandboxed...");
      sections.push(await sandboxStartBenchmark(env.server.context.config, await installPids()));
    }
    // The log, stream and webhook sections measure a `cairn serve` process of their own, apart from
    // this one (which also runs the benchmark's clients): started once, for the first that needs it.
    let serveProcess: Promise<{ serve: ServerProcess; client: BenchClient }> | undefined;
    const ownServer = () =>
      (serveProcess ??= (async () => {
        log('starting a `cairn serve` process for the log, stream and webhook sections...');
        const serve = await startServerProcess(env, teardown);
        const serveClient = benchClient(serve.url, env.adminToken);
        teardown.push("closing the server process's HTTP client", async () => serveClient.close());
        return { serve, client: serveClient };
      })());
    if (wanted('l')) {
      log('(l) output firehose: 1,000,000 lines from one run...');
      const own = await ownServer();
      sections.push(await firehoseBenchmark(own.client, env.sql, own.serve, admin));
    }
    if (wanted('m')) {
      log('(m) 200 SSE readers on one busy run...');
      const own = await ownServer();
      sections.push(await sseBenchmark(own.client, env.sql, own.serve, admin));
    }
    if (wanted('c')) {
      log('(c) list with 100k runs stored...');
      sections.push(await listBenchmark(client, env.sql));
    }
    if (wanted('d')) {
      log('(d) audit chain of 100k entries, in memory...');
      sections.push(await auditBenchmark());
    }
    if (wanted('j')) {
      log('(j) audit chain of 100k stored entries: verify and receipts, whole and resumed...');
      sections.push(await auditServerBenchmark(client, env.sql));
    }
    if (wanted('e')) {
      log('(e) webhook answer time, 50 deliveries in flight...');
      sections.push(await webhookBenchmark((await ownServer()).client, env.sql));
    }
    if (wanted('f')) {
      log('(f) notification delivery: 1,000 deliveries, throughput with a target, latency...');
      sections.push(await notificationBenchmark(client, env.sql));
    }
    if (wanted('h')) {
      log('(h) template and run lists for an operator holding 1,000 grants through 10 teams, beside the admin...');
      sections.push(await accessBenchmark(env.url, client, env.sql));
    }
    if (wanted('i')) {
      log(`(i) a million runs stored (CAIRN_BENCH_RUNS): first, filtered, deep and searched pages...`);
      sections.push(await millionBenchmark(client, env.sql));
    }
    if (wanted('r')) {
      log('(r) estate and estate diff with 10,000 hosts x 30 fact readings...');
      sections.push(await estateBenchmark(client, env.sql));
    }
    if (wanted('n')) {
      if (hasAnsiblePlaybook()) {
        log('(n) ansible per-host result ingestion: one play over 1,000 local hosts, beside the same play with the callback plugin off...');
        sections.push(await ansibleIngestBenchmark(client, env.sql));
      } else {
        log('(n) ansible per-host result ingestion: skipped, ansible-playbook is not installed on this machine');
      }
    }
    if (wanted('o')) {
      log('(o) structured events: an ansible run\'s 100,000 per-host task results read, parsed and stored...');
      sections.push(await structuredEventsBenchmark(client, env.server.context.sql));
    }
    if (wanted('p')) {
      log('(p) the plan gate on a 1,000-resource opentofu plan, beside tofu show -json...');
      const section = await planGateBenchmark();
      if (section) sections.push(section);
      else log('(p) skipped: no OpenTofu binary here (cairn tools install opentofu)');
    }
    if (wanted('q') && workerToken) {
      log('(q) the relay beside the direct worker: run latency, throughput and log bytes per second through a cairn worker --server process...');
      sections.push(await relayBenchmark(client, env.url, workerToken, env.server.context.config.poolSize, teardown, log));
    }
    if (wanted('s')) {
      log('(s) capacity: CPU per run by component with one server and one worker, and the prediction for two of each beside the measured rate...');
      sections.push(await capacityBenchmark(env, teardown));
    }
    // Last, and the longest (about 10 minutes): in the full pass, with `--only=g`, or with `--schedules` beside other letters.
    if (wanted('g') || process.argv.includes('--schedules')) {
      log('(g) 1,000 schedules firing every minute (about 10 minutes)...');
      const { config } = env.server.context;
      sections.push(await scheduleBenchmark(client, env.sql, { dataDir: config.dataDir, temporalAddress: env.server.temporalAddress, namespace: config.temporalNamespace }));
    }
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
