import type { Logger } from 'pino';
import { loadExtensions } from './plugins';
import { featureRefusal, tierAllows, BUILT_IN_LICENSE_KEYS, type Tier } from '../core/access/license';
import { fitsBytes } from '../api/schemas/common';
import { stopOnSignal } from './signals';
import { ConfigError, loadConfig, parseFlags, type Config } from '../core/config';
import { readInstallId } from '../services/audit/install-identity';
import { loadLicensing } from '../services/access/licensing';
import { createMetrics } from '../services/metrics';
import { migrate } from '../store/migrate';
import type { Sql } from '../store/db';
import type { RunningWorker } from '../workers/execution';
import { executionTaskQueue } from '../workflows/ids';
import { startPoolWorker, type PoolWorkerOptions } from '../workers/pool';
import { startQueueWorker } from '../workers/queue';
import { startRelayWorker } from '../workers/relay-worker';
import { installTemporalRuntime } from '../workers/runtime';
import { buildSealer, createLogger, openDatabase, serverSecretsOf, type ServerHarness } from './serve';
import { connectTemporal, ensureSearchAttributes } from './temporal-connection';

/** What only an in-process or test-support start passes: extra keys trusted to sign licenses. */
export type WorkerHarness = Pick<ServerHarness, 'licenseKeys'>;

export interface RunningWorkerProcess {
  /** The worker's row in the `workers` table. */
  id: string;
  /** "" for the default pool. */
  queue: string;
  stop(): Promise<void>;
}

/** `--queue NAME` or `--queue=NAME`, the one flag only `cairn worker` takes; "" when absent. */
function takeQueueFlag(rest: string[]): { queue: string; rest: string[] } {
  const left: string[] = [];
  let queue: string | undefined;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '--queue' || arg.startsWith('--queue=')) {
      const value = arg === '--queue' ? rest[++i] : arg.slice('--queue='.length);
      if (!value) throw new ConfigError('--queue needs a queue name (leave it out to serve the default pool)');
      if (!fitsBytes(255)(value)) throw new ConfigError('--queue: a queue name is at most 255 bytes');
      queue = value;
    } else {
      left.push(arg);
    }
  }
  return { queue: queue ?? '', rest: left };
}

/**
 * The install's tier as a worker sees it: from --license-file, checked against the install id in
 * the database (read without opening the signing key, which a worker has no use for).
 */
async function workerTier(config: Config, sql: Sql, harness: WorkerHarness): Promise<Tier> {
  if (!config.licenseFile) return 'community';
  const installId = await readInstallId(sql);
  if (!installId) throw new ConfigError('this install has no identity yet: start `cairn serve` once before its workers');
  const licensing = await loadLicensing(config, installId, [...BUILT_IN_LICENSE_KEYS, ...(harness.licenseKeys ?? [])]);
  return licensing.tier;
}

/**
 * A worker process's work: executes runs of the default pool, or with a queue only the runs
 * submitted to that named queue, against the same PostgreSQL and Temporal as `serve`. Every
 * worker is Team tier: without a Team license the start stops with one line naming the feature
 * (a named queue, or a worker for the default pool) and the tier.
 */
