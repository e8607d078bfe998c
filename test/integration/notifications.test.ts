import { randomBytes } from 'node:crypto';
import { FAILURE_NOTE } from '../../core/notifications/notification-kinds';
import { chmodSync } from 'node:fs';
import { connectDatabase, type Sql } from '../../store/db';
import { insertTarget } from '../../store/notifications';
import { grant, org, person, type Person } from '../support/access';
import type { ApiClient } from '../support/http';
import { startReceiver, startSmtpReceiver, type Receiver, type ReceivedMail } from '../support/receivers';
import { freshReceiverEachTest, ok, settledDeliveries as settled } from '../support/notifications';
import { soonRule, waitUntil } from '../support/schedules';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';
import { bareRepository } from '../support/git';

const keys = {
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
};

let t: TestServer;
let sql: Sql;
let receiver: Receiver;
let smtp: { url: string; mails: ReceivedMail[]; close(): Promise<void> };
const SMS_TOKEN = `sms-token-${randomBytes(8).toString('hex')}`;
const SMTP_PASSWORD = `smtp-pass-${randomBytes(8).toString('hex')}`;
/** A bare git repository under the server's --project-local-roots, for projects to fetch. */
let repo: string;
let projectRoot: string;

function makeRepository(): void {
  projectRoot = tempDir('cairn-ntf-git');
  // The run account reads the repository in its sandbox.
  chmodSync(projectRoot, 0o755);
  repo = bareRepository(projectRoot, { 'hello.txt': 'hello\n' }).bare;
}

beforeAll(async () => {
  makeRepository();
  receiver = await startReceiver();
  smtp = await startSmtpReceiver({ user: 'cairn-mail', password: SMTP_PASSWORD });
  t = await startTestServer(
    {
      ...keys,
      SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
      CAIRN_INCIDENT_URL: `${receiver.url}/v2/enqueue`,
      CAIRN_SMS_URL: receiver.url,
      CAIRN_SMS_ACCOUNT: 'AC0123',
      CAIRN_SMS_FROM: '+15550001111',
      CAIRN_SMS_TOKEN: SMS_TOKEN,
      CAIRN_SMTP_URL: smtp.url,
      CAIRN_SMTP_USER: 'cairn-mail',
      CAIRN_SMTP_PASSWORD: SMTP_PASSWORD,
      CAIRN_SMTP_FROM: 'cairn@example.test',
      CAIRN_NOTIFY_CHAT_B: `${receiver.url}/server-channel`,
      CAIRN_NOTIFY_ON: 'failure',
      CAIRN_PROJECT_LOCAL_ROOTS: projectRoot,
    },
    { notificationRetryBaseMs: 200 },
  );
  sql = connectDatabase(t.databaseUrl, { max: 2 });
  const policy = await t.api.post('/v1/policies', { name: 'holds', command_contains: 'needs-approval' });
  if (policy.status !== 201) throw new Error(policy.text);
});
afterAll(async () => {
  await receiver?.close();
  await smtp?.close();
  await sql?.end();
  await t?.stop();
});
freshReceiverEachTest(() => receiver);

async function template(name: string, command = 'true') {
  return ok(await t.api.post('/v1/templates', { name, tool: 'bash', command }));
}

async function target(body: Record<string, unknown>) {
  return ok(await t.api.post('/v1/notifications', body));
}

async function attach(targetId: string, objectId: string, event: string, objectKind = 'template') {
  return ok(await t.api.post(`/v1/notifications/${targetId}/attachments`, { object_kind: objectKind, object_id: objectId, event }));
}

const launch = async (templateId: string) => ok(await t.api.post(`/v1/templates/${templateId}/launch`, {}));

async function tokenFor(username: string, role: string): Promise<string> {
  const user = await t.api.post('/v1/users', { username, role });
  if (user.status !== 201 && user.status !== 409) throw new Error(`user create: ${user.status} ${user.text}`);
  const token = await t.api.post('/v1/tokens', { name: `${username} token`, username });
  if (token.status !== 201) throw new Error(`token create: ${token.status} ${token.text}`);
  return token.body.token;
}

/** The secret part of a receiver URL: a path no read may show. */
const secretPath = () => `/hooks/${randomBytes(12).toString('hex')}`;

describe('a webhook target attached to a template', () => {
  test('hears its runs start and finish, in order, with the delivery id in the body and as Idempotency-Key', async () => {
    const tpl = await template('webhook heard');
    const path = secretPath();
    const hook = await target({ name: 'ops hook', kind: 'webhook', url: `${receiver.url}${path}` });
    await attach(hook.id, tpl.id, 'started');
    await attach(hook.id, tpl.id, 'success');
    const run = await launch(tpl.id);
    await waitForRunEnd(t.api, run.id);
    await receiver.waitFor((r) => r.length >= 2, 20_000, 'a start and an end');
    const [started, finished] = receiver.received;
    expect(started.path).toBe(path);
    expect(started.json).toMatchObject({ event: 'run.started', run: { id: run.id }, delivery: { sequence: expect.any(Number) } });
    expect(finished.json).toMatchObject({ event: 'run.finished', run: { id: run.id, status: 'succeeded' } });
    expect(started.json.delivery.sequence).toBeLessThan(finished.json.delivery.sequence);
    for (const r of [started, finished]) {
      expect(r.json.delivery.id).toBe(`${hook.id}/${run.id}/${r.json.delivery.sequence}`);
      expect(r.headers['idempotency-key']).toBe(r.json.delivery.id);
      expect(r.json.delivery.note).toBeUndefined();
    }
    const told = await ok(await t.api.get(`/v1/runs/${run.id}/notifications`), 200);
    expect(told.events.map((e: any) => [e.event, e.state, e.deliveries.map((d: any) => d.status)])).toEqual([
      ['run.started', 'recorded', ['arrived']],
      ['run.finished', 'recorded', ['arrived']],
    ]);
    const read = await ok(await t.api.get(`/v1/notifications/${hook.id}`), 200);
    expect(read).toMatchObject({ url: receiver.url, key_set: false, needs_secret: false, delivery: { state: 'healthy', missing: [] } });
    expect(JSON.stringify(read)).not.toContain(path);
  });
});

const settledDeliveries = (runId: string, count: number, timeoutMs?: number) => settled(t.api, runId, count, timeoutMs);

