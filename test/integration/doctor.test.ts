import { execFile } from 'node:child_process';
import { person, tokenOf } from '../support/access';
import { connectDatabase } from '../../store/db';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/** `GET /v1/doctor`: the install's checks and findings, admin only (spec part A 4.15, 2.6, 4.16; part B 6.3, 9.5). */

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

const doctor = async () => {
  const res = await t.api.get('/v1/doctor');
  if (res.status !== 200) throw new Error(`doctor: ${res.status} ${res.text}`);
  return res.body;
};
const check = (answer: any, name: string) => answer.checks.find((c: any) => c.name === name);

/** What `ansible-inventory --version` says on this machine, null without it. */
const localCoreVersion = () =>
  new Promise<string | null>((resolve) =>
    execFile('ansible-inventory', ['--version'], (err, stdout) => resolve(err ? null : (/\[core ([^\]]+)\]/.exec(String(stdout))?.[1] ?? null))),
  );

test('only an admin reads it: 401 without a token, 403 naming the role below admin', async () => {
  expect((await t.as(null).get('/v1/doctor')).status).toBe(401);
  const viewer = await person(t.api, 'viewer');
  const operator = await person(t.api, 'operator');
  for (const token of [viewer.token, await tokenOf(t.api, operator, 'agent')]) {
    const res = await t.as(token).get('/v1/doctor');
    expect(res.status).toBe(403);
    expect(res.body.required_role).toBe('admin');
  }
  const unknown = await t.api.get('/v1/doctor?verbose=1');
  expect(unknown.status).toBe(400);
  expect(unknown.body.field).toBe('verbose');
});

test('an admin gets every check, the install healthy, and the ansible versions', async () => {
  const answer = await doctor();
  expect(answer).toMatchObject({ ok: true, checked_at: expect.any(String), ansible: { tested_releases: ['2.14'] } });
  expect(answer.checks.map((c: any) => c.name)).toEqual([
    'database',
    'open_install',
    'temporal',
    'workers',
    'encryption_key',
    'signing_key',
    'audit_chain',
    'ansible',
    'run_bounds',
    'attention_alerting',
    'notification_deliveries_failed',
    'notification_attachments_orphaned',
    'schedules_broken',
    'owed_effects_late',
  ]);
  for (const c of answer.checks) {
    expect(['info', 'warning', 'error']).toContain(c.severity);
    expect(typeof c.detail).toBe('string');
  }
  for (const name of ['database', 'temporal', 'workers']) expect(check(answer, name)).toMatchObject({ ok: true, severity: 'error' });
  expect(check(answer, 'workers').items).toContainEqual(expect.objectContaining({ queue: '', fresh: expect.any(Number) }));
  expect(check(answer, 'audit_chain').facts).toMatchObject({ length: expect.any(Number), verified_size: expect.any(Number) });
  expect(check(answer, 'attention_alerting').facts.counts).toEqual(expect.any(Object));
  const version = await localCoreVersion();
  expect(answer.ansible.core_version).toBe(version);
  // The machine has ansible-core (.ci/run installs it), so the probe must have found its version.
  expect(version).toMatch(/^2\.\d+/);
  expect(check(answer, 'ansible').ok).toBe(version !== null && version.startsWith('2.14.'));
  // Nothing secret: no sealed value or private key in the answer.
  expect(JSON.stringify(answer)).not.toMatch(/private_jwk|"d":/);
});

