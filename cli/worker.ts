import { createMetrics } from '../services/metrics';
import { installTemporalLogging } from '../workers/runtime';
import { migrate } from '../store/migrate';
import { startPoolWorker } from '../workers/pool';
import { ConfigError, loadConfig, parseFlags } from '../core/config';
import { buildSealer, createLogger, openDatabase, serverSecretsOf } from './serve';
import { connectTemporal } from './temporal-connection';

/**
 * `cairn worker`: more execution capacity for the default pool, on another machine or process,
 * against the same PostgreSQL and Temporal as `serve`. Named queues are Team tier.
 */
export async function runWorkerCommand(args: string[]): Promise<void> {
  const { values, rest } = parseFlags(args);
  if (rest.includes('--queue')) throw new ConfigError('named worker queues are a Team tier feature and this install has no Team license');
  if (rest.length) throw new ConfigError(`unknown argument ${rest[0]}`);
  const config = loadConfig(values);
  if (!config.databaseUrl || !config.temporalAddress) {
    throw new ConfigError('a worker joins an existing install: set --database-url and --temporal-address');
  }
  const logger = createLogger(config);
  // A worker opens the secrets sealed to the runs it executes, so it needs the install's key and salt.
  const sealer = buildSealer(config);
  const database = await openDatabase(config, logger);
  await migrate(database.sql);
  installTemporalLogging(logger);
  const connection = await connectTemporal(config.temporalAddress, logger);
  const worker = await startPoolWorker({
    connection,
    namespace: config.temporalNamespace,
    taskQueue: config.poolQueue,
    poolSize: config.poolSize,
    sql: database.sql,
    logger,
    metrics: createMetrics(database.sql, config.poolSize),
    sealer,
    isolation: config,
    serverSecrets: serverSecretsOf(config, database.url),
  });
  logger.info({ taskQueue: config.poolQueue }, 'worker polling');
  const stop = async () => {
    await worker.stop();
    await connection.close();
    await database.stop();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
