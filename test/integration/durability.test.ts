import { loadConfig } from '../../core/config';
import { waitFor } from '../../embedded/state';
import { createTestDatabase } from '../support/database';
import { apiClient } from '../support/http';
import { isChildOfThisProcess, processesMatching, startCairn, startTsScript } from '../support/processes';
import { Faults } from '../../services/context';
import { startServerInProcess, startTestServer, testSettings, waitForRun, waitForRunEnd } from '../support/server';
import { tempDir } from '../support/temp';

test('kill -9 of the server while a run sleeps: a new server on the same data ends the run exactly once', async () => {
  const database = await createTestDatabase();
  // The first attempt sleeps long; a requeued attempt finishes at once.
  const command = 'echo start; if [ "$CAIRN_RUN_ATTEMPT" = 1 ]; then sleep 120.5; fi; echo end';
  const env = { ...process.env, ...testSettings(database.url, { CAIRN_LEASE_SECONDS: '3', CAIRN_LOG_LEVEL: 'warn' }) };
  const first = startCairn(['serve'], env);
  let second: ReturnType<typeof startCairn> | undefined;
  try {
    const [, token] = await first.waitFor(/admin token: (\S+)/);
    const [, url] = await first.waitFor(/serving at (\S+)/);
    const api = apiClient(url, token);
    const { body: run } = await api.post('/v1/runs', { tool: 'bash', command });
    await waitForRun(api, run.id, (r) => r.status === 'running' && r.log_bytes > 0);

    first.child.kill('SIGKILL');
    await first.exited;
    // The server's tool launcher sees it gone and stops the tool rather than leave it running.
    await waitFor('the orphaned tool to stop', async () => processesMatching('sleep 12[0][.]5').length === 0, 10_000);

    second = startCairn(['serve'], env);
    const [, url2] = await second.waitFor(/serving at (\S+)/);
    expect(second.output()).not.toMatch(/admin token:/);
    const api2 = apiClient(url2, token);
    const ended = await waitForRunEnd(api2, run.id, 60_000);
    expect(ended.status).toBe('succeeded');
    expect(ended.attempts).toBe(2);

    const log = (await api2.get(`/v1/runs/${run.id}/logs`)).text;
    expect(log).toMatch(/^start\n\n\[cairn\] the worker running this run was lost; running it again \(attempt 2\)\nstart\nend\n$/);
    const { body } = await api2.get(`/v1/runs/${run.id}/events?limit=1000`);
    const kinds = body.events.map((e: any) => e.event);
    expect(kinds.filter((k: string) => k === 'run.finished')).toHaveLength(1);
    expect(kinds.filter((k: string) => k === 'run.started')).toHaveLength(1);
    expect(kinds).toContain('run.requeued');
  } finally {
    await first.stop('SIGKILL');
    await second?.stop();
    await database.drop();
  }
});

test('a killed tool launcher takes its sandboxed tool with it, and the run is requeued', async () => {
  const t = await startTestServer({ CAIRN_LEASE_SECONDS: '3' });
  try {
    const command = 'echo start; if [ "$CAIRN_RUN_ATTEMPT" = 1 ]; then sleep 121.5; fi; echo end';
    const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command });
    await waitForRun(t.api, run.id, (r) => r.status === 'running' && r.log_bytes > 0);
    // One lease renewal has carried the tool's pid to Temporal (heartbeats go out every second).
    const execution = t.server.context.temporal.workflow.getHandle(run.id);
    await waitFor('a heartbeat of the run\'s execution', async () => (await execution.describe()).raw.pendingActivities?.some((a) => a.lastHeartbeatTime) ?? false, 10_000);
    const launcher = processesMatching('launcher-process').find(isChildOfThisProcess);
    expect(launcher).toBeDefined();
    process.kill(Number(launcher), 'SIGKILL');
    // The sandbox dies with the process that started it: no tool is left running unsupervised.
    await waitFor('the sandboxed tool to stop', async () => processesMatching('sleep 12[1][.]5').length === 0, 10_000);
    const ended = await waitForRunEnd(t.api, run.id, 30_000);
    expect(ended).toMatchObject({ status: 'succeeded', attempts: 2 });
    expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toMatch(/^start\n\n\[cairn\] the worker running this run was lost; running it again \(attempt 2\)\nstart\nend\n$/);
  } finally {
    await t.stop();
  }
});

