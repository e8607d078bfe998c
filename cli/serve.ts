import { ensureSigningKey, federationSealerFault } from '../services/federation/keys';
import { Client } from '@temporalio/client';
import { promises as fs } from 'node:fs';
import type { Server } from 'node:http';
import type Koa from 'koa';
import pino, { type Logger } from 'pino';
import { createApp } from '../api/app';
import { loggableError } from '../core/log-safety';
import { SealConfigError, sealerFromEnvironment, type Sealer } from '../core/credentials/seal';
import { startEmbeddedPostgres } from '../embedded/postgres';
import { startEmbeddedTemporal } from '../embedded/temporal';
import { bootstrapAdmin } from '../services/access/bootstrap';
import { InstallIdentityError, loadInstallIdentity } from '../services/audit/install-identity';
import { loadLicensing } from '../services/access/licensing';
import { BUILT_IN_LICENSE_KEYS } from '../core/access/license';
import { Faults, type ServerContext } from '../services/context';
import { createMetrics } from '../services/metrics';
import { ChannelWakeups } from '../services/channel-wakeups';
import { startSweeper } from '../services/sweeper';
import { startOutboxDispatcher } from '../services/outbox';
import { AiProviderRegistry } from '../core/ai/provider';
import { aiCallBounds, registerBuiltInAiProviders, startAiProvider } from '../services/ai/backends';
import { attentionSettingsOf } from '../services/attention/attention-file';
import { samlIdpCertificate } from '../services/access/saml-certificate';
import { executionFacts } from '../runtime/sandbox-setup';
import { DEFAULT_RETRY_BASE_MS } from '../core/notifications/notification-kinds';
import { startAnchoring } from '../services/audit/audit-anchors';
import { lendMerkleThreads } from '../services/audit/merkle-threads';
import { connectDatabase, waitForSessions, type Sql } from '../store/db';
import { RUN_ACTIVITY_CHANNEL } from '../store/events';
import { RELAY_DISPATCH_CHANNEL } from '../store/relay';
import { liveTokenCount, openCaller } from '../store/tokens';
import { migrate } from '../store/migrate';
import { startPoolWorker } from '../workers/pool';
import { startRelayDispatcher } from '../workers/relay-dispatch';
import { installTemporalRuntime } from '../workers/runtime';
import { ConfigError, type Config } from '../core/config';
import { connectTemporal, ensureNamespace, ensureSearchAttributes } from './temporal-connection';
import { loadExtensions } from './plugins';
import { loadPolicyFile } from '../services/runs/policy-file';

/** How long an idle keep-alive connection stays open: longer than the 60 s idle timeout load balancers commonly use. */
const KEEP_ALIVE_MS = 65_000;

