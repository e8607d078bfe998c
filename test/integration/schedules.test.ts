import { WorkflowNotFoundError } from '@temporalio/client';
import { DateTime } from 'luxon';
import { randomBytes } from 'node:crypto';
import { connectDatabase, type Sql } from '../../store/db';
import { serverZone } from '../../services/schedules/schedules';
import { countOwedFires } from '../../store/schedules';
import { Faults } from '../../services/context';
import { SCHEDULE_HISTORY_EVENTS } from '../../workflows/definitions';
import { runWorkflowId } from '../../workflows/ids';
import { grant, person, template } from '../support/access';
import type { ApiClient } from '../support/http';
import { soonRule, waitUntil } from '../support/schedules';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
let sql: Sql;

beforeAll(async () => {
  // An issuer and the install key its signing keys are sealed under: a fire's run given an oidc_token credential gets its token.
  t = await startTestServer({
    CAIRN_FEDERATION_ISSUER: 'https://cairn.example.com',
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
  });
  sql = connectDatabase(t.databaseUrl, { max: 2 });
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

/** An rrule whose DTSTART is a few seconds from now (UTC form), with the RRULE parts given. */
const soon = (parts: string, inSeconds = 3) => soonRule(parts, inSeconds).rrule;

async function createSchedule(body: Record<string, unknown>, api: ApiClient = t.api) {
  const res = await api.post('/v1/schedules', body);
  if (res.status !== 201) throw new Error(`schedule create: ${res.status} ${res.text}`);
  return res.body;
}

const put = (id: string, body: unknown, api: ApiClient = t.api) => api.request('PUT', `/v1/schedules/${id}`, { body });
const del = (id: string, api: ApiClient = t.api) => api.request('DELETE', `/v1/schedules/${id}`);

/** The runs a schedule started, oldest first, as the store holds them. */
const runsOf = (scheduleId: string) =>
  sql<{ id: string; status: string; idempotency_key: string; created_at: Date; requested_by: string }[]>`
    SELECT id, status, idempotency_key, created_at, requested_by FROM runs
    WHERE source_kind = 'schedule' AND source_id = ${scheduleId} AND parent_run_id IS NULL ORDER BY id`;

async function tokenFor(role: 'viewer' | 'operator'): Promise<string> {
  const user = await t.api.post('/v1/users', { username: `${role}-${Math.random().toString(36).slice(2, 8)}`, role });
  const token = await t.api.post('/v1/tokens', { name: 'schedules', username: user.body.username });
  return token.body.token;
}

const aRun = { tool: 'bash', command: 'echo fired' };

describe('saving schedules', () => {
  test('create records created_by, writes the server’s zone when none is sent, and defaults spring_forward by rule', async () => {
    const created = await t.api.post('/v1/schedules', { name: 'nightly', cron: '0 2 * * *', run: aRun });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`/v1/schedules/${created.body.id}`);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^sch_/),
      name: 'nightly',
      cron: '0 2 * * *',
      rrule: null,
      timezone: serverZone(),
      spring_forward: 'jump',
      enabled: true,
      template_id: null,
      run: { tool: 'bash', command: 'echo fired', extra_vars: {}, queue: '', dry_run: false },
      created_by: 'admin',
      last_error: null,
    });
    const rrule = await createSchedule({ name: 'by rule', rrule: 'DTSTART;TZID=Asia/Tokyo:20250101T090000 RRULE:FREQ=DAILY', run: aRun });
    expect(rrule).toMatchObject({ timezone: 'Asia/Tokyo', spring_forward: 'later' });
    const { body: read } = await t.api.get(`/v1/schedules/${created.body.id}`);
    // The schedule's workflow may plan its next fire between the create and the read.
    expect({ ...read, next_fire_at: null }).toEqual({ ...created.body, next_fire_at: null });
  });

  test('the workflow plans the next fire, shown as next_fire_at in the schedule’s zone', async () => {
    const schedule = await createSchedule({ name: 'berlin nine', cron: '0 9 * * *', timezone: 'Europe/Berlin', run: aRun });
    const planned = await waitUntil('the next fire to be planned', async () => (await t.api.get(`/v1/schedules/${schedule.id}`)).body.next_fire_at);
    expect(DateTime.fromISO(planned, { zone: 'Europe/Berlin' }).toFormat('HH:mm')).toBe('09:00');
    await del(schedule.id);
  });

  test('list pages by limit and offset, or names ids', async () => {
    const a = await createSchedule({ name: 'page a', cron: '0 3 * * *', run: aRun });
    const b = await createSchedule({ name: 'page b', cron: '0 4 * * *', run: aRun });
    const { body: all } = await t.api.get('/v1/schedules');
    expect(all.total).toBeGreaterThanOrEqual(2);
    const { body: named } = await t.api.get(`/v1/schedules?id=${a.id}&id=${b.id}`);
    expect(named.schedules.map((s: any) => s.id)).toEqual([a.id, b.id]);
    const { body: page } = await t.api.get(`/v1/schedules?limit=1&offset=${all.total - 1}`);
    expect(page).toMatchObject({ count: 1, has_more: false, next_offset: null });
    expect(page.schedules[0].id).toBe(b.id);
    expect((await t.api.get('/v1/schedules?limit=1001')).body).toMatchObject({ field: 'limit' });
  });

  test('viewers preview; only operators and admins write', async () => {
    const viewer = t.as(await tokenFor('viewer'));
    const operator = t.as(await tokenFor('operator'));
    const mine = await createSchedule({ name: 'operator’s', cron: '0 5 * * *', run: aRun }, operator);
    expect(mine.created_by).toMatch(/^operator-/);
    expect((await viewer.get('/v1/schedules/preview?cron=0%209%20*%20*%20*&timezone=UTC')).status).toBe(200);
    const refused = await viewer.post('/v1/schedules', { name: 'nope', cron: '0 5 * * *', run: aRun });
    expect(refused.status).toBe(403);
    expect(refused.body.required_role).toBe('operator');
    expect((await put(mine.id, { name: 'nope', cron: '0 5 * * *', run: aRun }, viewer)).status).toBe(403);
    expect((await del(mine.id, viewer)).status).toBe(403);
    expect((await del(mine.id, operator)).status).toBe(204);
    expect((await t.api.get(`/v1/schedules/${mine.id}`)).status).toBe(404);
  });

  test('a schedule follows its template: its owner, admins and the template’s readers read it; its owner and the template’s managers change it', async () => {
    const owner = await person(t.api, 'operator');
    const other = await person(t.api, 'operator');
    const reader = await person(t.api, 'viewer');
    const [asOwner, asOther, asReader] = [owner, other, reader].map((p) => t.as(p.token));
    const tpl = await template(t.api);
    // Scheduling a template needs the use grant on it, like launching it.
    const unusable = await asOwner.post('/v1/schedules', { name: 'x', cron: '0 5 * * *', template_id: tpl.id });
    expect(unusable).toMatchObject({ status: 400, body: { field: 'template_id' } });
    await grant(t.api, tpl.id, 'use', { user_id: owner.id });
    const onTemplate = await createSchedule({ name: 'on a template', cron: '0 5 * * *', template_id: tpl.id }, asOwner);
    const plain = await createSchedule({ name: 'a run spec', cron: '0 5 * * *', run: aRun }, asOwner);

    // A plain schedule is its owner's; others are told it does not exist, and lists leave it out.
    for (const id of [onTemplate.id, plain.id]) {
      expect((await asOther.get(`/v1/schedules/${id}`)).status).toBe(404);
      expect((await asReader.get(`/v1/schedules/${id}`)).status).toBe(404);
      expect((await put(id, { name: 'taken', cron: '0 6 * * *', run: aRun }, asOther)).status).toBe(404);
      expect((await del(id, asOther)).status).toBe(404);
    }
    expect((await asOther.get('/v1/schedules')).body).toMatchObject({ total: 0, schedules: [] });
    expect((await asOwner.get('/v1/schedules')).body.total).toBe(2);

    // Reading the template reads its schedules, not the plain one; changing them needs manage.
    await grant(t.api, tpl.id, 'read', { user_id: reader.id });
    await grant(t.api, tpl.id, 'use', { user_id: other.id });
    expect((await asReader.get(`/v1/schedules/${onTemplate.id}`)).status).toBe(200);
    expect((await asReader.get('/v1/schedules')).body).toMatchObject({ total: 1, schedules: [{ id: onTemplate.id }] });
    const notManager = await del(onTemplate.id, asOther);
    expect(notManager).toMatchObject({ status: 403, body: { required_grant: 'manage', object: tpl.id } });
    await grant(t.api, tpl.id, 'manage', { user_id: other.id });
    expect((await put(onTemplate.id, { name: 'renamed', cron: '0 6 * * *', template_id: tpl.id }, asOther)).status).toBe(200);
    expect((await del(onTemplate.id, asOther)).status).toBe(204);
    expect((await del(plain.id, asOwner)).status).toBe(204);
  });

  test.each([
    ['both cron and rrule', { cron: '0 9 * * *', rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY' }, 'rrule', /not both/],
    ['neither cron nor rrule', {}, 'cron', /needs cron or rrule/],
    ['a zone that disagrees with timezone', { rrule: 'DTSTART;TZID=Europe/Berlin:20250101T090000 RRULE:FREQ=DAILY', timezone: 'America/New_York' }, 'rrule', /disagrees/],
    ['a rule with no fire left after now', { rrule: 'DTSTART:20200101T090000Z RRULE:FREQ=DAILY;COUNT=3' }, 'rrule', /no fire left after now/],
    ['a cron that never fires', { cron: '0 0 30 2 *' }, 'cron', /no fire left/],
    ['a zone that is not IANA', { cron: '0 9 * * *', timezone: 'Europe/Atlantis' }, 'timezone', /IANA/],
    ['a bad cron', { cron: 'every day' }, 'cron', /cron/],
    ['a bad spring_forward', { cron: '0 9 * * *', spring_forward: 'sideways' }, 'spring_forward', /spring_forward/],
  ])('refused with 400 naming the fault: %s; nothing saved', async (_name, rule, field, message) => {
    const before = (await t.api.get('/v1/schedules')).body.total;
    const res = await t.api.post('/v1/schedules', { name: 'bad', ...rule, run: aRun });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe(field);
    expect(res.body.error).toMatch(message);
    expect((await t.api.get('/v1/schedules')).body.total).toBe(before);
  });

  test.each([
    ['nothing to fire', {}, 'template_id'],
    ['two things to fire', { template_id: 'tpl_x', run: aRun }, 'run'],
    ['a template that does not exist', { template_id: 'tpl_missing' }, 'template_id'],
    ['a tool this server does not run', { run: { tool: 'cobol', command: 'x' } }, 'run.tool'],
    ['a pipeline step’s unknown tool', { pipeline: { steps: [{ tool: 'bash', command: 'true' }, { tool: 'cobol', command: 'x' }] } }, 'pipeline.steps[1].tool'],
    ['a named queue below Team', { run: { ...aRun, queue: 'gpu' } }, 'run.queue'],
  ])('what it fires is checked when saved: %s', async (_name, target, field) => {
    const res = await t.api.post('/v1/schedules', { name: 'bad target', cron: '0 9 * * *', ...target });
    expect([400, 403]).toContain(res.status);
    expect(res.body.field).toBe(field);
  });

  test('name is optional: a schedule sent without one is named after what it fires and its rule; an update without one keeps it', async () => {
    const tpl = await template(t.api, { name: 'nightly backup' });
    const onTemplate = await t.api.post('/v1/schedules', { cron: '30 2 * * *', template_id: tpl.id });
    expect(onTemplate.status).toBe(201);
    expect(onTemplate.body.name).toBe('nightly backup, cron 30 2 * * *');
    const aRunByRule = await t.api.post('/v1/schedules', { rrule: 'DTSTART:20250101T090000Z\nRRULE:FREQ=DAILY;BYHOUR=9,17', run: aRun });
    expect(aRunByRule.status).toBe(201);
    expect(aRunByRule.body.name).toBe('bash run, rrule FREQ=DAILY;BYHOUR=9,17');
    const aPipeline = await t.api.post('/v1/schedules', { cron: '0 9 * * 1', pipeline: { steps: [{ tool: 'bash', command: 'true' }] } });
    expect(aPipeline.body.name).toBe('pipeline, cron 0 9 * * 1');
    // A long rule keeps the name within 255 bytes.
    const long = await t.api.post('/v1/schedules', { cron: `${Array.from({ length: 60 }, (_, m) => m).join(',')} ${Array.from({ length: 24 }, (_, h) => h).join(',')} ${Array.from({ length: 28 }, (_, d) => d + 1).join(',')} * *`, template_id: tpl.id });
    expect(long.status).toBe(201);
    expect(Buffer.byteLength(long.body.name)).toBeLessThanOrEqual(255);
    expect(long.body.name).toMatch(/^nightly backup, cron 0,1,2,.*…$/);

    const { name: _dropped, ...withoutName } = onTemplate.body;
    const updated = await put(onTemplate.body.id, { ...withoutName, cron: '45 2 * * *' });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ name: 'nightly backup, cron 30 2 * * *', cron: '45 2 * * *' });
    const renamed = await put(onTemplate.body.id, { ...withoutName, name: 'backups' });
    expect(renamed.body.name).toBe('backups');
    expect((await t.api.post('/v1/schedules', { name: '', cron: '0 9 * * *', run: aRun })).body).toMatchObject({ field: 'name', error: expect.stringMatching(/empty/) });
    for (const s of [onTemplate.body, aRunByRule.body, aPipeline.body, long.body]) await del(s.id);
  });

  test('an update naming no zone keeps the schedule’s; the update and the delete are on the audit chain', async () => {
    const schedule = await createSchedule({ name: 'zone kept', cron: '0 9 * * *', timezone: 'Asia/Tokyo', run: aRun });
    const updated = await put(schedule.id, { ...schedule, timezone: null, cron: '0 10 * * *' });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ timezone: 'Asia/Tokyo', cron: '0 10 * * *' });
    expect((await put('sch_missing', { name: 'x', cron: '0 9 * * *', run: aRun })).status).toBe(404);
    expect((await del(schedule.id)).status).toBe(204);
    const { body } = await t.api.get('/v1/audit?limit=20');
    const kinds = body.entries.filter((e: any) => e.body.schedule_id === schedule.id).map((e: any) => e.body.kind);
    expect(kinds).toEqual(['schedule.deleted', 'schedule.updated', 'schedule.created']);
  });
});

