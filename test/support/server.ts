import { randomBytes } from 'node:crypto';
import { loadConfig, type Config } from '../../core/config';
import type { Logger } from 'pino';
import { createLogger, startServer, type RunningServer, type ServerHarness } from '../../cli/serve';
import { createTestDatabase } from './database';
import { apiClient, type ApiClient } from './http';
import { tempDir } from './temp';
import { removeWorkflowPromiseHooks } from './workflow-hooks';

export interface TestServer {
  server: RunningServer;
  url: string;
  config: Config;
  databaseUrl: string;
  adminToken: string;
  /** A client authenticated as the first-start admin. */
  api: ApiClient;
  /** A client with the given token (or none). */
  as(token: string | null): ApiClient;
  stop(): Promise<void>;
}

export function testTemporalAddress(): string {
  const address = process.env.CAIRN_TEST_TEMPORAL_ADDRESS;
  if (!address) throw new Error('CAIRN_TEST_TEMPORAL_ADDRESS is not set; run the tests through jest (global-setup)');
  return address;
}

/** Settings for a test install: its own database and task queue on the shared servers, an ephemeral port. */
export function testSettings(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    CAIRN_LISTEN: '127.0.0.1:0',
    CAIRN_DATA_DIR: tempDir('cairn-test-data'),
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: testTemporalAddress(),
    CAIRN_POOL_QUEUE: `cairn-test-${randomBytes(6).toString('hex')}`,
    CAIRN_LOG_LEVEL: process.env.CAIRN_TEST_LOG_LEVEL ?? 'silent',
    ...extra,
  };
}

/**
 * `cairn serve` started in this process, as every in-process test starts it: as in production but
 * with workflow code on the main thread, as the SDK's replayer runs it (ServerHarness
 * .workflowsOnMainThread), since its three worker threads would cost each start two CPU-seconds.
 * The threaded path is what every test that spawns `cairn serve` or `cairn worker` runs.
 */
export async function startServerInProcess(config: Config, logger: Logger = createLogger(config), harness: ServerHarness = {}): Promise<RunningServer> {
  try {
    return await startServer(config, logger, { workflowsOnMainThread: true, ...harness });
  } finally {
    removeWorkflowPromiseHooks();
  }
}

/**
 * A real Cairn server in this process: real HTTP, real Temporal, real PostgreSQL, real tool
 * processes. `harness` arms faults or trusts a test license key, which only this in-process
 * start can do.
 */
export async function startTestServer(extra: Record<string, string> = {}, harness: ServerHarness = {}): Promise<TestServer> {
  const database = await createTestDatabase();
  const config = loadConfig({}, testSettings(database.url, extra));
  const server = await startServerInProcess(config, createLogger(config), harness);
  if (!server.adminToken) throw new Error('a fresh test install should mint an admin token');
  const adminToken = server.adminToken;
  return {
    server,
    url: server.url,
    config,
    databaseUrl: database.url,
    adminToken,
    api: apiClient(server.url, adminToken),
    as: (token) => apiClient(server.url, token ?? undefined),
    async stop() {
      await server.stop();
      await database.drop();
    },
  };
}

/** Polls a run until it has ended; fails the test if it has not within the time given. */
export async function waitForRunEnd(api: ApiClient, runId: string, timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await api.get(`/v1/runs/${runId}`);
    if (body?.finished_at) return body;
    if (Date.now() > deadline) throw new Error(`run ${runId} did not end within ${timeoutMs} ms; last seen ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Polls until the predicate holds for the run. */
export async function waitForRun(api: ApiClient, runId: string, predicate: (run: any) => boolean, timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await api.get(`/v1/runs/${runId}`);
    if (predicate(body)) return body;
    if (Date.now() > deadline) throw new Error(`run ${runId} did not reach the expected state; last seen ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
