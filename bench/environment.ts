import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { loadConfig } from '../core/config';
import { createLogger, startServer, type RunningServer } from '../cli/serve';
import { generateSigningKey, signDocument } from '../core/audit/signing';

export interface BenchEnvironment {
  server: RunningServer;
  url: string;
  adminToken: string;
  /** A postgres.js connection of the benchmark's own to the server's database (not the server's pool). */
  sql: postgres.Sql;
  /** Where the database came from, for the report. */
  databaseKind: string;
  /** The database's URL and the settings the server was started with, for a second server process on the install. */
  databaseUrl: string;
  settings: Record<string, string>;
  /** The public key the install's license is signed with, when the install is Team (a worker process trusts it). */
  licenseKey?: object;
}

/** Undo steps, run newest first; each runs even when an earlier one fails. */
export class Teardown {
  private readonly steps: { what: string; run: () => Promise<unknown> }[] = [];
  private done: Promise<void> | undefined;

  push(what: string, run: () => Promise<unknown>): void {
    this.steps.push({ what, run });
  }

  /** Safe to call more than once (the finally block and a signal may both ask). */
  run(): Promise<void> {
    this.done ??= (async () => {
      for (const step of this.steps.reverse()) {
        await step.run().catch((err) => process.stderr.write(`teardown: ${step.what} failed: ${(err as Error).message}\n`));
      }
    })();
    return this.done;
  }
}