describe('credentials', () => {
  test('a run or pipeline names credentials its saver may use; reads show them; a credential a schedule names is not deleted', async () => {
    const owner = await person(t.api, 'operator');
    const other = await person(t.api, 'operator');
    const cred = (await t.as(owner.token).post('/v1/credentials', { name: 'sts', kind: 'oidc_token', inputs: { audience: 'sts' } })).body;
    const schedule = await createSchedule({ name: 'with credentials', cron: '0 6 * * *', run: { ...aRun, credentials: [cred.id] } }, t.as(owner.token));
    expect(schedule.run.credentials).toEqual([cred.id]);
    expect((await t.as(owner.token).get(`/v1/schedules/${schedule.id}`)).body.run.credentials).toEqual([cred.id]);

    // One the saver may not read is 400 naming the field; read without use, 403.
    const body = { name: 'not theirs', cron: '0 6 * * *' };
    const unreadable = await t.as(other.token).post('/v1/schedules', { ...body, run: { ...aRun, credentials: [cred.id] } });
    expect([unreadable.status, unreadable.body.field]).toEqual([400, 'run.credentials[0]']);
    await grant(t.as(owner.token), cred.id, 'read', { user_id: other.id });
    const readOnly = await t.as(other.token).post('/v1/schedules', { ...body, pipeline: { steps: [aRun], credentials: [cred.id] } });
    expect([readOnly.status, readOnly.body.field]).toEqual([403, 'pipeline.credentials[0]']);
    const malformed = await t.api.post('/v1/schedules', { ...body, run: { ...aRun, credentials: cred.id } });
    expect([malformed.status, malformed.body.field]).toEqual([400, 'run.credentials']);

    const inUse = await t.as(owner.token).request('DELETE', `/v1/credentials/${cred.id}`);
    expect([inUse.status, inUse.body.schedules]).toEqual([409, [schedule.id]]);
    expect((await del(schedule.id, t.as(owner.token))).status).toBe(204);
    expect((await t.as(owner.token).request('DELETE', `/v1/credentials/${cred.id}`)).status).toBe(204);
  });

  test('each fire’s run is given them; one not ready, or no longer usable by the saver, refuses the fire on last_error', async () => {
    const ready = (await t.api.post('/v1/credentials', { name: 'sts', kind: 'oidc_token', inputs: { audience: 'fired' } })).body;
    const waiting = (await t.api.post('/v1/credentials', { name: 'no secret', kind: 'machine', inputs: { username: 'deploy' } })).body;
    const saver = await person(t.api, 'operator');
    const withdrawn = await grant(t.api, ready.id, 'use', { user_id: saver.id });
    const rule = soon('FREQ=SECONDLY;COUNT=1');
    const given = await createSchedule({ name: 'given', rrule: rule, run: { tool: 'bash', command: 'echo "$CAIRN_OIDC_AUDIENCE"', credentials: [ready.id] } });
    const notReady = await createSchedule({ name: 'not ready', rrule: rule, run: { ...aRun, credentials: [waiting.id] } });
    const noLongerUsable = await createSchedule({ name: 'grant withdrawn', rrule: rule, run: { ...aRun, credentials: [ready.id] } }, t.as(saver.token));
    expect((await t.api.request('DELETE', `/v1/grants/${withdrawn}`)).status).toBe(204);

    const [run] = await waitUntil('the fire', async () => {
      const rows = await runsOf(given.id);
      return rows.length >= 1 && rows;
    });
    expect(await waitForRunEnd(t.api, run.id)).toMatchObject({ status: 'succeeded', credentials: [ready.id] });
    expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toBe('fired\n');
    for (const [schedule, named] of [
      [notReady, waiting.id],
      [noLongerUsable, 'run.credentials[0]'],
    ] as const) {
      const refused = await waitUntil('the refusal', async () => {
        const { body } = await t.api.get(`/v1/schedules/${schedule.id}`);
        return body.last_outcome === 'did_not_run' && body;
      });
      expect(refused.last_error).toContain(named);
      expect(await runsOf(schedule.id)).toHaveLength(0);
    }
  });
});