test('an enabled schedule whose template cannot be answered unattended is broken before its first fire', async () => {
  const suffix = Date.now();
  const unanswerable = await t.api.post('/v1/templates', {
    name: `doctor-needs-answers-${suffix}`,
    tool: 'bash',
    command: 'echo "$region"',
    survey: [
      { var: 'region', type: 'text', required: true },
      { var: 'note', type: 'text', required: true, default: 'fine' },
    ],
  });
  expect(unanswerable.status).toBe(201);
  const answerable = await t.api.post('/v1/templates', {
    name: `doctor-defaults-${suffix}`,
    tool: 'bash',
    command: 'echo "$note"',
    survey: [{ var: 'note', type: 'text', required: true, default: 'fine' }],
  });
  expect(answerable.status).toBe(201);
  const yearly = { cron: '0 2 1 1 *' };
  const broken = await t.api.post('/v1/schedules', { name: 'doctor broken', ...yearly, template_id: unanswerable.body.id });
  const disabled = await t.api.post('/v1/schedules', { name: 'doctor disabled', ...yearly, template_id: unanswerable.body.id, enabled: false });
  const fine = await t.api.post('/v1/schedules', { name: 'doctor fine', ...yearly, template_id: answerable.body.id });
  for (const res of [broken, disabled, fine]) expect(res.status).toBe(201);

  const answer = await doctor();
  const schedules = check(answer, 'schedules_broken');
  expect(schedules).toMatchObject({ ok: false, severity: 'warning', count: 1 });
  expect(schedules.items).toEqual([
    expect.objectContaining({
      schedule_id: broken.body.id,
      template_id: unanswerable.body.id,
      questions: ['region'],
      reason: expect.stringMatching(/required question region has no default/),
      path: `/v1/schedules/${broken.body.id}`,
    }),
  ]);
  // A finding is a warning: the install stays ok.
  expect(answer.ok).toBe(true);
});

test('an attachment whose object is gone, and a delivery kept as failed, are listed', async () => {
  const sql = t.server.context.sql;
  const suffix = Date.now().toString(36);
  const targetId = `ntf_doctor${suffix}`;
  await sql`INSERT INTO notification_targets (id, name, kind, recipients, created_by) VALUES (${targetId}, 'doctor target', 'email', 'ops@example.com', 'admin')`;
  await sql`INSERT INTO notification_attachments (id, target_id, object_kind, object_id, event, created_by)
            VALUES (${`nat_doctor${suffix}`}, ${targetId}, 'template', 'tpl_gone', 'failure', 'admin')`;
  const run = await t.api.post('/v1/runs', { tool: 'bash', command: 'true' });
  expect(run.status).toBe(201);
  await waitForRunEnd(t.api, run.body.id);
  await sql`INSERT INTO notification_events (subject_id, seq, event, state, recorded_at) VALUES (${run.body.id}, 100000, 'run.finished', 'recorded', now())`;
  await sql`INSERT INTO notification_deliveries (target_id, subject_id, seq, event, status, attempts, reason, finished_at)
            VALUES (${targetId}, ${run.body.id}, 100000, 'failure', 'failed', 5, 'the target answered 500', now())`;

  const answer = await doctor();
  expect(check(answer, 'notification_attachments_orphaned')).toMatchObject({ ok: false, count: 1 });
  expect(check(answer, 'notification_attachments_orphaned').items).toEqual([
    expect.objectContaining({ id: `nat_doctor${suffix}`, target_id: targetId, object_kind: 'template', object_id: 'tpl_gone', gone: ['object'] }),
  ]);
  expect(check(answer, 'notification_deliveries_failed')).toMatchObject({ ok: false, count: 1, facts: { failed_last_7_days: 1 } });
  expect(check(answer, 'notification_deliveries_failed').items[0]).toMatchObject({
    target_id: targetId,
    target_name: 'doctor target',
    run_id: run.body.id,
    attempts: 5,
    reason: 'the target answered 500',
  });
});

test('an owed effect the dispatchers keep failing to carry out is listed with its last error', async () => {
  expect(check(await doctor(), 'owed_effects_late')).toMatchObject({ ok: true, count: 0 });
  const sql = connectDatabase(t.databaseUrl, { max: 1 });
  try {
    // As a start Temporal kept refusing for ten minutes would stand: leased again, with its error.
    await sql`INSERT INTO outbox (effect, subject, created_at, due_at, attempts, last_error)
              VALUES ('run.start', 'run_never_started', now() - interval '10 minutes', now() + interval '1 hour', 7, 'Temporal does not answer')`;
    const late = check(await doctor(), 'owed_effects_late');
    expect(late).toMatchObject({ ok: false, severity: 'warning', count: 1 });
    expect(late.items).toEqual([expect.objectContaining({ effect: 'run.start', subject: 'run_never_started', attempts: 7, last_error: 'Temporal does not answer' })]);
  } finally {
    await sql`DELETE FROM outbox WHERE subject = 'run_never_started'`;
    await sql.end();
  }
});