/** A fresh database on the given server, dropped (with any connection still on it) at teardown. */
async function freshDatabase(serverUrl: string, teardown: Teardown): Promise<string> {
  const name = `cairn_bench_${randomBytes(6).toString('hex')}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  teardown.push(`dropping database ${name}`, async () => {
    const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
    try {
      await sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await sql.end();
    }
  });
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A Cairn install of its own: a temporary data dir, embedded PostgreSQL (or a fresh database on
 * BENCH_DATABASE_URL), an embedded Temporal dev server and a fresh task queue. Nothing is read
 * from the caller's environment except BENCH_DATABASE_URL, so a configured DATABASE_URL or
 * TEMPORAL_ADDRESS never leaks in.
 */
export async function startBenchEnvironment(teardown: Teardown, options: { workerToken?: string } = {}): Promise<BenchEnvironment> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-bench-'));
  teardown.push(`removing ${dataDir}`, () => fs.rm(dataDir, { recursive: true, force: true }));

  const settings: Record<string, string> = {
    CAIRN_LISTEN: '127.0.0.1:0',
    CAIRN_DATA_DIR: dataDir,
    CAIRN_POOL_QUEUE: `cairn-bench-${randomBytes(6).toString('hex')}`,
    CAIRN_LOG_LEVEL: 'silent',
    // Webhook triggers seal their signing secrets, so the install has an encryption key.
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    // The notification benchmark's receiver listens on loopback, which deliveries refuse by default.
    SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
    // A run may use every core, as the baselines measured beside runs do (the bare ansible play of
    // (n)): the default bound of one core would halve a CPU-bound play on two cores, and the
    // ratio would measure the operator's bound rather than what Cairn adds.
    CAIRN_RUN_CPU: String(os.availableParallelism()),
  };
  const external = process.env.BENCH_DATABASE_URL;
  if (external) settings.DATABASE_URL = await freshDatabase(external, teardown);

  // The relay section: the server serves /relay/v1 and is Team (every worker is), under a license signed by a key of the bench's own.
  let licenseKeys: object[] | undefined;
  if (options.workerToken) {
    const key = await generateSigningKey();
    const license = await signDocument({ licensee: 'Cairn benchmark', tier: 'team', issued_at: new Date(Date.now() - 60_000).toISOString() }, key.privateJwk, key.keyId);
    settings.CAIRN_LICENSE_FILE = path.join(dataDir, 'license.jws');
    await fs.writeFile(settings.CAIRN_LICENSE_FILE, `${license}\n`);
    settings.CAIRN_WORKER_TOKEN = options.workerToken;
    licenseKeys = [key.publicJwk];
  }

  const config = loadConfig({}, settings);
  const server = await startServer(config, createLogger(config), { licenseKeys });
  teardown.push('stopping the server', () => server.stop());
  if (!server.adminToken) throw new Error('a fresh install should have minted an admin token');

  const databaseUrl = settings.DATABASE_URL ?? serverDatabaseUrl(server);
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  // Pushed after the server, so it ends first: a fresh-database drop would otherwise wait on it.
  teardown.push('closing the benchmark connection', () => sql.end({ timeout: 5 }));
  return {
    server,
    url: server.url,
    adminToken: server.adminToken,
    sql,
    databaseKind: external ? 'fresh database on BENCH_DATABASE_URL' : 'embedded PostgreSQL',
    databaseUrl,
    settings,
    licenseKey: licenseKeys?.[0],
  };
}

/** A process of the install's own (`cairn serve`, `cairn worker`), as deployed: its memory and CPU are its alone. */
export interface InstallProcess {
  pid: number;
  stop(): Promise<void>;
}

/** A `cairn serve` of its own, and where it serves. */
export interface ServerProcess extends InstallProcess {
  url: string;
}

/** Where a process of the install's own executes runs: the pool queue it serves and its slots. */
export interface ProcessPlacement {
  /** Default: a queue of its own, so the runs submitted through it execute in it. */
  poolQueue?: string;
  poolSize?: number;
}

/**
 * Starts a second `cairn serve` process on the install's database and Temporal, so what it costs
 * is measured apart from the benchmark's process (which holds the first server and the
 * benchmark's clients). With no placement it has a pool queue of its own.
 */
export async function startServerProcess(env: BenchEnvironment, teardown: Teardown, placement: ProcessPlacement = {}): Promise<ServerProcess> {
  // The compiled JavaScript, as an install runs it (bin/cairn.js runs dist/ when it matches the sources).
  await new Promise<void>((resolve, reject) => {
    const build = spawn(process.execPath, [path.join(__dirname, '..', 'bin', 'build.js')], { stdio: 'ignore' });
    build.once('error', reject);
    build.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bin/build.js exited ${code}`))));
  });
  // CAIRN_BENCH_SERVE_NODE_ARGS: node options for that process alone (`--cpu-prof --cpu-prof-dir=/tmp/p` to see where its time goes).
  const nodeArgs = (process.env.CAIRN_BENCH_SERVE_NODE_ARGS ?? '').split(' ').filter(Boolean);
  // `cairn serve` trusts only Cairn's own license keys, and a bench install's license is signed by
  // the bench's: this process runs as Community (it serves no relay workers; `cairn worker`s need
  // no licensed server).
  const { ready, ...started } = await startInstallProcess(env, teardown, 'cairn serve', [...nodeArgs, path.join(__dirname, '..', 'bin', 'cairn.js'), 'serve'], /serving at (\S+)/, placement, {
    CAIRN_LICENSE_FILE: undefined,
    CAIRN_WORKER_TOKEN: undefined,
  });
  return { ...started, url: ready[1] };
}

/**
 * A `cairn worker` process on the install's database, Temporal and pool queue: the process a
 * deployment adds for execution slots. Every worker is Team tier, and the license of a bench
 * install is signed by a key of the bench's own, so it runs through the harness that trusts one
 * key more (test/support/worker-process.ts), as the scale-out test's workers do.
 */
export async function startWorkerProcess(env: BenchEnvironment, teardown: Teardown, placement: ProcessPlacement): Promise<InstallProcess> {
  if (!env.licenseKey || !env.settings.CAIRN_LICENSE_FILE) throw new Error('a worker process needs the install to be Team (startBenchEnvironment with a worker token)');
  const script = [path.join(__dirname, '..', 'bin', 'run-ts.js'), path.join(__dirname, '..', 'test', 'support', 'worker-process.ts'), JSON.stringify(env.licenseKey)];
  // Its start is known by its `worker polling` log line, so it logs at info.
  const { pid, stop } = await startInstallProcess(env, teardown, 'cairn worker', script, /worker polling/, placement, { CAIRN_LOG_LEVEL: 'info' });
  return { pid, stop };
}