describe('preview', () => {
  test('the next five fires, the zone, the next spring gap that matters; nothing saved', async () => {
    const before = (await t.api.get('/v1/schedules')).body.total;
    const res = await t.api.get(`/v1/schedules/preview?cron=${encodeURIComponent('30 2 * * *')}&timezone=America/New_York&spring_forward=later`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ timezone: 'America/New_York', spring_forward: 'later', finished: false });
    expect(res.body.next).toHaveLength(5);
    for (const fire of res.body.next) expect(DateTime.fromISO(fire, { zone: 'America/New_York' }).toFormat('mm')).toBe('30');
    expect(res.body.spring_gap).toMatchObject({ times: [expect.stringMatching(/T02:30$/)], fires: [expect.stringMatching(/T07:30:00.000Z$/)] });
    expect((await t.api.get('/v1/schedules')).body.total).toBe(before);
  });

  test('a rule bounded by COUNT with fewer than five left is finished', async () => {
    const rrule = soon('FREQ=DAILY;COUNT=3', 3600);
    const { body } = await t.api.get(`/v1/schedules/preview?rrule=${encodeURIComponent(rrule)}`);
    expect(body).toMatchObject({ timezone: 'UTC', finished: true });
    expect(body.next).toHaveLength(3);
  });

  test('a bad query is a 400 naming the field', async () => {
    expect((await t.api.get('/v1/schedules/preview?cron=0%209%20*%20*%20*&timezone=Nowhere')).body).toMatchObject({ field: 'timezone' });
    expect((await t.api.get('/v1/schedules/preview?cron=0%209%20*%20*%20*&color=red')).body).toMatchObject({ field: 'color' });
  });
});