describe('targets', () => {
  test('admins create, operators read; no read carries the url or key; the delivery block starts configured', async () => {
    const operator = await tokenFor('notify-operator', 'operator');
    const path = secretPath();
    const refused = await t.as(operator).post('/v1/notifications', { name: 'x', kind: 'webhook', url: `${receiver.url}${path}` });
    expect(refused.status).toBe(403);
    const created = await target({ name: 'grafana', kind: 'annotation', url: `${receiver.url}${path}`, key: 'glsa_annotation_token_1', description: 'dashboards' });
    expect(created).toMatchObject({
      id: expect.stringMatching(/^ntf_/),
      kind: 'annotation',
      url: receiver.url,
      key_set: true,
      needs_secret: false,
      description: 'dashboards',
      org_id: null,
      delivery: { state: 'configured', missing: [], last_delivered_at: null, last_failed_at: null, last_failure_reason: null, failed_last_7_days: 0 },
    });
    const list = await ok(await t.as(operator).get(`/v1/notifications?id=${created.id}`), 200);
    expect(list).toMatchObject({ count: 1, total: 1, notifications: [{ id: created.id }] });
    const one = await t.as(operator).get(`/v1/notifications/${created.id}`);
    for (const text of [JSON.stringify(created), list && JSON.stringify(list), one.text]) {
      expect(text).not.toContain(path);
      expect(text).not.toContain('glsa_annotation_token_1');
    }
  });

  test.each([
    ['webhook', {}, 'url'],
    ['chat_a', {}, 'url'],
    ['incident', {}, 'key'],
    ['annotation', { url: 'https://grafana.example.test' }, 'key'],
    ['sms', {}, 'to'],
    ['email', {}, 'to'],
  ])('a %s target without its required field is refused naming it', async (kind, fields, missing) => {
    const res = await t.api.post('/v1/notifications', { name: `no ${missing}`, kind, ...fields });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe(missing);
  });

  test('a url on a private or loopback address is refused at create unless the egress allow list exempts it', async () => {
    const res = await t.api.post('/v1/notifications', { name: 'private', kind: 'webhook', url: 'http://10.1.2.3/hook' });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ field: 'url' });
    expect(res.body.error).toContain('private, loopback or link-local');
  });

  test('a url holding a line break or tab is malformed wherever a target or an entry takes one, and is not stored', async () => {
    const base = `${receiver.url}${secretPath()}`;
    for (const url of [`${base}\r\nX-Injected: 1`, `${base}\n`, `${receiver.url}/a\tb`, `${base}\u001b[2J`]) {
      const created = await t.api.post('/v1/notifications', { name: 'broken line', kind: 'webhook', url });
      expect(created.status).toBe(400);
      expect(created.body).toEqual({ error: 'url: url must not hold control characters (such as a line break or tab)', field: 'url' });
      const stored = await target({ name: 'line breaks later', kind: 'chat_b', url: base });
      const edited = await t.api.request('PUT', `/v1/notifications/${stored.id}`, { body: { ...stored, url } });
      expect(edited).toMatchObject({ status: 400, body: { field: 'url' } });
      const entry = [{ kind: 'webhook', url }];
      const tpl = await t.api.post('/v1/templates', { name: 'entry with a line break', tool: 'bash', command: 'true', notifications: entry });
      expect(tpl).toMatchObject({ status: 400, body: { field: 'notifications[0].url' } });
      const run = await t.api.post('/v1/runs', { tool: 'bash', command: 'true', notifications: [{ kind: 'sms', to: '+15550002222' }, ...entry] });
      expect(run).toMatchObject({ status: 400, body: { field: 'notifications[1].url' } });
    }
    expect((await t.api.get('/v1/notifications?limit=1000')).body.notifications.filter((n: any) => n.name === 'broken line')).toEqual([]);
  });

  test('an edit echoing the hint or a blank keeps the stored url; a new url replaces it', async () => {
    const first = `${receiver.url}${secretPath()}`;
    const created = await target({ name: 'keep me', kind: 'chat_b', url: first });
    // Each edit sends back the read the one before it answered (its version with it).
    let current = created;
    for (const url of [created.url, '', null, '[masked]']) {
      const edited = await t.api.request('PUT', `/v1/notifications/${created.id}`, { body: { ...current, name: 'kept', url } });
      expect(edited.status).toBe(200);
      expect(edited.body.url).toBe(receiver.url);
      current = edited.body;
    }
    const tpl = await template('keep me template');
    await attach(created.id, tpl.id, 'success');
    const run = await launch(tpl.id);
    await waitForRunEnd(t.api, run.id);
    await receiver.waitFor((r) => r.some((x) => x.json?.text?.includes(run.id)), 20_000, 'the kept url');
    expect(receiver.received.find((x) => x.json?.text?.includes(run.id))!.path).toBe(new URL(first).pathname);
  });

  test('without the encryption key, creating a target with a secret is refused with 409 naming the settings', async () => {
    const bare = await startTestServer({ SERVICE_EGRESS_ALLOW: '127.0.0.0/8' });
    try {
      const res = await bare.api.post('/v1/notifications', { name: 'hook', kind: 'webhook', url: `${receiver.url}/x` });
      expect(res.status).toBe(409);
      expect(res.body.error).toContain('SERVICE_ENCRYPTION_KEY');
      expect(res.body.error).toContain('SERVICE_ENCRYPTION_SALT');
      expect((await bare.api.post('/v1/notifications', { name: 'mail', kind: 'email', to: 'a@example.test' })).status).toBe(201);
    } finally {
      await bare.stop();
    }
  });

  test('a target waiting for its secret skips its deliveries with why, and its state says so', async () => {
    const waiting = await insertTarget(sql, `ntf_waiting${randomBytes(4).toString('hex')}`, {
      name: 'imported hook', description: '', org_id: null, kind: 'webhook', url_sealed: null, url_hint: null, key_sealed: null, recipients: null, needs_secret: true,
    }, 'import');
    const tpl = await template('waiting for secret');
    await attach(waiting.id, tpl.id, 'success');
    const read = await ok(await t.api.get(`/v1/notifications/${waiting.id}`), 200);
    expect(read).toMatchObject({ needs_secret: true, delivery: { state: 'needs_secret', missing: ['url'] } });
    // An edit that still leaves it missing is saved, and it keeps waiting.
    const edited = await t.api.request('PUT', `/v1/notifications/${waiting.id}`, { body: { name: 'imported hook, renamed', kind: 'webhook' } });
    expect(edited.status).toBe(200);
    expect(edited.body).toMatchObject({ name: 'imported hook, renamed', needs_secret: true, delivery: { state: 'needs_secret' } });
    const run = await launch(tpl.id);
    await waitForRunEnd(t.api, run.id);
    const [delivery] = await settledDeliveries(run.id, 1);
    expect(delivery).toMatchObject({ status: 'skipped', reason: 'not sent: the target is waiting for its secret (url)', attempts: 0 });
  });
});