export async function startWorkerProcess(
  config: Config,
  queue: string,
  logger: Logger = createLogger(config),
  harness: WorkerHarness = {},
): Promise<RunningWorkerProcess> {
  if (!config.databaseUrl || !config.temporalAddress) {
    throw new ConfigError('a worker joins an existing install: set --database-url and --temporal-address');
  }
  // A worker opens the secrets sealed to the runs it executes, so it needs the install's key and salt.
  const sealer = buildSealer(config);
  const database = await openDatabase(config, logger);
  const stack: (() => Promise<void>)[] = [database.stop];
  const stopAll = async () => {
    for (const stop of stack.reverse()) await stop().catch((err) => logger.warn({ err: (err as Error).message }, 'shutdown step failed'));
  };
  try {
    await migrate(database.sql);
    // Every worker is Team (spec part A 1.2), one serving the default pool too; the servers' own
    // pools (`cairn serve`) are Community.
    const tier = await workerTier(config, database.sql, harness);
    const feature = queue ? 'named_queue' : 'worker';
    if (!tierAllows(tier, feature)) throw new ConfigError(featureRefusal(feature, tier));
    const loaded = await loadExtensions(config.pluginsDir, logger);
    stack.push(loaded.stop);
    installTemporalRuntime(logger);
    const connection = await connectTemporal(config.temporalAddress, logger);
    stack.push(() => connection.close());
    // A pool worker may start before any server has (its workflows set Cairn's search attributes).
    await ensureSearchAttributes(connection, config.temporalNamespace, logger);
    const options: PoolWorkerOptions = {
      connection,
      namespace: config.temporalNamespace,
      poolQueue: config.poolQueue,
      poolSize: config.poolSize,
      leaseSeconds: config.leaseSeconds,
      sql: database.sql,
      logger,
      metrics: createMetrics(database.sql, config.poolSize),
      sealer,
      isolation: config,
      serverSecrets: serverSecretsOf(config, database.url),
      federationIssuer: config.federationIssuer,
      secretSources: loaded.extensions.secretSources,
      delivery: config.delivery,
      projects: config,
    };
    const worker: RunningWorker = queue ? await startQueueWorker(options, queue) : await startPoolWorker(options);
    stack.push(() => worker.stop());
    logger.info({ queue, taskQueue: executionTaskQueue(config.poolQueue, queue), workerId: worker.id }, 'worker polling');
    return { id: worker.id, queue, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** Takes `--NAME VALUE` or `--NAME=VALUE` (or, for a switch, a bare `--NAME`) out of the arguments. */
function takeFlag(args: string[], name: string, isSwitch = false): { value: string | undefined; rest: string[] } {
  const rest: string[] = [];
  let value: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === name) {
      value = isSwitch ? 'true' : args[++i];
      if (value === undefined) throw new ConfigError(`${name} needs a value`);
    } else if (arg.startsWith(`${name}=`)) {
      value = arg.slice(name.length + 1);
    } else {
      rest.push(arg);
    }
  }
  return { value, rest };
}

/**
 * Why a relay server URL is refused, or undefined: it must be http(s) without credentials, and
 * plain http only to a loopback host unless the operator says otherwise (--allow-insecure-relay),
 * since the worker token, the capability and a run's secrets travel on it.
 */
export function relayUrlFault(value: string, allowInsecure: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `--server: "${value}" is not a URL (try https://cairn.example.com)`;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return '--server: the relay is reached over https';
  if (url.username || url.password || url.search || url.hash) return '--server: the URL carries no credentials, query or fragment';
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname) || url.hostname.startsWith('127.');
  if (url.protocol === 'http:' && !loopback && !allowInsecure) {
    return '--server: plain http is refused off loopback (the worker token and run secrets travel on it); use https, or --allow-insecure-relay on a network you trust';
  }
  return undefined;
}

/** `cairn worker [--queue NAME]`, or `cairn worker --server URL --worker-token T --queue NAME`: runs until SIGINT or SIGTERM, then stops cleanly. */
export async function runWorkerCommand(args: string[], harness: WorkerHarness = {}): Promise<void> {
  const server = takeFlag(args, '--server');
  const token = takeFlag(server.rest, '--worker-token');
  const insecure = takeFlag(token.rest, '--allow-insecure-relay', true);
  const deliveryKey = takeFlag(insecure.rest, '--delivery-key');
  const { values, rest: unparsed } = parseFlags(deliveryKey.rest);
  const { queue, rest } = takeQueueFlag(unparsed);
  if (rest.length) throw new ConfigError(`unknown argument ${rest[0]}`);
  const serverUrl = server.value ?? process.env.CAIRN_SERVER_URL;
  if (serverUrl) {
    const workerToken = token.value ?? process.env.CAIRN_WORKER_TOKEN;
    if (!workerToken) throw new ConfigError('a relay worker needs --worker-token (CAIRN_WORKER_TOKEN): the token its server was started with');
    if (!queue) throw new ConfigError('a relay worker serves a named queue: add --queue NAME');
    const fault = relayUrlFault(serverUrl, insecure.value === 'true');
    if (fault) throw new ConfigError(fault);
    // The worker's own token is not a server setting here: keep loadConfig from hashing it.
    const config = loadConfig(values, { ...process.env, CAIRN_WORKER_TOKEN: undefined });
    const logger = createLogger(config);
    const worker = await startRelayWorker({ serverUrl, token: workerToken, queue, slots: config.poolSize, isolation: config, logger, deliveryKeyFile: deliveryKey.value });
    stopOnSignal(logger, 'worker shutting down', worker.stop);
    return;
  }
  if (token.value || deliveryKey.value) throw new ConfigError('--worker-token and --delivery-key on a worker go with --server URL (a relay worker)');
  const config = loadConfig(values);
  const logger = createLogger(config);
  const worker = await startWorkerProcess(config, queue, logger, harness);
  stopOnSignal(logger, 'worker shutting down', worker.stop);
}
