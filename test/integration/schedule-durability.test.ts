import { createLogger } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { Faults } from '../../services/context';
import { connectDatabase, type Sql } from '../../store/db';
import { createTestDatabase, schemaBefore } from '../support/database';
import { apiClient } from '../support/http';
import { startCairn } from '../support/processes';
import { soonRule, waitUntil } from '../support/schedules';
import { startServerInProcess, testSettings } from '../support/server';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A schedule's runs with the time each fire was for (from its Idempotency-Key), oldest first. */
async function firesOf(sql: Sql, scheduleId: string): Promise<{ id: string; fireAt: Date; createdAt: Date; finishedAt: Date | null }[]> {
  const rows = await sql<{ id: string; idempotency_key: string; created_at: Date; finished_at: Date | null }[]>`
    SELECT id, idempotency_key, created_at, finished_at FROM runs
    WHERE source_kind = 'schedule' AND source_id = ${scheduleId} AND parent_run_id IS NULL ORDER BY id`;
  return rows.map((row) => ({ id: row.id, fireAt: new Date(row.idempotency_key.split('/')[2]), createdAt: row.created_at, finishedAt: row.finished_at }));
}

test('kill -9 of serve across fire times: the fire it slept towards is made once when a server is back, then no burst', async () => {
  const database = await createTestDatabase();
  const sql = connectDatabase(database.url, { max: 1 });
  // The first server runs in Berlin time: a schedule naming no zone is written with that zone's name.
  const env = { ...process.env, ...testSettings(database.url, { CAIRN_LOG_LEVEL: 'warn' }), TZ: 'Europe/Berlin' };
  const first = startCairn(['serve'], env);
  let second: ReturnType<typeof startCairn> | undefined;
  try {
    const [, token] = await first.waitFor(/admin token: (\S+)/);
    const [, url] = await first.waitFor(/serving at (\S+)/);
    const api = apiClient(url, token);
    expect((await api.post('/v1/schedules', { name: 'zone of the server', cron: '0 9 * * *', run: { tool: 'bash', command: 'true' } })).body.timezone).toBe(
      'Europe/Berlin',
    );

    const { rrule, start } = soonRule('FREQ=SECONDLY;INTERVAL=2', 6);
    const created = await api.post('/v1/schedules', { name: 'through a crash', rrule, run: { tool: 'bash', command: 'echo fired' } });
    expect(created.status).toBe(201);
    const id = created.body.id;
    await waitUntil('the first fire to be planned', async () => (await api.get(`/v1/schedules/${id}`)).body.next_fire_at === start.toISOString());

    // Killed before the first fire; no server while that fire and the next three come due.
    await sleep(start.getTime() - Date.now() - 2000);
    first.child.kill('SIGKILL');
    await first.exited;
    await sleep(start.getTime() + 7000 - Date.now());
    expect(await firesOf(sql, id)).toEqual([]);

    const restartedAt = new Date();
    second = startCairn(['serve'], env);
    const [, url2] = await second.waitFor(/serving at (\S+)/);
    const api2 = apiClient(url2, token);
    const [late] = await waitUntil('the late fire', async () => {
      const fires = await firesOf(sql, id);
      return fires.length >= 1 && fires;
    });
    // The occurrence the schedule slept towards, made once, late.
    expect(late.fireAt.toISOString()).toBe(start.toISOString());
    expect(late.createdAt.getTime()).toBeGreaterThan(restartedAt.getTime());

    await waitUntil('two more fires', async () => (await firesOf(sql, id)).length >= 3);
    await api2.request('PUT', `/v1/schedules/${id}`, { body: { ...created.body, enabled: false } });
    const fires = await firesOf(sql, id);
    // Each occurrence at most once, and none of those missed while no server ran: after the late
    // fire, the next is on time, after the restart.
    expect(new Set(fires.map((f) => f.fireAt.toISOString())).size).toBe(fires.length);
    expect(fires[1].fireAt.getTime()).toBeGreaterThan(restartedAt.getTime());
    for (const fire of fires.slice(1)) expect(fire.createdAt.getTime() - fire.fireAt.getTime()).toBeLessThan(2500);
  } finally {
    await first.stop('SIGKILL');
    await second?.stop();
    await sql.end();
    await database.drop();
  }
});