describe('firing, end to end on the real Temporal dev server', () => {
  test('a rule a few seconds out fires its runs on time, each once, as the schedule’s saver', async () => {
    const schedule = await createSchedule({ name: 'soon', rrule: soon('FREQ=SECONDLY;INTERVAL=3;COUNT=2'), run: aRun });
    const runs = await waitUntil('two fires', async () => {
      const rows = await runsOf(schedule.id);
      return rows.length >= 2 && rows;
    });
    const fires = runs.map((run) => new Date(run.idempotency_key.split('/')[2]));
    expect(fires[1].getTime() - fires[0].getTime()).toBe(3000);
    for (const [i, run] of runs.entries()) {
      expect(run.idempotency_key).toBe(`schedule/${schedule.id}/${fires[i].toISOString()}`);
      expect(run.requested_by).toBe('admin');
      // On time: recorded within a couple of seconds of its nominal time, never before it.
      expect(run.created_at.getTime()).toBeGreaterThanOrEqual(fires[i].getTime());
      expect(run.created_at.getTime() - fires[i].getTime()).toBeLessThan(2500);
      const ended = await waitForRunEnd(t.api, run.id);
      expect(ended).toMatchObject({ status: 'succeeded', source: { kind: 'schedule', id: schedule.id } });
    }
    // COUNT is spent: the workflow ends, and no third run comes.
    await waitUntil('the workflow to end', async () => (await t.api.get(`/v1/schedules/${schedule.id}`)).body.next_fire_at === null);
    const workflow = t.server.context.temporal.workflow.getHandle(schedule.id);
    await waitUntil('the workflow to complete', async () => (await workflow.describe()).status.name === 'COMPLETED');
    expect(await runsOf(schedule.id)).toHaveLength(2);
    const { body } = await t.api.get(`/v1/schedules/${schedule.id}`);
    expect(body).toMatchObject({ last_outcome: 'started', last_run_id: runs[1].id, last_fire_at: fires[1].toISOString(), last_error: null });
  });

  test("a fire's run start lost after the fire (as by a server dying) is made from the outbox once its grace runs out, and the run runs once", async () => {
    t.server.context.faults = new Faults(['deferred-start-lost']);
    const schedule = await createSchedule({ name: 'start lost', rrule: soon('FREQ=SECONDLY;COUNT=1'), run: aRun });
    const [run] = await waitUntil('the fire', async () => {
      const rows = await runsOf(schedule.id);
      return rows.length === 1 && rows;
    });
    // Recorded with its start owed, kept for the server that fired it well past the fire.
    const [owed] = await sql<{ held_ms: number }[]>`
      SELECT extract(epoch FROM due_at - created_at) * 1000 AS held_ms FROM outbox WHERE effect = 'run.start' AND subject = ${run.id}`;
    expect(Number(owed.held_ms)).toBeGreaterThanOrEqual(29_000);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await t.api.get(`/v1/runs/${run.id}`)).body.status).toBe('pending');
    await expect(t.server.context.temporal.workflow.getHandle(runWorkflowId(run.id)).describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
    // The grace runs out (standing in for its 30 seconds): any dispatcher makes the start.
    await sql`UPDATE outbox SET due_at = now() WHERE effect = 'run.start' AND subject = ${run.id}`;
    const ended = await waitForRunEnd(t.api, run.id);
    expect(ended).toMatchObject({ status: 'succeeded', source: { kind: 'schedule', id: schedule.id } });
    expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toBe('fired\n');
    const started = await sql`SELECT 1 FROM run_events WHERE run_id = ${run.id} AND kind = 'run.started'`;
    expect(started).toHaveLength(1);
    // The run's end owes the recording of its events (`event.record`), completed a moment after
    // the end commits (test/integration/runs.test.ts): waited for, never left owed.
    await waitUntil('the run\'s outbox effects completed', async () => (await sql`SELECT 1 FROM outbox WHERE subject = ${run.id}`).length === 0, 10_000);
  });

  test('fires owed (what keeps runs behind a burst): enabled schedules whose planned fire came in the window given and is not made yet', async () => {
    // Saved disabled, so no workflow plans them and overwrites the times set here; enabled below in the same statements.
    const saved = (name: string) => createSchedule({ name, cron: '0 9 * * *', run: aRun, enabled: false });
    const [due, stuck, coming] = [await saved('owed'), await saved('stuck'), await saved('coming')];
    const before = await countOwedFires(sql, 60);
    await sql`UPDATE schedules SET enabled = true, next_fire_at = now() - interval '5 seconds' WHERE id = ${due.id}`;
    await sql`UPDATE schedules SET enabled = true, next_fire_at = now() - interval '2 minutes' WHERE id = ${stuck.id}`;
    await sql`UPDATE schedules SET enabled = true, next_fire_at = now() + interval '5 seconds' WHERE id = ${coming.id}`;
    expect(await countOwedFires(sql, 60)).toBe(before + 1);
    expect(await countOwedFires(sql, 180)).toBe(before + 2);
    await sql`UPDATE schedules SET enabled = false WHERE id IN ${sql([due.id, stuck.id])}`;
    expect(await countOwedFires(sql, 180)).toBe(before);
    for (const { id } of [due, stuck, coming]) expect((await del(id)).status).toBe(204);
  });

  test('a template fires with its survey filled from defaults', async () => {
    const template = (
      await t.api.post('/v1/templates', {
        name: `greet-${Date.now()}`,
        tool: 'bash',
        command: 'echo "hello $who"',
        survey: [{ var: 'who', type: 'text', required: true, default: 'world' }],
      })
    ).body;
    const schedule = await createSchedule({ name: 'greeter', rrule: soon('FREQ=SECONDLY;COUNT=1'), template_id: template.id });
    const [run] = await waitUntil('the fire', async () => {
      const rows = await runsOf(schedule.id);
      return rows.length >= 1 && rows;
    });
    const ended = await waitForRunEnd(t.api, run.id);
    expect(ended).toMatchObject({ status: 'succeeded', template_id: template.id });
    expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toBe('hello world\n');
  });

  test('a required question with no default refuses the fire: last_error, and one chain entry per fire', async () => {
    const template = (
      await t.api.post('/v1/templates', {
        name: `needs-answers-${Date.now()}`,
        tool: 'bash',
        command: 'echo "$region $size"',
        survey: [
          { var: 'region', type: 'text', required: true },
          { var: 'size', type: 'int', required: true },
          { var: 'note', type: 'text', required: true, default: 'fine' },
        ],
      })
    ).body;
    const schedule = await createSchedule({ name: 'unanswerable', rrule: soon('FREQ=SECONDLY;INTERVAL=2;COUNT=2'), template_id: template.id });
    const refused = await waitUntil('both fires to be refused', async () => {
      const { body } = await t.api.get(`/v1/schedules/${schedule.id}`);
      return body.last_outcome === 'did_not_run' && body.next_fire_at === null && body;
    });
    expect(refused.last_error).toMatch(/required questions region, size have no default/);
    expect(refused.last_error_at).toBeTruthy();
    const { body: list } = await t.api.get(`/v1/schedules?id=${schedule.id}`);
    expect(list.schedules[0]).toMatchObject({ last_outcome: 'did_not_run', last_error: refused.last_error });
    expect(await runsOf(schedule.id)).toHaveLength(0);
    const { body: audit } = await t.api.get('/v1/audit?limit=50');
    const entries = audit.entries.filter((e: any) => e.path === `/schedules/${schedule.id}/refused/survey/region,size`);
    expect(entries).toHaveLength(2);
    expect(entries[0]).toMatchObject({ method: 'SCHEDULE', actor: 'cairn', outcome: 409 });
    expect(entries[0].body).toMatchObject({ kind: 'schedule.refused', schedule_id: schedule.id, questions: ['region', 'size'] });
  });

  test('a schedule whose saver became a viewer does not fire as them: the same refusal a trigger and a callback give', async () => {
    const vera = (await t.api.post('/v1/users', { username: `vera-${Date.now()}`, role: 'operator' })).body;
    const asVera = t.as((await t.api.post('/v1/tokens', { name: 'v', username: vera.username })).body.token);
    const schedule = (await asVera.post('/v1/schedules', { name: 'demoted', rrule: soon('FREQ=SECONDLY;COUNT=1', 4), run: aRun })).body;
    expect((await t.api.request('PUT', `/v1/users/${vera.id}`, { body: { role: 'viewer' } })).status).toBe(200);
    const refused = await waitUntil('the fire to be refused', async () => {
      const { body } = await t.api.get(`/v1/schedules/${schedule.id}`);
      return body.last_outcome === 'did_not_run' && body;
    });
    expect(refused.last_error).toBe(`the account that saved this schedule, ${vera.username}, is now a viewer and may not submit runs; saving it again makes it fire as the saver`);
    expect(await runsOf(schedule.id)).toHaveLength(0);
  });

  test('a pipeline and a split fire too', async () => {
    const pipeline = await createSchedule({
      name: 'pipeline',
      rrule: soon('FREQ=SECONDLY;COUNT=1'),
      pipeline: { steps: [{ tool: 'bash', command: 'echo one' }, { tool: 'bash', command: 'echo two' }] },
    });
    const split = await createSchedule({ name: 'split', rrule: soon('FREQ=SECONDLY;COUNT=1'), run: { ...aRun, shards: 2 } });
    for (const [schedule, kind] of [
      [pipeline, 'pipeline'],
      [split, 'split'],
    ] as const) {
      const [run] = await waitUntil(`the ${kind} fire`, async () => {
        const rows = await runsOf(schedule.id);
        return rows.length >= 1 && rows;
      });
      expect(await waitForRunEnd(t.api, run.id)).toMatchObject({ kind, status: 'succeeded' });
    }
  });

  test('fires are skipped while a run the schedule started still goes, recorded with why; the next fire after it ends runs', async () => {
    const schedule = await createSchedule({ name: 'slow', rrule: soon('FREQ=SECONDLY;INTERVAL=2', 2), run: { tool: 'bash', command: 'sleep 60' } });
    const [first] = await waitUntil('the first fire', async () => {
      const rows = await runsOf(schedule.id);
      return rows.length >= 1 && rows;
    });
    const skipped = await waitUntil('two skipped fires', async () => {
      const { body } = await t.api.get(`/v1/schedules/${schedule.id}`);
      return body.last_skipped?.fires >= 2 && body;
    });
    expect(skipped.last_outcome).toBe('skipped');
    expect(skipped.last_skipped).toMatchObject({ run_id: first.id, reason: expect.stringContaining(`run ${first.id}, which this schedule started, still goes`) });
    expect(new Date(skipped.last_skipped.since).getTime()).toBeLessThan(new Date(skipped.last_skipped.at).getTime());
    expect(await runsOf(schedule.id)).toHaveLength(1);
    await t.api.post(`/v1/runs/${first.id}/cancel`);
    const second = await waitUntil('a fire after the run ended', async () => {
      const rows = await runsOf(schedule.id);
      return rows.length >= 2 && rows[1];
    });
    // The fire records what it did just after its run is submitted: wait for that record.
    const recorded = await waitUntil('the fire that started a run recorded', async () => {
      const { body } = await t.api.get(`/v1/schedules/${schedule.id}`);
      return body.last_run_id === second.id && body;
    });
    expect(recorded).toMatchObject({ last_outcome: 'started', last_skipped: null });
    await del(schedule.id);
    await t.api.post(`/v1/runs/${second.id}/cancel`);
  });

  test('a fire whose inventory matches no host starts nothing and is recorded as skipped with why', async () => {
    const inventory = (await t.api.post('/v1/inventories', { name: `web only ${Date.now()}`, content: '[web]\nweb1 ansible_connection=local\n' })).body;
    const play = '- hosts: all\n  gather_facts: false\n  tasks: [{ ansible.builtin.ping: }]\n';
    const limited = await t.api.post('/v1/templates', { name: `db play ${Date.now()}`, tool: 'ansible', command: play, inventory_id: inventory.id, limit: 'db' });
    expect(limited.status).toBe(201);
    const schedule = await createSchedule({ rrule: soon('FREQ=SECONDLY;INTERVAL=2', 2), template_id: limited.body.id });
    const skipped = await waitUntil('two hostless fires', async () => {
      const { body } = await t.api.get(`/v1/schedules/${schedule.id}`);
      return body.last_skipped?.fires >= 2 && body;
    });
    expect(skipped).toMatchObject({ last_outcome: 'skipped', last_run_id: null, last_error: null });
    expect(skipped.last_skipped).toMatchObject({ run_id: null, reason: `the limit "db" matches no host of inventory ${inventory.name}` });
    expect(await runsOf(schedule.id)).toEqual([]);
    // Not a schedule blocked behind a run.
    const { body: attention } = await t.api.get('/v1/attention');
    expect(JSON.stringify(attention)).not.toContain(schedule.id);
    await del(schedule.id);
  });

  test('every fire goes through the approval gate: a held run holds the next fires back', async () => {
    const policy = await t.api.post('/v1/policies', { name: `hold scheduled ${Date.now()}`, effect: 'require_approval', command_contains: 'echo gated' });
    expect(policy.status).toBe(201);
    try {
      const schedule = await createSchedule({ name: 'gated', rrule: soon('FREQ=SECONDLY;INTERVAL=2', 2), run: { tool: 'bash', command: 'echo gated' } });
      const [held] = await waitUntil('the held fire', async () => {
        const rows = await runsOf(schedule.id);
        return rows.length >= 1 && rows;
      });
      expect(held.status).toBe('held');
      await waitUntil('a skipped fire', async () => (await t.api.get(`/v1/schedules/${schedule.id}`)).body.last_skipped?.run_id === held.id);
      await del(schedule.id);
      await t.api.post(`/v1/runs/${held.id}/reject`, { reason: 'not now' });
    } finally {
      await t.api.request('DELETE', `/v1/policies/${policy.body.id}`);
    }
  });

  test('an update reaches the sleeping workflow; disabling stops it; deleting cancels it', async () => {
    const schedule = await createSchedule({ name: 'yearly', cron: '0 0 1 1 *', timezone: 'UTC', run: aRun });
    await waitUntil('the yearly plan', async () => (await t.api.get(`/v1/schedules/${schedule.id}`)).body.next_fire_at);
    const updated = await put(schedule.id, { ...schedule, cron: null, rrule: soon('FREQ=SECONDLY;INTERVAL=2', 2) });
    expect(updated.status).toBe(200);
    await waitUntil('a fire under the new rule', async () => (await runsOf(schedule.id)).length >= 1);

    await put(schedule.id, { ...updated.body, enabled: false });
    await waitUntil('the workflow to stop planning', async () => (await t.api.get(`/v1/schedules/${schedule.id}`)).body.next_fire_at === null);
    const count = (await runsOf(schedule.id)).length;
    await new Promise((r) => setTimeout(r, 4000));
    expect(await runsOf(schedule.id)).toHaveLength(count);

    const again = await put(schedule.id, { ...updated.body, enabled: true, rrule: soon('FREQ=SECONDLY;INTERVAL=2', 2) });
    expect(again.status).toBe(200);
    await waitUntil('fires again once enabled', async () => (await runsOf(schedule.id)).length > count);
    await del(schedule.id);
    const handle = t.server.context.temporal.workflow.getHandle(schedule.id);
    // The cancel ends it; a fire due between the delete's commit and the cancel finds the schedule
    // gone and ends it first (completed), which the cancel then finds ended. Either way it stops.
    const ended = await waitUntil('the workflow to end', async () => {
      const status = (await handle.describe()).status.name;
      return status !== 'RUNNING' && status;
    });
    expect(['CANCELLED', 'COMPLETED']).toContain(ended);
  });
});