export interface RunningServer {
  url: string;
  temporalAddress: string;
  temporalUiUrl?: string;
  /** Printed once, on the very first start of an install. */
  adminToken?: string;
  context: ServerContext;
  /** The HTTP application it serves (for tests that read its routers). */
  app: Koa;
  /** One sweep now, beside the periodic ones (services/sweeper.ts); resolves when it is done. */
  sweepOnce(): Promise<void>;
  /** Carries out every owed effect due now (services/outbox.ts); resolves when it is done. */
  drainOutbox(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The process's logger (stdout unless given a destination). Every error logged under `err`, by it
 * or a child, is written by loggableError: no value a request sent, PostgreSQL's quotes included.
 */
export function createLogger(config: Pick<Config, 'logLevel'>, destination?: pino.DestinationStream): Logger {
  return pino({ level: config.logLevel, base: { service: 'cairn' }, serializers: { err: loggableError } }, destination);
}

/**
 * The sealer the install's SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT configure, built once
 * per process (its key derivation takes a fraction of a second); undefined when neither is set. A
 * half-set pair or a value not in the accepted form stops the start with one line naming it.
 */
export function buildSealer(config: Pick<Config, 'encryption'>): Sealer | undefined {
  try {
    return sealerFromEnvironment(config.encryption.asEnvironment());
  } catch (err) {
    if (err instanceof SealConfigError) throw new ConfigError(err.message);
    throw err;
  }
}

/**
 * The server's own secrets: the install's encryption key and salt, the database password, the
 * notification accounts' secrets and the OpenID Connect client secret.
 * No tool is given them, and the output masker hides them from every run's log.
 */
export function serverSecretsOf(config: Pick<Config, 'encryption' | 'delivery' | 'oidc'>, databaseUrl: string): string[] {
  let password = '';
  try {
    password = decodeURIComponent(new URL(databaseUrl).password);
  } catch {
    /* a URL without a password */
  }
  return [config.encryption.key, config.encryption.salt, password, ...config.delivery.secrets(), config.oidc?.clientSecret].filter((value): value is string => !!value);
}

/** Where the records live: the configured PostgreSQL, or an embedded one in the data dir. */
export async function openDatabase(config: Config, logger: Logger): Promise<{ sql: Sql; url: string; stop(): Promise<void> }> {
  let embedded: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  let url = config.databaseUrl;
  if (!url) {
    await fs.mkdir(config.dataDir, { recursive: true });
    embedded = await startEmbeddedPostgres(config.dataDir, (line) => logger.info(line));
    url = embedded.url;
  }
  const sql = connectDatabase(url);
  try {
    await waitForSessions(sql);
  } catch (err) {
    await sql.end({ timeout: 5 });
    await embedded?.stop();
    throw err;
  }
  return {
    sql,
    url,
    async stop() {
      await sql.end({ timeout: 5 });
      await embedded?.stop();
    },
  };
}

/**
 * Node's HTTP parser refuses some requests before Koa sees them (raw NUL or non-ASCII bytes in the
 * request line, broken headers); they still get the one JSON error shape.
 */
function answerMalformedRequest(err: Error & { code?: string }, socket: import('node:stream').Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify({ error: 'the request could not be parsed: its request line or headers are malformed' });
  socket.end(
    `HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * What only an in-process test harness passes: faults to arm, and extra keys trusted to sign
 * licenses. The command line has no way to set either, so a production server has no such door.
 */
export interface ServerHarness {
  faults?: Faults;
  licenseKeys?: readonly object[];
  /** The wait before a failed notification delivery's first retry (12 s in production), so a test need not wait minutes. */
  notificationRetryBaseMs?: number;
  /** How often the sweeper runs (every 2 s in production), so a test waiting on a sweep need not wait seconds. */
  sweepIntervalMs?: number;
  /** Workflow code on the main thread rather than in worker threads (workers/pool.ts): a test server's repeat start takes about a third of the CPU. */
  workflowsOnMainThread?: boolean;
}

/** `cairn serve`: the API and the pool worker, with embedded PostgreSQL and Temporal when none is configured. */
/**
 * An install running open (spec part B 5.1): only when chosen at start and only while it holds no
 * token at all. With tokens, --open stops the start; open, the log says so loudly.
 */
async function announceOpen(sql: Sql, config: Config, logger: Logger): Promise<void> {
  const live = await liveTokenCount(sql);
  if (live > 0) {
    throw new ConfigError(
      `--open (CAIRN_OPEN): this install holds ${live} live token${live === 1 ? '' : 's'}; an install runs open only with no tokens at all. Start without --open and use a token.`,
    );
  }
  const caller = await openCaller(sql);
  if (!caller) throw new ConfigError('--open (CAIRN_OPEN): the install has no enabled admin account for open requests to act as');
  logger.warn(
    { open: true, acts_as: caller.account.username, listen: config.listen },
    `THIS INSTALL IS OPEN: every /v1 request without a token acts as the admin ${caller.account.username}; anyone who can reach ${config.listen} controls it. The first token minted ends it; start without --open to require tokens.`,
  );
}

export async function startServer(config: Config, logger: Logger = createLogger(config), harness: ServerHarness = {}): Promise<RunningServer> {
  const stack: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stack.reverse()) await stop().catch((err) => logger.warn({ err: (err as Error).message }, 'shutdown step failed'));
  };
  try {
    // Whole-chain verifications and bundles build their Merkle trees on a thread beside the scan.
    lendMerkleThreads();
    const sealer = buildSealer(config);
    // A bad --attention-file stops the start before anything is started.
    const attention = attentionSettingsOf(config);
    // So does a --saml-idp-cert file that cannot be read or holds no certificate.
    if (config.saml) samlIdpCertificate(config.saml);
    // The AI providers: the built-ins now, a plugin's when plugins load; the configured one is built once they have.
    const aiRegistry = new AiProviderRegistry();
    const aiBounds = aiCallBounds(config.ai, config.delivery);
    registerBuiltInAiProviders(aiRegistry, aiBounds);
    const database = await openDatabase(config, logger);
    stack.push(database.stop);
    const { sql } = database;
    const applied = await migrate(sql);
    if (applied.length) logger.info({ applied }, 'schema migrations applied');
    const adminToken = await bootstrapAdmin(sql, { open: config.open });
    if (config.open) await announceOpen(sql, config, logger);
    const identity = await loadInstallIdentity(sql, sealer).catch((err) => {
      if (err instanceof InstallIdentityError) throw new ConfigError(err.message);
      throw err;
    });
    if (config.federationIssuer) {
      const fault = federationSealerFault(sealer);
      if (fault) throw new ConfigError(fault);
      await ensureSigningKey(sql, sealer!);
      logger.info({ issuer: config.federationIssuer }, 'issuing run identity tokens (--federation-issuer)');
    }
    const licensing = await loadLicensing(config, identity.installId, [...BUILT_IN_LICENSE_KEYS, ...(harness.licenseKeys ?? [])]);
    if (licensing.license) {
      logger.info({ tier: licensing.tier, licensee: licensing.license.licensee, expires_at: licensing.license.expires_at }, 'license loaded');
    }

    // A bad --policy-file stops the start before Temporal; its policies become rows the one gate reads.
    const regoPolicies = await loadPolicyFile(config.policyFile, sql, logger);
    if (regoPolicies) stack.push(() => regoPolicies.stop());

    let temporalAddress = config.temporalAddress;
    let temporalUiUrl: string | undefined;
    if (!temporalAddress) {
      const embedded = await startEmbeddedTemporal(config.dataDir, config.temporalNamespace, (line) => logger.info(line));
      stack.push(embedded.stop);
      temporalAddress = embedded.address;
      temporalUiUrl = embedded.uiUrl;
    }
    // One native (Rust) connection serves both the client and the worker: cheaper per call than
    // the JavaScript gRPC client, and one channel to Temporal per server.
    installTemporalRuntime(logger);
    const connection = await connectTemporal(temporalAddress, logger);
    stack.push(() => connection.close());
    await ensureNamespace(connection, config.temporalNamespace, logger);
    await ensureSearchAttributes(connection, config.temporalNamespace, logger);
    const temporal = new Client({ connection, namespace: config.temporalNamespace });

    // Plugins start before anything serves, and end with the server (after the worker stops).
    const loaded = await loadExtensions(config.pluginsDir, logger, aiRegistry);
    stack.push(loaded.stop);
    // An AI provider that cannot be built, or whose endpoint the egress rule refuses, stops the start.
    const ai = await startAiProvider(config.ai, aiRegistry, aiBounds).catch((err: Error) => {
      throw new ConfigError(err.message);
    });
    if (config.ai) logger.info({ provider: config.ai.provider, model: config.ai.model, endpoint: new URL(config.ai.endpoint).host }, 'advisory AI on (--ai-provider)');

    const metrics = createMetrics(sql, config.poolSize);
    const hub = new ChannelWakeups(sql, RUN_ACTIVITY_CHANNEL, logger);
    await hub.start();
    stack.push(() => hub.stop());
    const context: ServerContext = {
      config,
      sql,
      temporal,
      logger,
      metrics,
      hub,
      faults: harness.faults ?? new Faults(),
      identity,
      licensing,
      sealer,
      attention,
      execution: await executionFacts(config, (line) => logger.info(line)),
      notificationRetryBaseMs: harness.notificationRetryBaseMs ?? DEFAULT_RETRY_BASE_MS,
      extensions: loaded.extensions,
      regoPolicies,
      ai,
    };
    // Pushed before the worker and the sweeper so it stops after them: its last anchor on a
    // graceful stop covers every entry they appended, and the database is still open for it.
    if (config.workerToken) {
      const dispatches = new ChannelWakeups(sql, RELAY_DISPATCH_CHANNEL, logger);
      await dispatches.start();
      stack.push(() => dispatches.stop());
      const relay = startRelayDispatcher(context, { connection, namespace: config.temporalNamespace, logger, dispatches });
      context.relay = relay;
      stack.push(() => relay.stop());
      logger.info('serving the worker relay at /relay/v1 (--worker-token)');
    }
    const anchoring = startAnchoring(context);
    stack.push(() => anchoring.stop());

    const worker = await startPoolWorker({
      connection,
      namespace: config.temporalNamespace,
      poolQueue: config.poolQueue,
      poolSize: config.poolSize,
      leaseSeconds: config.leaseSeconds,
      sql,
      logger,
      metrics,
      sealer,
      isolation: config,
      serverSecrets: serverSecretsOf(config, database.url),
      federationIssuer: config.federationIssuer,
      secretSources: loaded.extensions.secretSources,
      delivery: config.delivery,
      projects: config,
      schedules: context,
      workflowsOnMainThread: harness.workflowsOnMainThread,
    });
    stack.push(() => worker.stop());
    const outbox = await startOutboxDispatcher(context);
    stack.push(() => outbox.stop());
    const sweeper = startSweeper(context, harness.sweepIntervalMs);
    stack.push(() => sweeper.stop());

    const app = createApp(context);
    const http: Server = await new Promise((resolve, reject) => {
      const server = app.listen(config.listenPort, config.listenHost, () => resolve(server));
      server.once('error', reject);
    });
    http.on('clientError', answerMalformedRequest);
    // An idle keep-alive connection is closed by the server only well after any client or proxy
    // would stop reusing it: closed at the moment a client sends on it, the request fails with a
    // reset (Node's default is 5 s, which clients and load balancers cut close to).
    http.keepAliveTimeout = KEEP_ALIVE_MS;
    http.headersTimeout = KEEP_ALIVE_MS + 1000;
    stack.push(
      () =>
        new Promise<void>((resolve) => {
          http.close(() => resolve());
          http.closeAllConnections();
        }),
    );
    const address = http.address();
    const port = typeof address === 'object' && address ? address.port : config.listenPort;
    return {
      url: `http://${config.listenHost}:${port}`,
      temporalAddress,
      temporalUiUrl,
      adminToken,
      context,
      app,
      sweepOnce: sweeper.sweepOnce,
      drainOutbox: outbox.drainNow,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