test('two servers on one database: a hand-off both sweepers race to repair still fires each occurrence once', async () => {
  const database = await createTestDatabase();
  const sql = connectDatabase(database.url, { max: 1 });
  const settings = testSettings(database.url);
  const config = loadConfig({}, settings);
  // Both sweep every 250 ms rather than every 2 s: the repair comes soon after the save's grace,
  // well before the first fire, and the two sweepers race for it more often.
  const a = await startServerInProcess(config, createLogger(config), { faults: new Faults(['schedule-handoff-once']), sweepIntervalMs: 250 });
  const b = await startServerInProcess(loadConfig({}, { ...settings, CAIRN_DATA_DIR: `${settings.CAIRN_DATA_DIR}-b` }), createLogger(config), { sweepIntervalMs: 250 });
  try {
    const api = apiClient(a.url, a.adminToken!);
    const { rrule, start } = soonRule('FREQ=SECONDLY;INTERVAL=3;COUNT=3', 6);
    const created = await api.post('/v1/schedules', { name: 'two servers', rrule, run: { tool: 'bash', command: 'echo fired' } });
    expect(created.status).toBe(201);
    // COUNT=3: once the schedule's workflow has ended, no fire can come any more.
    const workflow = a.context.temporal.workflow.getHandle(created.body.id);
    await waitUntil('the schedule’s workflow to end', async () => (await workflow.describe().catch(() => undefined))?.status.name === 'COMPLETED');
    const fires = await firesOf(sql, created.body.id);
    // Never twice: each occurrence has at most one run.
    expect(new Set(fires.map((f) => f.fireAt.toISOString())).size).toBe(fires.length);
    // Never lost: an occurrence without a run is one the schedule skipped because its run before
    // was still going at that time (on a loaded machine a run can outlast the 3 s between fires).
    const occurrences = [0, 3, 6].map((s) => new Date(start.getTime() + s * 1000));
    expect(fires[0]?.fireAt).toEqual(occurrences[0]);
    for (const at of occurrences.slice(1)) {
      if (fires.some((f) => f.fireAt.getTime() === at.getTime())) continue;
      // fires[0] is the first occurrence, so every later one has a run before it; one not ended yet was going then too.
      const { finishedAt } = fires.filter((f) => f.fireAt < at).at(-1)!;
      expect({ skipped: at.toISOString(), runBeforeStillGoing: finishedAt === null || finishedAt > at }).toEqual({
        skipped: at.toISOString(),
        runBeforeStillGoing: true,
      });
    }
  } finally {
    await b.stop();
    await a.stop();
    await sql.end();
    await database.drop();
  }
});

test('a first fire due before its schedule was handed to its workflow is made once, late, not dropped', async () => {
  const database = await createTestDatabase();
  const sql = connectDatabase(database.url, { max: 1 });
  const config = loadConfig({}, testSettings(database.url));
  // The hand-off after the save fails: the outbox dispatcher makes it after the save's grace,
  // by when the schedule's only time has passed.
  const server = await startServerInProcess(config, createLogger(config), { faults: new Faults(['schedule-handoff-once']), sweepIntervalMs: 250 });
  try {
    const api = apiClient(server.url, server.adminToken!);
    // The first request of a new server is slow on a loaded machine; pay for it before the clock
    // starts, so the only time (2 s ahead, inside the 3 s grace) is still to come when the save is checked.
    expect((await api.get('/v1/schedules')).status).toBe(200);
    const { rrule, start } = soonRule('FREQ=SECONDLY;COUNT=1', 2);
    const created = await api.post('/v1/schedules', { name: 'handed late', rrule, run: { tool: 'bash', command: 'true' } });
    expect(created.status).toBe(201);
    const [fire] = await waitUntil('the late fire', async () => {
      const fires = await firesOf(sql, created.body.id);
      return fires.length > 0 && fires;
    });
    expect(fire.fireAt).toEqual(start);
    const workflow = server.context.temporal.workflow.getHandle(created.body.id);
    await waitUntil('the schedule’s workflow to end', async () => (await workflow.describe().catch(() => undefined))?.status.name === 'COMPLETED');
    expect(await firesOf(sql, created.body.id)).toHaveLength(1);
  } finally {
    await server.stop();
    await sql.end();
    await database.drop();
  }
});

test('a schedule stored without a zone by an earlier release is read in UTC, and the first server writes UTC onto it', async () => {
  const database = await createTestDatabase({ empty: true });
  const sql = connectDatabase(database.url, { max: 1 });
  try {
    // The schema of the release before: the schedule's workflow never handed its revision.
    await schemaBefore(sql, '023');
    await sql`
      INSERT INTO schedules (id, name, cron, timezone, spring_forward, submission, owner_account_id, owner_actor_kind, created_by, updated_by)
      VALUES ('sch_from_an_earlier_release', 'old', '0 9 * * *', NULL, 'jump',
              ${sql.json({ kind: 'run', body: { tool: 'bash', command: 'true' }, request: { tool: 'bash', spec: { command: 'true', extra_vars: {} }, queue: '' } })},
              'usr_nobody', 'user', 'someone', 'someone')`;
    const config = loadConfig({}, testSettings(database.url));
    const server = await startServerInProcess(config, createLogger(config));
    try {
      const api = apiClient(server.url, server.adminToken!);
      expect((await api.get('/v1/schedules/sch_from_an_earlier_release')).body.timezone).toBe('UTC');
      await waitUntil('UTC written onto the row', async () => (await sql`SELECT timezone FROM schedules WHERE timezone = 'UTC'`).length === 1, 10_000);
      // Its hand-off, owed by the upgrade (schema/023_outbox.sql), starts its workflow, which plans in UTC.
      const planned = await waitUntil('the next fire', async () => (await api.get('/v1/schedules/sch_from_an_earlier_release')).body.next_fire_at, 10_000);
      expect(planned).toMatch(/T09:00:00.000Z$/);
    } finally {
      await server.stop();
    }
  } finally {
    await sql.end();
    await database.drop();
  }
});