describe('attachments', () => {
  test('aliases, the list, a second identical attach, an unknown object of each kind, detach', async () => {
    const tpl = await template('attach things');
    const hook = await target({ name: 'attach hook', kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    const failure = await attach(hook.id, tpl.id, 'error');
    expect(failure).toMatchObject({ object_kind: 'template', object_id: tpl.id, event: 'failure' });
    expect((await attach(hook.id, tpl.id, 'approvals')).event).toBe('approval');
    expect((await t.api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: 'template', object_id: tpl.id, event: 'failure' })).status).toBe(409);
    const workflowAsJob = await t.api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: 'workflow', object_id: tpl.id, event: 'failure' });
    expect(workflowAsJob.status).toBe(404);
    for (const [kind, id] of [['template', 'tpl_nope'], ['schedule', 'sch_x'], ['project', 'prj_x'], ['org', 'org_x']]) {
      const res = await t.api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: kind, object_id: id, event: 'failure' });
      expect(res.status).toBe(404);
      expect(res.body.error).toBe(`${kind} ${id} not found`);
    }
    const bad = await t.api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: 'template', object_id: tpl.id, event: 'sometimes' });
    expect(bad).toMatchObject({ status: 400, body: { field: 'event' } });
    const list = await ok(await t.api.get(`/v1/notifications/${hook.id}/attachments`), 200);
    expect(list.attachments.map((a: any) => a.event).sort()).toEqual(['approval', 'failure']);
    expect((await t.api.request('DELETE', `/v1/notifications/${hook.id}/attachments/${failure.id}`)).status).toBe(204);
    expect((await t.api.request('DELETE', `/v1/notifications/${hook.id}/attachments/${failure.id}`)).status).toBe(404);
    expect((await ok(await t.api.get(`/v1/notifications/${hook.id}/attachments`), 200)).total).toBe(1);
  });

  test('deleting a template removes its attachments, and its audit entry says how many and of which targets', async () => {
    const tpl = await template('deleted with attachments');
    const a = await target({ name: 'del a', kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    const b = await target({ name: 'del b', kind: 'email', to: 'ops@example.test' });
    await attach(a.id, tpl.id, 'failure');
    await attach(a.id, tpl.id, 'success');
    await attach(b.id, tpl.id, 'failure');
    expect((await t.api.request('DELETE', `/v1/templates/${tpl.id}`)).status).toBe(204);
    expect((await t.api.get(`/v1/notifications/${a.id}/attachments`)).body.total).toBe(0);
    expect((await t.api.get(`/v1/notifications/${b.id}`)).status).toBe(200);
    const [entry] = await sql<{ path: string }[]>`SELECT path FROM audit_entries WHERE body->>'kind' = 'template.deleted' AND body->>'template_id' = ${tpl.id}`;
    expect(entry.path).toBe(`/v1/templates/${tpl.id}?notification_attachments=3&notification_targets=${[a.id, b.id].sort().join(',')}`);
  });

  test('a template delete that finds its attachments changed after its entry was written deletes nothing and answers 409', async () => {
    const tpl = await template('raced delete');
    const a = await target({ name: 'race a', kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    const first = await attach(a.id, tpl.id, 'failure');
    await attach(a.id, tpl.id, 'success');
    // Another writer holds one attachment while the delete reads them, then removes it.
    const other = connectDatabase(t.databaseUrl, { max: 1 });
    try {
      let release!: () => void;
      let locked!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const lockTaken = new Promise<void>((r) => (locked = r));
      const writer = other.begin(async (tx) => {
        await tx`SELECT id FROM notification_attachments WHERE id = ${first.id} FOR UPDATE`;
        locked();
        await held;
        await tx`DELETE FROM notification_attachments WHERE id = ${first.id}`;
      });
      await lockTaken;
      const deleting = t.api.request('DELETE', `/v1/templates/${tpl.id}`);
      // The delete has read the attachments and written its entry, and now waits on the held row.
      for (let i = 0; ; i++) {
        const [{ n }] = await sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%DELETE FROM notification_attachments WHERE object_kind%'`;
        if (n > 0) break;
        if (i > 200) {
          release();
          throw new Error('the delete never waited on the attachment');
        }
        await new Promise((r) => setTimeout(r, 25));
      }
      release();
      await writer;
      const res = await deleting;
      expect(res.status).toBe(409);
      expect(res.body.error).toContain('changed');
    } finally {
      await other.end();
    }
    expect((await t.api.get(`/v1/templates/${tpl.id}`)).status).toBe(200);
    expect((await t.api.get(`/v1/notifications/${a.id}/attachments`)).body.total).toBe(1);
  });
});

/** A project fetched from the test repository, its first update settled; its read. */
async function project(body: Record<string, unknown> = {}) {
  const created = await ok(await t.api.post('/v1/projects', { name: `ntf project ${randomBytes(3).toString('hex')}`, url: repo, ...body }));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const read = (await t.api.get(`/v1/projects/${created.id}`)).body;
    if (!read.update_pending && read.status === 'successful') return read;
    if (read.status === 'failed' || Date.now() > deadline) throw new Error(`project ${created.id} did not update: ${JSON.stringify(read)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function schedule(templateId: string) {
  return ok(await t.api.post('/v1/schedules', { name: `ntf schedule ${randomBytes(3).toString('hex')}`, cron: '0 3 1 1 *', timezone: 'UTC', template_id: templateId }));
}

/** The chain entry path of the delete of `id`, found by the id its body names. */
async function deletePath(kind: string, idField: string, id: string): Promise<string> {
  const [entry] = await sql<{ path: string }[]>`SELECT path FROM audit_entries WHERE body->>'kind' = ${kind} AND body->>${idField} = ${id}`;
  return entry?.path;
}

describe('attachments to schedules, projects and organizations', () => {
  test('each is attached; a run hears its template, schedule, project and both organizations, each target once', async () => {
    const templateOrg = await org(t.api);
    const projectOrg = await org(t.api);
    const prj = await project({ org_id: projectOrg });
    const tpl = await ok(await t.api.post('/v1/templates', { name: 'heard through many', tool: 'bash', command: 'true', project_id: prj.id, org_id: templateOrg }));
    const sch = await schedule(tpl.id);
    const targets: Record<string, any> = {};
    for (const name of ['project', 'template org', 'project org', 'everything', 'schedule only']) {
      targets[name] = await target({ name: `heard via ${name}`, kind: 'webhook', url: `${receiver.url}/via/${name.replace(/ /g, '-')}${secretPath()}` });
    }
    await attach(targets.project.id, prj.id, 'success', 'project');
    await attach(targets['template org'].id, templateOrg, 'success', 'org');
    await attach(targets['project org'].id, projectOrg, 'success', 'org');
    await attach(targets['schedule only'].id, sch.id, 'success', 'schedule');
    for (const [kind, id] of [['template', tpl.id], ['schedule', sch.id], ['project', prj.id], ['org', templateOrg], ['org', projectOrg]]) {
      await attach(targets.everything.id, id, 'success', kind);
    }
    const listed = await ok(await t.api.get(`/v1/notifications/${targets.everything.id}/attachments`), 200);
    expect(listed.attachments.map((a: any) => a.object_kind).sort()).toEqual(['org', 'org', 'project', 'schedule', 'template']);

    const run = await launch(tpl.id);
    await waitForRunEnd(t.api, run.id);
    const deliveries = await settledDeliveries(run.id, 4);
    // A launch is not the schedule's fire: the target on the schedule alone hears nothing.
    expect(deliveries.map((d) => d.target_id).sort()).toEqual(
      [targets.project.id, targets['template org'].id, targets['project org'].id, targets.everything.id].sort(),
    );
    expect(deliveries.every((d) => d.status === 'arrived')).toBe(true);
  });

  test.each([
    ['schedule', 'schedule.deleted', 'schedule_id'],
    ['project', 'project.deleted', 'project_id'],
    ['org', 'org.deleted', 'org_id'],
  ])('deleting a %s removes its attachments, and its audit entry says how many and of which targets', async (kind, entryKind, idField) => {
    const object =
      kind === 'schedule' ? (await schedule((await template(`for a ${kind}`)).id)).id : kind === 'project' ? (await project()).id : await org(t.api);
    const a = await target({ name: `${kind} del a`, kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    const b = await target({ name: `${kind} del b`, kind: 'email', to: 'ops@example.test' });
    await attach(a.id, object, 'failure', kind);
    await attach(a.id, object, 'success', kind);
    await attach(b.id, object, 'failure', kind);
    const route = { schedule: 'schedules', project: 'projects', org: 'orgs' }[kind];
    expect((await t.api.request('DELETE', `/v1/${route}/${object}`)).status).toBe(204);
    expect((await t.api.get(`/v1/notifications/${a.id}/attachments`)).body.total).toBe(0);
    expect((await t.api.get(`/v1/notifications/${b.id}/attachments`)).body.total).toBe(0);
    expect((await t.api.get(`/v1/notifications/${b.id}`)).status).toBe(200);
    expect(await deletePath(entryKind, idField, object)).toBe(`/v1/${route}/${object}?notification_attachments=3&notification_targets=${[a.id, b.id].sort().join(',')}`);
  });

  test.each(['schedule', 'project', 'org'])('a %s delete that finds its attachments changed after its entry was written deletes nothing and answers 409', async (kind) => {
    const object =
      kind === 'schedule' ? (await schedule((await template(`raced ${kind}`)).id)).id : kind === 'project' ? (await project()).id : await org(t.api);
    const route = { schedule: 'schedules', project: 'projects', org: 'orgs' }[kind];
    const a = await target({ name: `race ${kind}`, kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    const first = await attach(a.id, object, 'failure', kind);
    await attach(a.id, object, 'success', kind);
    const res = await deleteWhileAttachmentChanges(first.id, `/v1/${route}/${object}`);
    expect(res.status).toBe(409);
    expect(res.body.error).toContain('changed');
    expect((await t.api.get(kind === 'org' ? `/v1/orgs/${object}/members` : `/v1/${route}/${object}`)).status).toBe(200);
    expect((await t.api.get(`/v1/notifications/${a.id}/attachments`)).body.total).toBe(1);
  });
});

/**
 * Deletes through `path` while another writer holds one of the object's attachments and then
 * removes it: the delete has read the attachments and waits on the held row when it goes.
 */
async function deleteWhileAttachmentChanges(attachmentId: string, path: string) {
  const other = connectDatabase(t.databaseUrl, { max: 1 });
  try {
    let release!: () => void;
    let locked!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const lockTaken = new Promise<void>((r) => (locked = r));
    const writer = other.begin(async (tx) => {
      await tx`SELECT id FROM notification_attachments WHERE id = ${attachmentId} FOR UPDATE`;
      locked();
      await held;
      await tx`DELETE FROM notification_attachments WHERE id = ${attachmentId}`;
    });
    await lockTaken;
    const deleting = t.api.request('DELETE', path);
    for (let i = 0; ; i++) {
      const [{ n }] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%DELETE FROM notification_attachments WHERE object_kind%'`;
      if (n > 0) break;
      if (i > 200) {
        release();
        throw new Error('the delete never waited on the attachment');
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    release();
    await writer;
    return await deleting;
  } finally {
    await other.end();
  }
}

describe('access to targets', () => {
  let operator: Person;
  let as: ApiClient;
  beforeAll(async () => {
    operator = await person(t.api, 'operator');
    as = t.as(operator.token);
  });

  const put = (api: ApiClient, id: string, body: unknown) => api.request('PUT', `/v1/notifications/${id}`, { body });
  const attachAs = (api: ApiClient, id: string, kind: string, objectId: string) =>
    api.post(`/v1/notifications/${id}/attachments`, { object_kind: kind, object_id: objectId, event: 'failure' });

  test('a manage grant on a target lets an operator edit, attach to what it manages, detach and delete it', async () => {
    const hook = await target({ name: 'granted hook', kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    const tpl = await template('granted template');
    expect((await put(as, hook.id, { ...hook, name: 'renamed' })).status).toBe(403);
    await grant(t.api, hook.id, 'manage', { user_id: operator.id });
    const edited = await put(as, hook.id, { ...hook, name: 'renamed by a manager' });
    expect(edited).toMatchObject({ status: 200, body: { name: 'renamed by a manager', url: receiver.url } });

    // Attaching needs management of the object too: one the operator may not read is not found, one it reads is refused.
    expect((await attachAs(as, hook.id, 'template', tpl.id)).status).toBe(404);
    await grant(t.api, tpl.id, 'read', { user_id: operator.id });
    const refused = await attachAs(as, hook.id, 'template', tpl.id);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ required_grant: 'manage', object: tpl.id });
    await grant(t.api, tpl.id, 'manage', { user_id: operator.id });
    const attached = await attachAs(as, hook.id, 'template', tpl.id);
    expect(attached.status).toBe(201);
    expect((await as.request('DELETE', `/v1/notifications/${hook.id}/attachments/${attached.body.id}`)).status).toBe(204);

    // A schedule or an organization is admin work, whatever the caller manages.
    const sch = await schedule(tpl.id);
    for (const [kind, id] of [['schedule', sch.id], ['org', await org(t.api, [[operator, 'admin']])]]) {
      const res = await attachAs(as, hook.id, kind, id);
      expect(res.status).toBe(403);
      expect(res.body.error).toContain('admin');
    }
    expect((await as.request('DELETE', `/v1/notifications/${hook.id}`)).status).toBe(204);
    expect((await t.api.get(`/v1/notifications/${hook.id}`)).status).toBe(404);
  });

  test('use of a target attaches it to a template the operator manages, but does not edit or delete it', async () => {
    const hook = await target({ name: 'used hook', kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    const tpl = await ok(await as.post('/v1/templates', { name: `operator's ${randomBytes(3).toString('hex')}`, tool: 'bash', command: 'true' }));
    expect((await attachAs(as, hook.id, 'template', tpl.id)).status).toBe(403);
    await grant(t.api, hook.id, 'use', { user_id: operator.id });
    const attached = await attachAs(as, hook.id, 'template', tpl.id);
    expect(attached.status).toBe(201);
    expect((await put(as, hook.id, { ...hook, name: 'not mine' })).status).toBe(403);
    expect((await as.request('DELETE', `/v1/notifications/${hook.id}`)).status).toBe(403);
    // An attachment made by an admin to a template the operator does not manage stays out of its reach.
    const other = await template('not the operator\'s');
    const foreign = await attach(hook.id, other.id, 'success');
    expect((await as.request('DELETE', `/v1/notifications/${hook.id}/attachments/${foreign.id}`)).status).toBe(404);
  });

  test('members of the target\'s organization use it; its admins manage it', async () => {
    const member = await person(t.api, 'operator');
    const admin = await person(t.api, 'operator');
    const orgId = await org(t.api, [[member, 'member'], [admin, 'admin']]);
    const mail = await target({ name: 'org mail', kind: 'email', to: 'org@example.test', org_id: orgId });
    const tpl = await ok(await t.as(member.token).post('/v1/templates', { name: `member's ${randomBytes(3).toString('hex')}`, tool: 'bash', command: 'true' }));
    expect((await attachAs(t.as(member.token), mail.id, 'template', tpl.id)).status).toBe(201);
    expect((await put(t.as(member.token), mail.id, { ...mail, name: 'member edit' })).status).toBe(403);
    expect((await put(t.as(admin.token), mail.id, { ...mail, name: 'org admin edit' })).status).toBe(200);
  });

  test('the deliveries of a target leave out runs the caller may not read', async () => {
    const hook = await target({ name: 'deliveries seen', kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    const readable = await template('deliveries readable');
    const hidden = await template('deliveries hidden');
    await grant(t.api, readable.id, 'read', { user_id: operator.id });
    await attach(hook.id, readable.id, 'success');
    await attach(hook.id, hidden.id, 'success');
    const seen = await launch(readable.id);
    const unseen = await launch(hidden.id);
    for (const run of [seen, unseen]) {
      await waitForRunEnd(t.api, run.id);
      await settledDeliveries(run.id, 1);
    }
    const all = await ok(await t.api.get(`/v1/notifications/${hook.id}/deliveries`), 200);
    expect(all.deliveries.map((d: any) => d.run_id).sort()).toEqual([seen.id, unseen.id].sort());
    const mine = await ok(await as.get(`/v1/notifications/${hook.id}/deliveries`), 200);
    expect(mine).toMatchObject({ count: 1, total: 1, deliveries: [{ run_id: seen.id }] });
  });
});

describe('concurrent edits of a target', () => {
  test('a read carries the target\'s version; a PUT sending a stale one answers 409 and changes nothing', async () => {
    const hook = await target({ name: 'versioned', kind: 'webhook', url: `${receiver.url}${secretPath()}` });
    expect(hook.version).toBe(1);
    const first = await ok(await t.api.request('PUT', `/v1/notifications/${hook.id}`, { body: { ...hook, name: 'first edit' } }), 200);
    expect(first).toMatchObject({ name: 'first edit', version: 2 });
    const stale = await t.api.request('PUT', `/v1/notifications/${hook.id}`, { body: { ...hook, name: 'stale edit' } });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ field: 'version', version: 2 });
    expect(await ok(await t.api.get(`/v1/notifications/${hook.id}`), 200)).toMatchObject({ name: 'first edit', version: 2 });
    // Without a version, a PUT replaces what it finds.
    const { version, ...unversioned } = first;
    expect(version).toBe(2);
    expect(await ok(await t.api.request('PUT', `/v1/notifications/${hook.id}`, { body: { ...unversioned, name: 'last edit' } }), 200)).toMatchObject({ version: 3 });
  });

  test('an edit that finds the target changed while it was being saved answers 409 and keeps the other edit\'s url', async () => {
    const hook = await target({ name: 'raced', kind: 'webhook', url: `${receiver.url}/old${secretPath()}` });
    const other = connectDatabase(t.databaseUrl, { max: 1 });
    try {
      let release!: () => void;
      let locked!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const lockTaken = new Promise<void>((r) => (locked = r));
      // Another edit holds the row, changes its url and name, and commits once this PUT waits on it.
      const writer = other.begin(async (tx) => {
        await tx`SELECT id FROM notification_targets WHERE id = ${hook.id} FOR UPDATE`;
        locked();
        await held;
        await tx`UPDATE notification_targets SET name = 'the other edit', url_hint = 'http://other.example', version = version + 1 WHERE id = ${hook.id}`;
      });
      await lockTaken;
      const editing = t.api.request('PUT', `/v1/notifications/${hook.id}`, { body: { ...hook, name: 'this edit' } });
      for (let i = 0; ; i++) {
        const [{ n }] = await sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%FROM notification_targets WHERE id%FOR UPDATE%'`;
        if (n > 0) break;
        if (i > 200) {
          release();
          throw new Error('the edit never waited on the target');
        }
        await new Promise((r) => setTimeout(r, 25));
      }
      release();
      await writer;
      const res = await editing;
      expect(res.status).toBe(409);
      expect(res.body.error).toContain('changed');
    } finally {
      await other.end();
    }
    expect(await ok(await t.api.get(`/v1/notifications/${hook.id}`), 200)).toMatchObject({ name: 'the other edit', url: 'http://other.example', version: 2 });
  });
});

describe('what each kind receives', () => {
  test('chat, card, topic and webhook kinds each get their service\'s shape; the topic raises its priority on failure', async () => {
    const tpl = await template('every kind', 'echo failing; exit 3');
    const kinds = ['webhook', 'chat_a', 'chat_b', 'chat_c', 'chat_d', 'chat_e', 'topic'];
    const paths: Record<string, string> = {};
    for (const kind of kinds) {
      paths[kind] = `/${kind}${secretPath()}`;
      const created = await target({ name: `every ${kind}`, kind, url: `${receiver.url}${paths[kind]}` });
      await attach(created.id, tpl.id, 'failure');
    }
    const run = await launch(tpl.id);
    await waitForRunEnd(t.api, run.id);
    await receiver.waitFor((r) => kinds.every((k) => r.some((x) => x.path === paths[k])), 20_000, 'every kind');
    const got = (kind: string) => receiver.received.find((x) => x.path === paths[kind])!;
    const headline = `Run ${run.id} failed: exited with code 3`;
    expect(got('webhook').json).toMatchObject({ event: 'run.finished', run: { id: run.id, status: 'failed' }, delivery: { id: expect.any(String) } });
    expect(got('chat_a').json).toMatchObject({ text: headline, blocks: [{ type: 'section', text: { type: 'mrkdwn', text: expect.stringContaining(headline) } }] });
    expect(got('chat_b').json).toMatchObject({ username: 'Cairn', text: expect.stringContaining(headline) });
    expect(got('chat_c').json).toMatchObject({ username: 'Cairn', content: expect.stringContaining(headline) });
    expect(got('chat_d').json).toMatchObject({
      type: 'message',
      attachments: [
        {
          contentType: 'application/vnd.microsoft.card.adaptive',
          content: { type: 'AdaptiveCard', body: expect.arrayContaining([expect.objectContaining({ text: headline, color: 'Attention' })]) },
        },
      ],
    });
    expect(got('chat_e').json).toMatchObject({ text: headline, cardsV2: [{ card: { header: { subtitle: headline } } }] });
    const topic = got('topic');
    expect(topic.headers).toMatchObject({ title: headline, priority: '5', 'content-type': 'text/plain; charset=utf-8' });
    expect(topic.body).toContain(`GET /v1/runs/${run.id}`);
    for (const kind of kinds) expect(got(kind).headers['idempotency-key']).toMatch(new RegExp(`^ntf_\\w+/${run.id}/\\d+$`));
  });

  test('incident: a trigger on the routing key for a failed run with the run as dedup key; never a success or a hold', async () => {
    const tpl = await template('incident kinds', 'exit 1');
    const okTpl = await template('incident success');
    const incident = await target({ name: 'pager', kind: 'incident', key: 'R0UTINGKEY0123456789' });
    await attach(incident.id, tpl.id, 'failure');
    await attach(incident.id, okTpl.id, 'success');
    const failed = await launch(tpl.id);
    const succeeded = await launch(okTpl.id);
    await waitForRunEnd(t.api, failed.id);
    await waitForRunEnd(t.api, succeeded.id);
    await receiver.waitFor((r) => r.some((x) => x.path === '/v2/enqueue'), 20_000, 'an incident');
    const [skipped] = await settledDeliveries(succeeded.id, 1);
    expect(skipped).toMatchObject({ status: 'skipped', reason: 'not sent: an incident target hears failed and interrupted runs only' });
    const sent = receiver.received.filter((x) => x.path === '/v2/enqueue');
    expect(sent).toHaveLength(1);
    expect(sent[0].json).toMatchObject({
      routing_key: 'R0UTINGKEY0123456789',
      event_action: 'trigger',
      dedup_key: `cairn/${failed.id}`,
      payload: { source: 'cairn', severity: 'error', summary: expect.stringContaining(failed.id) },
    });
  });

  test('annotation: posted to the instance\'s annotations API with the token; sms through the account; email through SMTP', async () => {
    const tpl = await template('annotation sms email', 'exit 2');
    const annotation = await target({ name: 'grafana', kind: 'annotation', url: `${receiver.url}/grafana`, key: 'glsa_TOKEN_abc' });
    const sms = await target({ name: 'on call phone', kind: 'sms', to: '+15557654321' });
    const mail = await target({ name: 'ops mail', kind: 'email', to: 'ops@example.test, lead@example.test' });
    for (const id of [annotation.id, sms.id, mail.id]) await attach(id, tpl.id, 'failure');
    smtp.mails.length = 0;
    const run = await launch(tpl.id);
    await waitForRunEnd(t.api, run.id);
    await settledDeliveries(run.id, 3);
    const posted = receiver.received.find((x) => x.path === '/grafana/api/annotations')!;
    expect(posted.headers.authorization).toBe('Bearer glsa_TOKEN_abc');
    expect(posted.json).toMatchObject({ tags: ['cairn', 'run.finished', 'failed', 'bash'], text: expect.stringContaining(run.id), time: expect.any(Number) });
    const text = receiver.received.find((x) => x.path === '/2010-04-01/Accounts/AC0123/Messages.json')!;
    expect(text.headers.authorization).toBe(`Basic ${Buffer.from(`AC0123:${SMS_TOKEN}`).toString('base64')}`);
    const form = new URLSearchParams(text.body);
    expect(form.get('To')).toBe('+15557654321');
    expect(form.get('From')).toBe('+15550001111');
    expect(form.get('Body')).toContain(`Run ${run.id} failed`);
    expect(smtp.mails).toHaveLength(1);
    expect(smtp.mails[0]).toMatchObject({ from: 'cairn@example.test', to: ['ops@example.test', 'lead@example.test'], user: 'cairn-mail' });
    // Long header lines are folded onto a continuation line.
    expect(smtp.mails[0].data.replace(/\r?\n /g, ' ')).toContain(`Subject: [Cairn] Run ${run.id} failed: exited with code 2`);
  });
});

describe('holds and approval steps', () => {
  test('a held run reaches webhook, chat and email targets attached for approval, never incident or sms', async () => {
    const tpl = await template('held template', 'echo needs-approval');
    const hook = await target({ name: 'hold hook', kind: 'webhook', url: `${receiver.url}/hold${secretPath()}` });
    const sms = await target({ name: 'hold sms', kind: 'sms', to: '+15550009999' });
    await attach(hook.id, tpl.id, 'approval');
    await attach(sms.id, tpl.id, 'approval');
    const run = await launch(tpl.id);
    expect(run.status).toBe('held');
    const deliveries = await settledDeliveries(run.id, 2);
    expect(deliveries.find((d) => d.target_id === hook.id)).toMatchObject({ status: 'arrived', event: 'run.held' });
    expect(deliveries.find((d) => d.target_id === sms.id)).toMatchObject({ status: 'skipped', reason: 'not sent: an sms target never hears holds or approval steps' });
    const held = receiver.received.find((x) => x.path.startsWith('/hold/'))!;
    expect(held.json).toMatchObject({ event: 'run.held', run: { id: run.id, status: 'held' } });
  });

  test('a workflow waiting at an approval step: the message names the workflow, the step, what it asks and what each answer runs', async () => {
    const wf = await ok(
      await t.api.post('/v1/templates', {
        name: 'release with approval',
        steps: [
          { name: 'build', tool: 'bash', command: 'true' },
          { name: 'promote', type: 'approval', description: 'promote to production?', depends_on: ['build'], if_denied: 'rollback' },
          { name: 'deploy', tool: 'bash', command: 'true', depends_on: ['promote'] },
          { name: 'rollback', tool: 'bash', command: 'true' },
        ],
      }),
    );
    const chat = await target({ name: 'approvals chat', kind: 'chat_b', url: `${receiver.url}/approvals${secretPath()}` });
    await attach(chat.id, wf.id, 'approval', 'workflow');
    const run = await launch(wf.id);
    await receiver.waitFor((r) => r.some((x) => x.path.startsWith('/approvals/')), 30_000, 'the approval message');
    const text: string = receiver.received.find((x) => x.path.startsWith('/approvals/'))!.json.text;
    expect(text).toContain(`Workflow ${run.id} waits at approval step promote`);
    expect(text).toContain('It asks: promote to production?');
    expect(text).toContain('Approving runs: deploy');
    expect(text).toContain('Denying runs: rollback');
    await t.api.post(`/v1/runs/${run.id}/cancel`);
  });

  test('a target changed to incident after a hold was recorded skips it, with why', async () => {
    t.server.context.notificationRetryBaseMs = 3000;
    try {
      const tpl = await template('held then incident', 'echo needs-approval');
      const path = `/changed${secretPath()}`;
      const hook = await target({ name: 'becomes incident', kind: 'webhook', url: `${receiver.url}${path}` });
      await attach(hook.id, tpl.id, 'approval');
      receiver.answer((r) => (r.path === path ? { status: 503 } : { status: 200 }));
      const run = await launch(tpl.id);
      await receiver.waitFor((r) => r.some((x) => x.path === path), 20_000, 'the first attempt');
      const edited = await t.api.request('PUT', `/v1/notifications/${hook.id}`, { body: { name: 'becomes incident', kind: 'incident', key: 'ROUTING' } });
      expect(edited.status).toBe(200);
      const [delivery] = await settledDeliveries(run.id, 1);
      expect(delivery).toMatchObject({ status: 'skipped', reason: 'not sent: an incident target never hears holds or approval steps', attempts: 1 });
      expect(receiver.received.filter((x) => x.path === path)).toHaveLength(1);
    } finally {
      t.server.context.notificationRetryBaseMs = 200;
    }
  });
});

describe('a schedule\'s skipped fire', () => {
  /** An ansible template whose limit selects no host of its inventory: its schedule's fires are skipped. */
  async function hostlessTemplate(name: string) {
    const suffix = randomBytes(3).toString('hex');
    const inventory = await ok(await t.api.post('/v1/inventories', { name: `${name} inventory ${suffix}`, content: '[web]\nweb1 ansible_connection=local\n' }));
    const play = '- hosts: all\n  gather_facts: false\n  tasks: [{ ansible.builtin.ping: }]\n';
    const tpl = await ok(await t.api.post('/v1/templates', { name: `${name} ${suffix}`, tool: 'ansible', command: play, inventory_id: inventory.id, limit: 'db' }));
    return { inventory, tpl };
  }

  /** A target's deliveries, once at least `count` exist and every one has finished. */
  const settledTargetDeliveries = (targetId: string, count: number) =>
    waitUntil(`${count} finished deliveries to ${targetId}`, async () => {
      const { deliveries } = await ok(await t.api.get(`/v1/notifications/${targetId}/deliveries`), 200);
      return deliveries.length >= count && deliveries.every((d: any) => ['arrived', 'failed', 'skipped'].includes(d.status)) && deliveries;
    });

  test('is told once as schedule.skipped to targets attached for skipped or, on the schedule, for failure; never to one attached for started; an incident target skips it with why', async () => {
    const { inventory, tpl } = await hostlessTemplate('skipped fire');
    const hookPath = `/skip${secretPath()}`;
    const failurePath = `/skip-failure${secretPath()}`;
    const startedPath = `/skip-started${secretPath()}`;
    const hook = await target({ name: 'skip hook', kind: 'webhook', url: `${receiver.url}${hookPath}` });
    const failureHook = await target({ name: 'schedule failure hook', kind: 'webhook', url: `${receiver.url}${failurePath}` });
    const startedHook = await target({ name: 'schedule started hook', kind: 'webhook', url: `${receiver.url}${startedPath}` });
    const pager = await target({ name: 'skip pager', kind: 'incident', key: 'R0UTINGKEYSKIP' });
    // One fire, a few seconds out; the targets are attached before it.
    const { rrule, start } = soonRule('FREQ=SECONDLY;INTERVAL=2;COUNT=1', 3);
    const sch = await ok(await t.api.post('/v1/schedules', { name: `hostless ${randomBytes(3).toString('hex')}`, rrule, template_id: tpl.id }));
    // Attached three ways, told once.
    await attach(hook.id, sch.id, 'skipped', 'schedule');
    await attach(hook.id, sch.id, 'failure', 'schedule');
    await attach(hook.id, tpl.id, 'skipped');
    await attach(failureHook.id, sch.id, 'failure', 'schedule');
    for (const event of ['started', 'success', 'approval']) await attach(startedHook.id, sch.id, event, 'schedule');
    await attach(pager.id, sch.id, 'skipped', 'schedule');

    const fireId = `${sch.id}@${start.toISOString()}`;
    const [delivered] = await settledTargetDeliveries(hook.id, 1);
    expect(delivered).toMatchObject({
      id: `${hook.id}/${fireId}/1`,
      run_id: null,
      schedule_id: sch.id,
      fire_at: start.toISOString(),
      sequence: 1,
      event: 'schedule.skipped',
      status: 'arrived',
      attempts: 1,
    });
    const [paged] = await settledTargetDeliveries(pager.id, 1);
    expect(paged).toMatchObject({ schedule_id: sch.id, status: 'skipped', reason: "not sent: an incident target never hears a schedule's skipped fires", attempts: 0 });
    expect((await settledTargetDeliveries(failureHook.id, 1))[0]).toMatchObject({ schedule_id: sch.id, status: 'arrived' });

    const told = receiver.received.filter((x) => x.path === hookPath);
    expect(told).toHaveLength(1);
    expect(told[0].json).toEqual({
      event: 'schedule.skipped',
      run: expect.objectContaining({
        kind: 'skipped_fire',
        status: 'skipped',
        error: null,
        source_id: sch.id,
        source: { kind: 'schedule', id: sch.id },
        inventory_id: inventory.id,
        template_id: tpl.id,
        fire_at: start.toISOString(),
        reason: `the limit "db" matches no host of inventory ${inventory.name}`,
      }),
      delivery: { id: `${hook.id}/${fireId}/1`, sequence: 1 },
      at: expect.any(String),
    });
    expect(told[0].json.run).not.toHaveProperty('id');
    expect(told[0].headers['idempotency-key']).toBe(`${hook.id}/${fireId}/1`);
    expect(receiver.received.filter((x) => x.path === failurePath)).toHaveLength(1);
    expect(receiver.received.some((x) => x.path === startedPath || x.path === '/v2/enqueue')).toBe(false);
    expect((await ok(await t.api.get(`/v1/notifications/${startedHook.id}/deliveries`), 200)).total).toBe(0);
    expect((await ok(await t.api.get(`/v1/schedules/${sch.id}`), 200)).last_skipped).toMatchObject({ run_id: null, at: start.toISOString() });
  });

  test('a fire skipped behind a run the schedule started that still goes is not announced', async () => {
    const hook = await target({ name: 'blocked skip hook', kind: 'webhook', url: `${receiver.url}/blocked${secretPath()}` });
    const sch = await ok(await t.api.post('/v1/schedules', { name: `slow ${randomBytes(3).toString('hex')}`, rrule: soonRule('FREQ=SECONDLY;INTERVAL=2', 2).rrule, run: { tool: 'bash', command: 'sleep 60' } }));
    await attach(hook.id, sch.id, 'skipped', 'schedule');
    const skipped = await waitUntil('a fire skipped behind the running run', async () => {
      const read = (await t.api.get(`/v1/schedules/${sch.id}`)).body;
      return read.last_skipped?.run_id && read;
    });
    // The skip and its notice would have been recorded in one transaction.
    expect((await ok(await t.api.get(`/v1/notifications/${hook.id}/deliveries`), 200)).total).toBe(0);
    expect((await t.api.request('DELETE', `/v1/schedules/${sch.id}`)).status).toBe(204);
    await t.api.post(`/v1/runs/${skipped.last_skipped.run_id}/cancel`);
  });
});

describe('delivery order and retries', () => {
  test('a run that fails at once is announced started, then failed, in that order', async () => {
    const tpl = await template('fails at once', 'exit 3');
    const path = `/fails-at-once${secretPath()}`;
    const hook = await target({ name: 'fails at once hook', kind: 'webhook', url: `${receiver.url}${path}` });
    await attach(hook.id, tpl.id, 'started');
    await attach(hook.id, tpl.id, 'failure');
    const run = await launch(tpl.id);
    expect(await waitForRunEnd(t.api, run.id)).toMatchObject({ status: 'failed', exit_code: 3 });
    await settledDeliveries(run.id, 2);
    const told = receiver.received.filter((x) => x.path === path);
    expect(told.map((x) => [x.json.event, x.json.run.status])).toEqual([
      ['run.started', 'running'],
      ['run.finished', 'failed'],
    ]);
    expect(told[0].json.delivery.sequence).toBeLessThan(told[1].json.delivery.sequence);
  });

  test('a receiver failing the second event gets the third only after the second\'s retries end; the key repeats exactly', async () => {
    const tpl = await template('ordered under failure', 'echo needs-approval');
    const path = `/ordered${secretPath()}`;
    const hook = await target({ name: 'ordered hook', kind: 'webhook', url: `${receiver.url}${path}` });
    for (const event of ['approval', 'started', 'success']) await attach(hook.id, tpl.id, event);
    receiver.answer((r) => (r.path === path && r.json?.event === 'run.started' ? { status: 500 } : { status: 200 }));
    const run = await launch(tpl.id);
    await receiver.waitFor((r) => r.some((x) => x.json?.event === 'run.held' && x.json.run.id === run.id), 20_000, 'the hold');
    await ok(await t.api.post(`/v1/runs/${run.id}/approve`, {}), 200);
    await waitForRunEnd(t.api, run.id);
    const deliveries = await settledDeliveries(run.id, 3, 60_000);
    const mine = receiver.received.filter((x) => x.path === path);
    expect(mine.map((x) => x.json.event)).toEqual(['run.held', 'run.started', 'run.started', 'run.started', 'run.started', 'run.started', 'run.finished']);
    const starts = mine.filter((x) => x.json.event === 'run.started');
    expect(new Set(starts.map((x) => x.headers['idempotency-key'])).size).toBe(1);
    expect(starts[0].headers['idempotency-key']).toBe(starts[0].json.delivery.id);
    // Four more tries, each wait twice the one before (base 200 ms here).
    const gaps = starts.slice(1).map((x, i) => x.at - starts[i].at);
    gaps.forEach((gap, i) => expect(gap).toBeGreaterThanOrEqual(200 * 2 ** i - 20));
    const finished = mine[mine.length - 1];
    expect(finished.at).toBeGreaterThanOrEqual(starts[4].at);
    expect(finished.json.delivery.note).toBe(FAILURE_NOTE);
    expect(deliveries.map((d) => [d.event, d.status, d.attempts])).toEqual([
      ['run.held', 'arrived', 1],
      ['run.started', 'failed', 5],
      ['run.finished', 'arrived', 1],
    ]);
    const failed = await ok(await t.api.get(`/v1/notifications/${hook.id}/deliveries?status=failed`), 200);
    expect(failed.deliveries).toEqual([expect.objectContaining({ id: `${hook.id}/${run.id}/${starts[0].json.delivery.sequence}`, status: 'failed', reason: 'the receiver answered 500 Internal Server Error' })]);
    const read = await ok(await t.api.get(`/v1/notifications/${hook.id}`), 200);
    expect(read.delivery).toMatchObject({ state: 'healthy', failed_last_7_days: 1, last_failure_reason: 'the receiver answered 500 Internal Server Error' });
  });

  test('a 400 is not tried again, a 429 is; the target shows failing until a delivery arrives', async () => {
    const tpl = await template('refusals');
    const path = `/refusals${secretPath()}`;
    const hook = await target({ name: 'refusing hook', kind: 'webhook', url: `${receiver.url}${path}` });
    await attach(hook.id, tpl.id, 'started');
    await attach(hook.id, tpl.id, 'success');
    receiver.answer((r, i) => (r.path !== path ? { status: 200 } : r.json.event === 'run.started' ? { status: 400 } : i % 2 === 0 ? { status: 429 } : { status: 429 }));
    const run = await launch(tpl.id);
    await waitForRunEnd(t.api, run.id);
    const deliveries = await settledDeliveries(run.id, 2, 60_000);
    expect(deliveries.map((d) => [d.event, d.status, d.attempts])).toEqual([
      ['run.started', 'failed', 1],
      ['run.finished', 'failed', 5],
    ]);
    expect((await ok(await t.api.get(`/v1/notifications/${hook.id}`), 200)).delivery).toMatchObject({ state: 'failing', failed_last_7_days: 2 });
  });

  test('a receiver that never answers is given up on after ten seconds and tried again', async () => {
    const tpl = await template('hanging receiver');
    const path = `/hang${secretPath()}`;
    const hook = await target({ name: 'slow hook', kind: 'webhook', url: `${receiver.url}${path}` });
    await attach(hook.id, tpl.id, 'success');
    let first = true;
    receiver.answer((r) => {
      if (r.path !== path) return { status: 200 };
      if (first) {
        first = false;
        return 'hang';
      }
      return { status: 200, delayMs: 50 };
    });
    const run = await launch(tpl.id);
    await waitForRunEnd(t.api, run.id);
    const [delivery] = await settledDeliveries(run.id, 1, 40_000);
    expect(delivery).toMatchObject({ status: 'arrived', attempts: 2 });
    const mine = receiver.received.filter((x) => x.path === path);
    expect(mine[1].at - mine[0].at).toBeGreaterThanOrEqual(10_000);
  });
});

describe('direct channels beside targets', () => {
  test('a template\'s own entries: checked, sealed, read back masked, kept when the mask is sent back, and told of its runs', async () => {
    const missing = await t.api.post('/v1/templates', { name: 'entry missing key', tool: 'bash', command: 'true', notifications: [{ kind: 'incident' }] });
    expect(missing).toMatchObject({ status: 400, body: { field: 'notifications[0].key' } });
    const path = `/entry${secretPath()}`;
    const created = await ok(
      await t.api.post('/v1/templates', {
        name: 'own entries',
        tool: 'bash',
        command: 'exit 4',
        notifications: [
          { kind: 'webhook', url: `${receiver.url}${path}`, on_failure: true },
          { kind: 'sms', to: '+15550002222' },
        ],
      }),
    );
    expect(created.notifications).toEqual([{ kind: 'webhook', url: receiver.url, on_failure: true }, { kind: 'sms', to: '+15550002222' }]);
    const resent = await ok(await t.api.request('PUT', `/v1/templates/${created.id}`, { body: { ...created, name: 'own entries, renamed' } }), 200);
    expect(resent.notifications).toEqual(created.notifications);
    const run = await launch(created.id);
    await waitForRunEnd(t.api, run.id);
    await receiver.waitFor((r) => r.some((x) => x.path === path), 20_000, 'the entry\'s webhook');
    const sent = receiver.received.find((x) => x.path === path)!;
    expect(sent.json).toMatchObject({ event: 'run.finished', run: { id: run.id, status: 'failed' } });
    // Direct delivery is best effort: no delivery id, nothing recorded for the run's targets.
    expect(sent.json.delivery).toBeUndefined();
    expect((await ok(await t.api.get(`/v1/runs/${run.id}/notifications`), 200)).events.flatMap((e: any) => e.deliveries)).toEqual([]);
  });

  test('the server-wide channel hears what --notify-on names: a failure, not a success', async () => {
    const failing = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'echo server-channel-failure; exit 9' }));
    const passing = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'true' }));
    await waitForRunEnd(t.api, failing.id);
    await waitForRunEnd(t.api, passing.id);
    await receiver.waitFor((r) => r.some((x) => x.path === '/server-channel' && x.json.text.includes(failing.id)), 20_000, 'the server channel');
    await new Promise((r) => setTimeout(r, 500));
    const told = receiver.received.filter((x) => x.path === '/server-channel').map((x) => x.json.text as string);
    expect(told.some((text) => text.startsWith(`Run ${failing.id} failed: exited with code 9`))).toBe(true);
    expect(told.some((text) => text.includes(passing.id))).toBe(false);
  });
});