/**
 * The glibc malloc settings the image gives every Cairn process (the Dockerfile's `MALLOC_*`
 * ENV): a server or worker the bench starts is measured as a production install runs it.
 */
export async function imageMallocSettings(): Promise<Record<string, string>> {
  const dockerfile = await fs.readFile(path.join(__dirname, '..', 'Dockerfile'), 'utf8');
  const settings = Object.fromEntries([...dockerfile.matchAll(/^\s*(?:ENV\s+)?(MALLOC_[A-Z_]+)=(\S+?)\s*\\?$/gm)].map((m) => [m[1], m[2]]));
  if (Object.keys(settings).length === 0) throw new Error('the Dockerfile sets no MALLOC_ settings for the bench to run its processes with');
  return settings;
}

async function startInstallProcess(
  env: BenchEnvironment,
  teardown: Teardown,
  what: string,
  args: string[],
  readyLine: RegExp,
  placement: ProcessPlacement,
  /** Settings over the install's; undefined removes one. */
  extraEnv: Record<string, string | undefined> = {},
): Promise<InstallProcess & { ready: RegExpMatchArray }> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-bench-process-'));
  teardown.push(`removing ${dataDir}`, () => fs.rm(dataDir, { recursive: true, force: true }));
  // Nothing of the caller's Cairn, database, Temporal or malloc settings leaks in.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^(CAIRN_|SERVICE_|DATABASE_URL$|TEMPORAL_|NODE_OPTIONS$|MALLOC_)/.test(key)));
  const settings = Object.fromEntries(Object.entries({ ...env.settings, ...extraEnv }).filter(([, value]) => value !== undefined));
  const child = spawn(process.execPath, args, {
    env: {
      ...inherited,
      ...(await imageMallocSettings()),
      ...settings,
      CAIRN_DATA_DIR: dataDir,
      CAIRN_POOL_QUEUE: placement.poolQueue ?? `cairn-bench-serve-${randomBytes(6).toString('hex')}`,
      ...(placement.poolSize !== undefined && { CAIRN_POOL_SIZE: String(placement.poolSize) }),
      DATABASE_URL: env.databaseUrl,
      TEMPORAL_ADDRESS: env.server.temporalAddress,
      TEMPORAL_NAMESPACE: env.server.context.config.temporalNamespace,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(killer);
  };
  teardown.push(`stopping the ${what} process`, stop);
  let output = '';
  // The first line saying it is ready (a server's says where it serves).
  const ready = await new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start within 180 s:\n${output.slice(-2000)}`)), 180_000);
    const look = (chunk: Buffer) => {
      output += chunk.toString();
      const match = readyLine.exec(output);
      if (!match) return;
      clearTimeout(timer);
      child.stdout!.off('data', look);
      child.stderr!.off('data', look);
      resolve(match);
    };
    child.stdout!.on('data', look);
    child.stderr!.on('data', look);
    child.once('exit', (code) => reject(new Error(`${what} exited ${code} at start:\n${output.slice(-2000)}`)));
  });
  // Its output is no longer read: a process that keeps writing must not block on a full pipe.
  child.stdout!.resume();
  child.stderr!.resume();
  return { ready, pid: child.pid!, stop };
}

/**
 * The embedded PostgreSQL's URL, read back from the server's own postgres.js options: the server
 * chose the port and credentials, and `pass` is there at run time though the typings hide it.
 */
function serverDatabaseUrl(server: RunningServer): string {
  const options = server.context.sql.options as unknown as { host: string[]; port: number[]; user: string; pass: string; database: string };
  const url = new URL('postgres://localhost');
  url.hostname = options.host[0];
  url.port = String(options.port[0]);
  url.username = options.user;
  url.password = options.pass;
  url.pathname = `/${options.database}`;
  return url.toString();
}