test('a run whose tool launcher keeps dying is requeued every time, past five attempts, until it completes', async () => {
  const t = await startTestServer({ CAIRN_LEASE_SECONDS: '3' });
  const LOSSES = 6;
  try {
    // Every attempt up to the sixth waits to be lost; the seventh finishes.
    const command = `echo "attempt $CAIRN_RUN_ATTEMPT"; if [ "$CAIRN_RUN_ATTEMPT" -le ${LOSSES} ]; then sleep 122.5; fi; echo end`;
    const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command });
    for (let attempt = 1; attempt <= LOSSES; attempt++) {
      await waitForRun(t.api, run.id, (r) => r.status === 'running' && r.attempts === attempt, 60_000);
      await waitFor(`attempt ${attempt}'s tool`, async () => processesMatching('sleep 12[2][.]5').length > 0, 10_000);
      const launcher = processesMatching('launcher-process').find(isChildOfThisProcess);
      expect(launcher).toBeDefined();
      process.kill(Number(launcher), 'SIGKILL');
      await waitFor(`attempt ${attempt}'s tool to stop`, async () => processesMatching('sleep 12[2][.]5').length === 0, 10_000);
    }
    const ended = await waitForRunEnd(t.api, run.id, 120_000);
    expect(ended).toMatchObject({ status: 'succeeded', attempts: LOSSES + 1, error: null });
    const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
    expect(log).toContain(`attempt ${LOSSES + 1}\nend\n`);
    const { body } = await t.api.get(`/v1/runs/${run.id}/events?limit=1000`);
    expect(body.events.filter((e: any) => e.event === 'run.requeued').map((e: any) => e.attempt)).toEqual([2, 3, 4, 5, 6, 7]);
  } finally {
    await t.stop();
  }
}, 240_000);

test('a submission whose workflow start failed is started by the sweeper', async () => {
  // The sweeper looks every 250 ms rather than every 2 s: it steps in once the grace of a fresh submission is over.
  const t = await startTestServer({}, { faults: new Faults(['workflow-start-once']), sweepIntervalMs: 250 });
  try {
    const submitted = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo swept' });
    expect(submitted.status).toBe(201);
    expect(submitted.body.status).toBe('pending');
    const ended = await waitForRunEnd(t.api, submitted.body.id, 30_000);
    expect(ended.status).toBe('succeeded');
    expect((await t.api.get(`/v1/runs/${submitted.body.id}/logs`)).text).toBe('swept\n');
    const second = await t.api.post('/v1/runs', { tool: 'bash', command: 'true' });
    expect((await waitForRunEnd(t.api, second.body.id, 5_000)).status).toBe('succeeded');
  } finally {
    await t.stop();
  }
});

test('readyz answers 503 while PostgreSQL is stopped and 200 again once it is back', async () => {
  const dir = tempDir('cairn-readyz-pg');
  let pg = startTsScript('test/support/postgres-process.ts', [dir]);
  const [, url] = await pg.waitFor(/postgres url: (\S+)/, 120_000);
  const config = loadConfig({}, testSettings(url));
  const server = await startServerInProcess(config);
  const api = apiClient(server.url, server.adminToken);
  try {
    expect((await api.get('/readyz')).status).toBe(200);
    await pg.stop('SIGTERM');
    const down = await api.get('/readyz');
    expect(down.status).toBe(503);
    expect(down.body.error).toMatch(/store does not answer/);
    expect((await api.get('/healthz')).status).toBe(200);

    pg = startTsScript('test/support/postgres-process.ts', [dir]);
    const [, urlAgain] = await pg.waitFor(/postgres url: (\S+)/, 120_000);
    expect(urlAgain).toBe(url); // the same remembered port
    const deadline = Date.now() + 20_000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      status = (await api.get('/readyz')).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(200);
    const { body: run } = await api.post('/v1/runs', { tool: 'bash', command: 'echo back' });
    expect((await waitForRunEnd(api, run.id)).status).toBe('succeeded');
  } finally {
    await server.stop();
    await pg.stop('SIGTERM');
  }
});
