import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { connectDatabase, type Sql } from '../../store/db';
import { claimAlert } from '../../store/attention';
import { grant, person, type Person } from '../support/access';
import { testLicense } from '../support/license';
import { ok } from '../support/notifications';
import { startReceiver, type Receiver } from '../support/receivers';
import { createLogger, type RunningServer } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { startServerInProcess, startTestServer, testSettings, waitForRun, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

/**
 * `GET /v1/attention` and its alerts (spec part A 2.12, 3.3, 4.2; part B 6.6) on a real server
 * with one slot in its pool and tiny thresholds: a held run, a workflow waiting at an approval
 * step and a run waiting behind a full pool each show their blocker and alert once to a target
 * attached for `attention`.
 */

let t: TestServer;
let sql: Sql;
let receiver: Receiver;
let operator: Person;
let viewer: Person;
const made: { held: any; workflow: any; step: any; holder: any; waiting: any; operatorHeld: any; heldTemplate: string; secondHeld?: any; unserved?: any } = {} as never;
let serverEnv: Record<string, string>;
let licenseKeys: object[];
let reader: Person;

const SWEEP_MS = 250;
const attentionOf = async (api = t.api, query = '') => await ok(await api.get(`/v1/attention${query}`), 200);
const alertsFor = (runId: string) => receiver.received.filter((r) => r.json?.event === 'run.needs_attention' && r.json?.run?.id === runId);
/** The alerts recorded on the run, as its run.needs_attention events (recorded in the sweep that claims the alert). */
const alertEvents = async (runId: string) => (await ok(await t.api.get(`/v1/runs/${runId}/events?limit=1000`), 200)).events.filter((e: any) => e.event === 'run.needs_attention');

async function launch(templateId: string) {
  return ok(await t.api.post(`/v1/templates/${templateId}/launch`, {}));
}

async function itemFor(runId: string, predicate: (item: any) => boolean = () => true, timeoutMs = 20_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const item = (await attentionOf()).items.find((i: any) => i.id === runId);
    if (item && predicate(item)) return item;
    if (Date.now() > deadline) throw new Error(`no attention item for ${runId} as expected; last seen ${JSON.stringify(item)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  receiver = await startReceiver();
  const file = path.join(tempDir('cairn-attention'), 'attention.json');
  fs.writeFileSync(file, JSON.stringify({ thresholds: { approval_needed: 1, blocked: 1, no_worker: '1s' } }));
  // Team tier, for a run on a named queue no worker serves.
  const license = await testLicense('team');
  licenseKeys = [license.publicJwk];
  serverEnv = {
    CAIRN_LICENSE_FILE: license.file,
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
    CAIRN_ATTENTION_FILE: file,
    CAIRN_POOL_SIZE: '1',
    CAIRN_INCIDENT_URL: `${receiver.url}/v2/enqueue`,
  };
  // Sweeps (which record the alerts) every 250 ms rather than every 2 s, so alerts come soon after their thresholds.
  t = await startTestServer(serverEnv, { licenseKeys, sweepIntervalMs: SWEEP_MS });
  sql = connectDatabase(t.databaseUrl, { max: 2 });
  await ok(await t.api.post('/v1/policies', { name: 'holds', command_contains: 'needs-approval' }));
  const hook = await ok(await t.api.post('/v1/notifications', { name: 'on call', kind: 'webhook', url: `${receiver.url}/hooks/${randomBytes(8).toString('hex')}` }));
  const attach = async (templateId: string) =>
    await ok(await t.api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: 'template', object_id: templateId, event: 'attention' }));

  const heldTpl = await ok(await t.api.post('/v1/templates', { name: 'held', tool: 'bash', command: 'echo needs-approval' }));
  const workflowTpl = await ok(
    await t.api.post('/v1/templates', {
      name: 'gated release',
      steps: [
        { name: 'promote', type: 'approval', description: 'promote to production?' },
        { name: 'deploy', tool: 'bash', command: 'echo deployed', depends_on: ['promote'] },
      ],
    }),
  );
  const longTpl = await ok(await t.api.post('/v1/templates', { name: 'long', tool: 'bash', command: 'sleep 120' }));
  const quickTpl = await ok(await t.api.post('/v1/templates', { name: 'quick', tool: 'bash', command: 'echo quick' }));
  for (const tpl of [heldTpl, workflowTpl, longTpl, quickTpl]) await attach(tpl.id);
  // An incident target hears alerts too (spec part B 6.2 rule 4), though never a hold.
  const pager = await ok(await t.api.post('/v1/notifications', { name: 'pager', kind: 'incident', key: 'routing-key-attention' }));
  await ok(await t.api.post(`/v1/notifications/${pager.id}/attachments`, { object_kind: 'template', object_id: heldTpl.id, event: 'attention' }));

  operator = await person(t.api, 'operator');
  viewer = await person(t.api, 'viewer');
  reader = await person(t.api, 'viewer');
  await grant(t.api, heldTpl.id, 'read', { user_id: reader.id });

  made.heldTemplate = heldTpl.id;
  made.held = await launch(heldTpl.id);
  made.workflow = await launch(workflowTpl.id);
  made.holder = await launch(longTpl.id);
  await waitForRun(t.api, made.holder.id, (r) => r.status === 'running');
  made.waiting = await launch(quickTpl.id);
  made.operatorHeld = await ok(await t.as(operator.token).post('/v1/runs', { tool: 'bash', command: 'echo needs-approval by operator' }));
});

afterAll(async () => {
  for (const run of [made.holder, made.waiting, made.workflow, made.held, made.operatorHeld, made.secondHeld, made.unserved]) {
    if (run) await t.api.post(`/v1/runs/${run.id}/cancel`, {}).catch(() => undefined);
  }
  await receiver?.close();
  await sql?.end();
  await t?.stop();
});

test('a held run shows approval_needed with every field, and alerts once to the attention target', async () => {
  const item = await itemFor(made.held.id, (i) => i.alert_id !== null);
  expect(item).toMatchObject({
    kind: 'run',
    status: 'held',
    blocker: 'approval_needed',
    badges: [],
    approval: 'run',
    decision_id: made.held.id,
    subject_run_id: made.held.id,
    alert_after_seconds: 1,
    alerting: true,
    path: `/v1/runs/${made.held.id}`,
  });
  for (const field of ['interaction', 'since', 'reason', 'who_can_act', 'next', 'who_may_approve', 'on_approve', 'on_deny']) expect(item[field]).toEqual(expect.anything());
  expect(item.who_can_act).toMatch(/admin, never an agent/);
  expect(item.next).toBe(`POST /v1/runs/${made.held.id}/approve or POST /v1/runs/${made.held.id}/reject`);
  expect(item.waiting_seconds).toBeGreaterThanOrEqual(1);

  await receiver.waitFor(() => alertsFor(made.held.id).length >= 1, 20_000, 'the held run alert');
  const [alert] = alertsFor(made.held.id);
  expect(alert.json.attention).toMatchObject({
    id: item.alert_id,
    blocker: 'approval_needed',
    threshold_seconds: 1,
    path: '/v1/attention?blocker=approval_needed',
    who_can_act: item.who_can_act,
  });
  expect(alert.json.attention.summary).toMatch(new RegExp(`^Run ${made.held.id} needs attention: approval_needed`));
  expect(alert.headers['idempotency-key']).toBe(alert.json.delivery.id);
  // The incident opens one incident per condition: the alert's id is its dedup key.
  await receiver.waitFor((r) => r.some((x) => x.path === '/v2/enqueue' && x.json?.payload?.custom_details?.run_id === made.held.id), 20_000, 'the incident trigger');
  const incident = receiver.received.find((x) => x.path === '/v2/enqueue' && x.json?.payload?.custom_details?.run_id === made.held.id)!;
  expect(incident.json).toMatchObject({ routing_key: 'routing-key-attention', event_action: 'trigger', dedup_key: item.alert_id, payload: { class: 'run.needs_attention' } });
  // The event is on the run, recorded with its deliveries: one per target attached for attention.
  const told = await ok(await t.api.get(`/v1/runs/${made.held.id}/notifications`), 200);
  const event = told.events.find((e: any) => e.event === 'run.needs_attention');
  expect(event.deliveries).toHaveLength(2);
});

test('a workflow waiting at an approval step shows the step, its branches and that it is paused, and alerts once', async () => {
  const item = await itemFor(made.workflow.id, (i) => i.alert_id !== null);
  made.step = { id: item.decision_id };
  expect(item).toMatchObject({
    kind: 'workflow',
    blocker: 'approval_needed',
    approval: 'workflow_step',
    step: 'promote',
    other_branches_running: false,
    paused: true,
    on_approve: ['deploy'],
    on_deny: [],
  });
  expect(item.decision_id).not.toBe(made.workflow.id);
  expect(item.subject_run_id).toBe(item.decision_id);
  await receiver.waitFor(() => alertsFor(made.workflow.id).length >= 1, 20_000, 'the workflow step alert');
  expect(alertsFor(made.workflow.id)[0].json.attention).toMatchObject({ id: item.alert_id, blocker: 'approval_needed', subject_run_id: item.decision_id });
});

test('a run waiting behind a full pool is blocked behind the run holding the slot, and alerts once', async () => {
  const item = await itemFor(made.waiting.id, (i) => i.blocker === 'blocked' && i.alert_id !== null, 30_000);
  expect(item).toMatchObject({ kind: 'run', status: 'pending', blocker: 'blocked', holder_run_id: made.holder.id, queue: '', alert_after_seconds: 1, alerting: true });
  expect(item.reason).toContain(made.holder.id);
  await receiver.waitFor(() => alertsFor(made.waiting.id).length >= 1, 20_000, 'the blocked run alert');
  expect(alertsFor(made.waiting.id)[0].json.attention).toMatchObject({ blocker: 'blocked', id: item.alert_id });
  // The holder itself runs normally: nothing holds it.
  expect((await attentionOf()).items.find((i: any) => i.id === made.holder.id)).toBeUndefined();
});

test('each condition alerts exactly once across later sweeps, and a second claim of one changes nothing', async () => {
  await receiver.waitFor(() => [made.held, made.workflow, made.waiting].every((r) => alertsFor(r.id).length >= 1), 30_000, 'all three alerts');
  // Three sweeps more (besides the periodic ones) find each condition alerted already: still one each.
  for (let i = 0; i < 3; i++) await t.server.sweepOnce();
  for (const run of [made.held, made.workflow, made.waiting]) {
    expect(await alertEvents(run.id)).toHaveLength(1);
    expect(alertsFor(run.id)).toHaveLength(1);
  }
  const [row] = await sql`SELECT * FROM attention_alerts WHERE run_id = ${made.held.id}`;
  expect(await claimAlert(sql, { run_id: row.run_id, condition: row.condition, id: 'att_other', blocker: row.blocker, subject_id: row.subject_id, since: row.since, threshold_seconds: 1 })).toBe(false);
  expect((await sql`SELECT count(*)::int AS n FROM attention_alerts WHERE run_id = ${made.held.id}`)[0].n).toBe(1);
});

test('only what the caller may read: a viewer without access sees none of it, an operator only its own run', async () => {
  await itemFor(made.operatorHeld.id);
  const asAdmin = await attentionOf();
  expect(asAdmin.items.map((i: any) => i.id)).toEqual(expect.arrayContaining([made.held.id, made.workflow.id, made.operatorHeld.id]));

  const asOperator = await attentionOf(t.as(operator.token));
  expect(asOperator.items.map((i: any) => i.id)).toEqual([made.operatorHeld.id]);
  expect(asOperator.counts).toEqual({ worker_lost: 0, no_worker: 0, approval_needed: 1, blocked: 0 });
  expect(asOperator.total).toBe(1);

  const asViewer = await attentionOf(t.as(viewer.token));
  expect(asViewer).toMatchObject({ items: [], count: 0, total: 0, counts: { worker_lost: 0, no_worker: 0, approval_needed: 0, blocked: 0 } });
  expect((await t.as(null).get('/v1/attention')).status).toBe(401);

  // A viewer granted read on the held run's template sees that run, and nothing else.
  const asReader = await attentionOf(t.as(reader.token));
  expect(asReader.items.map((i: any) => i.id)).toEqual([made.held.id]);
  expect(asReader.counts.approval_needed).toBe(1);
});

test('counts per blocker, thresholds, the blocker filter and paging', async () => {
  await itemFor(made.waiting.id, (i) => i.blocker === 'blocked');
  const all = await attentionOf();
  expect(all.thresholds).toEqual({ worker_lost: 60, no_worker: 1, approval_needed: 1, blocked: 1 });
  expect(all.counts.approval_needed).toBe(3);
  expect(all.counts.blocked).toBe(1);
  expect(all.total).toBe(4);
  // In the order of spec part A 3.3: approvals before blocked.
  expect(all.items.map((i: any) => i.blocker)).toEqual(['approval_needed', 'approval_needed', 'approval_needed', 'blocked']);

  const blocked = await attentionOf(t.api, '?blocker=blocked');
  expect(blocked).toMatchObject({ count: 1, total: 1, has_more: false, next_offset: null });
  expect(blocked.items[0].id).toBe(made.waiting.id);
  expect(blocked.counts).toEqual(all.counts);

  const page = await attentionOf(t.api, '?limit=2&offset=1');
  expect(page).toMatchObject({ count: 2, total: 4, has_more: true, next_offset: 3 });
  expect(page.items.map((i: any) => i.id)).toEqual(all.items.slice(1, 3).map((i: any) => i.id));

  const bad = await t.api.get('/v1/attention?blocker=stuck');
  expect(bad.status).toBe(400);
  expect(bad.body).toMatchObject({ field: 'blocker' });
  expect(bad.body.error).toMatch(/worker_lost, no_worker, approval_needed, blocked/);
  expect((await t.api.get('/v1/attention?limit=0')).body).toMatchObject({ field: 'limit' });
  expect((await t.api.get('/v1/attention?sort=x')).body).toMatchObject({ field: 'sort' });
});

test('approving the held run clears its item', async () => {
  await ok(await t.api.post(`/v1/runs/${made.held.id}/approve`, {}), 200);
  const deadline = Date.now() + 10_000;
  while ((await attentionOf()).items.some((i: any) => i.id === made.held.id && i.blocker === 'approval_needed')) {
    if (Date.now() > deadline) throw new Error('the approved run is still listed as needing approval');
    await new Promise((r) => setTimeout(r, 100));
  }
});

test('a second server on the same database alerts nothing already alerted, and a new condition alerts once between the two', async () => {
  const before = [made.workflow, made.waiting].map((r) => alertsFor(r.id).length);
  const config = loadConfig({}, testSettings(t.databaseUrl, { ...serverEnv, CAIRN_POOL_QUEUE: t.config.poolQueue }));
  let other: RunningServer | undefined;
  try {
    other = await startServerInProcess(config, createLogger(config), { licenseKeys, sweepIntervalMs: SWEEP_MS });
    made.secondHeld = await launch(made.heldTemplate);
    await receiver.waitFor(() => alertsFor(made.secondHeld.id).length >= 1, 20_000, 'the new held run alert');
    // Sweeps of both servers, racing, find it alerted already.
    for (let i = 0; i < 2; i++) await Promise.all([t.server.sweepOnce(), other.sweepOnce()]);
    for (const run of [made.secondHeld, made.workflow, made.waiting]) expect(await alertEvents(run.id)).toHaveLength(1);
    expect(alertsFor(made.secondHeld.id)).toHaveLength(1);
    expect([made.workflow, made.waiting].map((r) => alertsFor(r.id).length)).toEqual(before);
    expect(before).toEqual([1, 1]);
  } finally {
    await other?.stop();
  }
});

test('a run on a queue no worker serves shows no_worker with its queue, alerting past its threshold', async () => {
  made.unserved = await ok(await t.api.post('/v1/runs', { tool: 'bash', command: 'echo nobody', queue: 'nobody-serves-this' }));
  const item = await itemFor(made.unserved.id, (i) => i.alerting);
  expect(item).toMatchObject({ kind: 'run', status: 'pending', blocker: 'no_worker', queue: 'nobody-serves-this', eligible_workers: 0, alert_after_seconds: 1 });
  expect(item.next).toContain('cairn worker --queue nobody-serves-this');
  expect((await attentionOf(t.api, '?blocker=no_worker')).items.map((i: any) => i.id)).toEqual([made.unserved.id]);
  // Its alert is recorded once as the run's event, though no target is attached to a plain run.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const events = (await t.api.get(`/v1/runs/${made.unserved.id}/events`)).body.events;
    const alerts = events.filter((e: any) => e.event === 'run.needs_attention');
    if (alerts.length === 1) {
      expect(alerts[0].attention).toMatchObject({ blocker: 'no_worker', threshold_seconds: 1 });
      break;
    }
    if (Date.now() > deadline) throw new Error(`no alert event on ${made.unserved.id}: ${JSON.stringify(events)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
});

test('a schedule whose fires are skipped behind a run it started is blocked, and the alert on that run names it', async () => {
  const tpl = await ok(await t.api.post('/v1/templates', { name: 'scheduled gate', tool: 'bash', command: 'echo needs-approval scheduled' }));
  const hook = await ok(await t.api.post('/v1/notifications', { name: 'schedule hook', kind: 'webhook', url: `${receiver.url}/hooks/${randomBytes(8).toString('hex')}` }));
  await ok(await t.api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: 'template', object_id: tpl.id, event: 'attention' }));
  const start = new Date(Date.now() + 2000);
  const stamp = start.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const schedule = await ok(await t.api.post('/v1/schedules', { name: 'nightly gate', rrule: `DTSTART:${stamp}\nRRULE:FREQ=SECONDLY;INTERVAL=2`, template_id: tpl.id }));
  try {
    const item = await itemFor(schedule.id, (i) => i.alert_id !== null, 30_000);
    expect(item).toMatchObject({ kind: 'schedule', blocker: 'blocked', schedule_id: schedule.id, schedule_name: 'nightly gate', path: `/v1/schedules/${schedule.id}`, alerting: true });
    const heldRunId = item.holder_run_id;
    expect(heldRunId).toMatch(/^run_/);
    expect(item.reason).toMatch(/skipped/);
    await receiver.waitFor(() => alertsFor(heldRunId).some((r) => r.json.attention.schedule_id === schedule.id), 20_000, 'the schedule alert');
    expect(alertsFor(heldRunId).find((r) => r.json.attention.schedule_id)!.json.attention).toMatchObject({
      id: item.alert_id,
      blocker: 'blocked',
      schedule_name: 'nightly gate',
      path: '/v1/attention?blocker=blocked',
    });
    // A viewer who may not read the schedule does not see it.
    expect((await attentionOf(t.as(viewer.token))).items).toEqual([]);
    await t.api.request('DELETE', `/v1/schedules/${schedule.id}`);
    await t.api.post(`/v1/runs/${heldRunId}/reject`, { reason: 'not now' });
  } finally {
    await t.api.request('DELETE', `/v1/schedules/${schedule.id}`);
  }
});