test('a schedule saved over and over continues as new before its history passes its bound, and keeps its plan', async () => {
  const schedule = await createSchedule({ name: 'saved often', cron: '0 3 1 1 *', timezone: 'UTC', run: aRun });
  const handle = t.server.context.temporal.workflow.getHandle(schedule.id);
  const planned = await waitUntil('the first plan', async () => (await t.api.get(`/v1/schedules/${schedule.id}`)).body.next_fire_at);
  const { runId: firstRun } = await handle.describe();
  // Each save signals the workflow, which plans again: none of them fires.
  let saves = 0;
  for (; saves < 800 && (await handle.describe()).runId === firstRun; saves++) {
    const res = await put(schedule.id, { ...schedule, name: `saved ${saves}` });
    expect(res.status).toBe(200);
  }
  const current = await handle.describe();
  expect(current.runId).not.toBe(firstRun);
  const ended = await t.server.context.temporal.workflow.getHandle(schedule.id, firstRun).describe();
  expect(ended.status.name).toBe('CONTINUED_AS_NEW');
  // The bound is checked once per wake, and a wake records a few events.
  expect(ended.historyLength).toBeLessThanOrEqual(SCHEDULE_HISTORY_EVENTS + 20);
  expect(ended.historyLength).toBeGreaterThanOrEqual(SCHEDULE_HISTORY_EVENTS);
  // The new run plans the same fire.
  await waitUntil('the plan after continuing', async () => (await t.api.get(`/v1/schedules/${schedule.id}`)).body.next_fire_at === planned && (await handle.describe()).historyLength > 3);
  await del(schedule.id);
}, 120_000);

describe('durable fires', () => {
  test('a hand-off lost after the save is carried out by the outbox dispatcher, and the schedule fires', async () => {
    const s = await startTestServer({}, { faults: new Faults(['schedule-handoff-once']) });
    try {
      const created = await s.api.post('/v1/schedules', { name: 'swept', rrule: soon('FREQ=SECONDLY;COUNT=1', 6), run: aRun });
      expect(created.status).toBe(201);
      const local = connectDatabase(s.databaseUrl, { max: 1 });
      try {
        // The save's own hand-off failed: it is still owed, with why.
        const [owed] = await local<{ last_error: string | null }[]>`SELECT last_error FROM outbox WHERE effect = 'schedule.hand_off' AND subject = ${created.body.id}`;
        expect(owed).toBeDefined();
        await waitUntil('the fire', async () => (await local`SELECT 1 FROM runs WHERE source_id = ${created.body.id}`).length === 1, 20_000);
      } finally {
        await local.end();
      }
    } finally {
      await s.stop();
    }
  });

  // A save commits, then signals the workflow; a server that dies in between leaves the workflow
  // asleep towards a fire planned under the old rule. Simulated by saving in the store alone.
  test.each([
    ['still has that time: the fire is made', false],
    ['no longer has that time: the fire is not made, and the next is planned by the new rule', true],
  ])('a save whose signal was lost, when the rule %s', async (_name, moved) => {
    // Far enough out that the plan and the save land before the fire on a busy machine.
    const rrule = soon('FREQ=SECONDLY;COUNT=1', 8);
    const schedule = await createSchedule({ name: 'lost signal', rrule, run: aRun });
    const fireAt = await waitUntil('the plan', async () => (await t.api.get(`/v1/schedules/${schedule.id}`)).body.next_fire_at);
    const later = soon('FREQ=SECONDLY;COUNT=1', 120);
    await sql`UPDATE schedules SET name = 'saved meanwhile', rrule = ${moved ? later : rrule}, revision = revision + 1, updated_at = now() WHERE id = ${schedule.id}`;
    if (!moved) {
      // However late a busy machine makes the wake, the fire is made, once.
      await waitUntil('the fire', async () => (await runsOf(schedule.id)).length > 0, 30_000);
      await new Promise((r) => setTimeout(r, 1000));
      expect(await runsOf(schedule.id)).toHaveLength(1);
    } else {
      // The wake at the old time finds the rule moved: it plans by the new rule and fires nothing.
      const next = await waitUntil('the new plan', async () => {
        const { body } = await t.api.get(`/v1/schedules/${schedule.id}`);
        return body.next_fire_at && body.next_fire_at !== fireAt && body.next_fire_at;
      });
      expect(Date.parse(next) - Date.parse(fireAt)).toBeGreaterThan(100_000);
      await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(fireAt) + 1500 - Date.now())));
      expect(await runsOf(schedule.id)).toHaveLength(0);
    }
    await del(schedule.id);
  });

  test('a fire retried after its run was submitted, when another account saved the schedule meanwhile, makes no second run', async () => {
    // The fire's first attempt submits its run as the saver, then is lost before the fire is
    // recorded; another admin saves the schedule before the retry (1 s later), so the retry fires
    // as that admin. The fire's run is found by the schedule and the time, not by the account.
    let edit: Promise<{ status: number; at: number }> | undefined;
    let lostAt = 0;
    let editAs: ApiClient | undefined;
    let scheduleBody: Record<string, unknown> | undefined;
    class EditWhenLost extends Faults {
      fire(name: string): boolean {
        const lost = super.fire(name);
        if (lost && name === 'schedule-fire-after-submit') {
          lostAt = Date.now();
          edit = editAs!
            .request('PUT', `/v1/schedules/${scheduleBody!.id}`, { body: { ...scheduleBody, name: 'saved by another admin meanwhile' } })
            .then((res) => ({ status: res.status, at: Date.now() }));
        }
        return lost;
      }
    }
    const s = await startTestServer({}, { faults: new EditWhenLost(['schedule-fire-after-submit']) });
    try {
      await s.api.post('/v1/users', { username: 'second-admin', role: 'admin' });
      editAs = s.as((await s.api.post('/v1/tokens', { name: 'second', username: 'second-admin' })).body.token);
      const created = await s.api.post('/v1/schedules', { name: 'retried after an edit', rrule: soon('FREQ=MINUTELY;COUNT=2'), run: aRun });
      expect(created.status).toBe(201);
      scheduleBody = created.body;
      const done = await waitUntil('the fire to be recorded', async () => {
        const { body } = await s.api.get(`/v1/schedules/${created.body.id}`);
        return body.last_outcome === 'started' && body;
      });
      // (The rule's second fire is a minute on, after the test.)
      const edited = await edit!;
      expect(edited.status).toBe(200);
      // The save landed before the retry, which comes a second after the loss.
      expect(edited.at - lostAt).toBeLessThan(900);
      expect(done).toMatchObject({ updated_by: 'second-admin', name: 'saved by another admin meanwhile' });
      const local = connectDatabase(s.databaseUrl, { max: 1 });
      try {
        const rows = await local<{ id: string; requested_by: string }[]>`SELECT id, requested_by FROM runs WHERE source_id = ${created.body.id}`;
        expect([...rows]).toEqual([{ id: done.last_run_id, requested_by: 'admin' }]);
      } finally {
        await local.end();
      }
    } finally {
      await s.stop();
    }
  });

  test('a fire retried after its run was submitted makes no second run', async () => {
    const s = await startTestServer({}, { faults: new Faults(['schedule-fire-after-submit']) });
    try {
      const created = await s.api.post('/v1/schedules', { name: 'retried', rrule: soon('FREQ=SECONDLY;COUNT=1'), run: aRun });
      const id = created.body.id;
      const done = await waitUntil('the fire to be recorded', async () => {
        const { body } = await s.api.get(`/v1/schedules/${id}`);
        return body.last_outcome === 'started' && body;
      });
      const local = connectDatabase(s.databaseUrl, { max: 1 });
      try {
        const rows = await local<{ id: string }[]>`SELECT id FROM runs WHERE source_id = ${id}`;
        expect(rows.map((r) => r.id)).toEqual([done.last_run_id]);
      } finally {
        await local.end();
      }
    } finally {
      await s.stop();
    }
  });
});
