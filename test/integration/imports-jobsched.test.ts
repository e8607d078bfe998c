import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { zipOf } from '../support/zip';

/**
 * The `jobsched` import (spec part A 4.14 rules 2, 3 and 5): Rundeck job exports in XML and YAML
 * and a project archive (test/fixtures/imports/rundeck-jobs.*, built from Rundeck's documented
 * job-xml and job-yaml formats), told apart by content; previewed, applied, re-imported, and an
 * imported job launched and run by the bash tool; unsafe archives and bad text refused.
 */

let t: TestServer;
const fixtureText = (name: string) => readFileSync(path.join(__dirname, '../fixtures/imports', name), 'utf8');
/** An import of raw bytes, sent with a content type that says nothing of the format. */
const send = (query: string, body: string | Buffer) => t.api.request('POST', `/v1/import/jobsched${query}`, { rawBody: body, headers: { 'content-type': 'application/octet-stream' } });
const logOf = async (runId: string) => (await t.api.get(`/v1/runs/${runId}/logs`)).text;

beforeAll(async () => {
  // Keys for the secret survey answer a launch seals.
  t = await startTestServer({ SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'), SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url') });
}, 60_000);
afterAll(() => t?.stop());

function answered(res: { status: number; text: string }, status: number): void {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`);
}

test('Rundeck job XML: a preview writes nothing; apply makes bash templates, surveys and schedules; a re-import skips them; a launch runs the sequence', async () => {
  const preview = await send('', fixtureText('rundeck-jobs.xml'));
  answered(preview, 200);
  expect(preview.body.created.map((o: any) => `${o.kind}:${o.name}`)).toEqual([
    'notification_target:email ops@example.com',
    expect.stringMatching(/^notification_target:webhook hooks\.example\.com \([0-9a-f]{8}\)$/),
    'template:web/deploy/Roll out release',
    'template:maintenance/Rotate logs',
    'template:Year-end archive',
    'schedule:web/deploy/Roll out release, 0 30 02 ? * MON-FRI *',
    'schedule:maintenance/Rotate logs, 0 15 3 ? * 1 *',
  ]);
  const reasons = Object.fromEntries(preview.body.skipped.map((s: any) => [s.name, s.reason]));
  expect(reasons['web/deploy/Full release']).toContain('runs job web/deploy/Roll out release');
  expect(reasons['Year-end archive, 0 0 1 31 12 ? 2027']).toContain('year 2027');
  expect((await t.api.get('/v1/templates?limit=200')).body.templates.map((x: any) => x.name)).not.toContain('web/deploy/Roll out release');

  const auditBefore = (await t.api.get('/v1/audit?limit=1')).body.total;
  const applied = await send('?apply=true', fixtureText('rundeck-jobs.xml'));
  answered(applied, 201);
  // One chain entry per object and per attachment.
  expect((await t.api.get('/v1/audit?limit=1')).body.total - auditBefore).toBe(9);
  const id = (name: string) => applied.body.created.find((o: any) => o.name === name).id;

  const rollout = (await t.api.get(`/v1/templates/${id('web/deploy/Roll out release')}`)).body;
  expect(rollout).toMatchObject({ tool: 'bash', timeout: 1800 });
  expect(rollout.survey.map((f: any) => [f.var, f.type, f.required])).toEqual([
    ['release', 'text', true],
    ['environment', 'choice', true],
    ['deploy_token', 'secret', true],
    ['batch', 'text', false],
  ]);
  expect(rollout.survey[1].choices).toEqual(['staging', 'production']);
  expect(rollout.survey[3]).toMatchObject({ default: '2', pattern: '^[0-9]+$' });
  const notes = applied.body.created.find((o: any) => o.name === 'web/deploy/Roll out release').notes.join('\n');
  expect(notes).toContain('node filter "tags: web" is not carried');
  expect(notes).toContain('onstart notification by the SlackNotification plugin is not carried');
  // Mail recipients are a ready email target; a webhook's address (it may hold a token) waits.
  const targetId = (prefix: string) => applied.body.created.find((o: any) => o.name.startsWith(prefix)).id;
  expect(applied.body.created.find((o: any) => o.name === 'web/deploy/Roll out release').attachments).toEqual([
    { target_id: targetId('email '), event: 'failure' },
    { target_id: targetId('webhook '), event: 'success' },
  ]);
  expect((await t.api.get(`/v1/notifications/${targetId('email ')}`)).body).toMatchObject({ kind: 'email', to: 'ops@example.com', needs_secret: false });
  expect((await t.api.get(`/v1/notifications/${targetId('webhook ')}`)).body).toMatchObject({ kind: 'webhook', needs_secret: true });
  expect(JSON.stringify(applied.body)).not.toContain('abc123');

  const schedules = (await t.api.get('/v1/schedules?limit=200')).body.schedules;
  const weekday = schedules.find((s: any) => s.template_id === rollout.id);
  expect(weekday).toMatchObject({ cron: '30 02 ? * MON-FRI', timezone: 'Europe/Berlin', enabled: true });
  // Quartz's day 1 is Sunday, cron's 0; a disabled schedule stays disabled.
  expect(schedules.find((s: any) => s.template_id === id('maintenance/Rotate logs'))).toMatchObject({ cron: '15 3 ? * 0', enabled: false });

  // The imported job runs: options reach the steps as Rundeck's variables, the script step runs
  // from its own file with its arguments, and the failing step's error handler recovers it.
  const launch = await t.api.post(`/v1/templates/${rollout.id}/launch`, { answers: { release: '2.0', environment: 'production', deploy_token: 's3cret' } });
  answered(launch, 201);
  const run = await waitForRunEnd(t.api, launch.body.id);
  const log = await logOf(launch.body.id);
  expect(run.status).toBe('succeeded');
  expect(log).toContain('rolling out 2.0 to production');
  expect(log).toContain('batch 2 of release 2.0');
  expect(log).toContain('step 3 failed with exit code 3');
  expect(log).toContain('health check failed, carrying on');

  // A job that keeps going runs every step and fails at its end.
  const rotate = await t.api.post(`/v1/templates/${id('maintenance/Rotate logs')}/launch`, {});
  const rotated = await waitForRunEnd(t.api, rotate.body.id);
  expect(rotated.status).toBe('failed');
  expect(await logOf(rotate.body.id)).toContain('after the failure');

  const again = await send('?apply=true', fixtureText('rundeck-jobs.xml'));
  answered(again, 200);
  expect(again.body.created).toEqual([]);
  expect(again.body.skipped.filter((s: any) => s.reason === 'imported before from this source')).toHaveLength(7);
}, 90_000);

test('Rundeck job YAML and a project archive are told apart by content; the inventory named is set on the templates', async () => {
  const yaml = await send('', fixtureText('rundeck-jobs.yaml'));
  answered(yaml, 200);
  expect(yaml.body.created.map((o: any) => `${o.kind}:${o.name}`)).toEqual(['template:app/Restart service', 'schedule:app/Restart service, 0 0/20 * ? * * *']);
  expect(yaml.body.skipped.find((s: any) => s.name === 'Nightly report').reason).toContain('fetches its script from https://artifacts.example.com/report.sh');

  const inventory = await t.api.post('/v1/inventories', { name: 'rundeck nodes', content: '[app]\napp1\napp2\n' });
  answered(inventory, 201);
  const job = (uuid: string, name: string) =>
    `<joblist><job><uuid>${uuid}</uuid><name>${name}</name><group>archived</group><sequence><command><exec>echo ${name}</exec></command></sequence></job></joblist>`;
  const archive = zipOf([
    { name: 'META-INF/MANIFEST.MF', data: 'Manifest-Version: 1.0\n' },
    { name: 'rundeck-webops/files/etc/project.properties', data: 'project.name=webops\n' },
    { name: 'rundeck-webops/jobs/job-9f8e7d6c.xml', data: job('9f8e7d6c', 'first') },
    { name: 'rundeck-webops/jobs/job-1a2b3c4d.xml', data: job('1a2b3c4d', 'second') },
  ]);
  const applied = await send(`?apply=true&inventory=${inventory.body.id}`, archive);
  answered(applied, 201);
  expect(applied.body.created.map((o: any) => o.name)).toEqual(['archived/first', 'archived/second']);
  const first = (await t.api.get(`/v1/templates/${applied.body.created[0].id}`)).body;
  expect(first).toMatchObject({ tool: 'bash', inventory_id: inventory.body.id });
  expect(first.command).toContain('echo first');

  const unknown = await send('?inventory=inv_nope', fixtureText('rundeck-jobs.yaml'));
  expect([unknown.status, unknown.body.field]).toEqual([400, 'inventory']);
  // A fleet format brings its own inventory.
  expect((await t.api.request('POST', `/v1/import/manifest?inventory=${inventory.body.id}`, { body: [] })).body.field).toBe('inventory');
});

test('unsafe archives, NUL, bytes that are not UTF-8 and malformed exports are refused with 400 naming where', async () => {
  const job = '<joblist><job><uuid>u1</uuid><name>ok</name><sequence><command><exec>true</exec></command></sequence></job></joblist>';
  const traversal = await send('', zipOf([{ name: '../../etc/cron.d/job-evil.xml', data: job }]));
  expect([traversal.status, traversal.body.field]).toEqual([400, 'body']);
  expect(traversal.body.error).toContain('invalid relative path');
  const absolute = await send('', zipOf([{ name: '/rundeck-x/jobs/job-a.xml', data: job }]));
  expect([absolute.status, absolute.body.error]).toEqual([400, expect.stringContaining('absolute path')]);
  // A bomb: 200 MiB of zeros deflate to about 200 KiB; its declared size is past the limit.
  const bomb = await send('', zipOf([{ name: 'rundeck-x/jobs/job-bomb.xml', data: Buffer.alloc(200 * 1024 * 1024) }]));
  expect([bomb.status, bomb.body.field]).toEqual([400, 'body']);
  expect(bomb.body.error).toContain('more than the');
  // A bomb that lies about its size is stopped as it inflates past what it declared.
  const liar = await send('', zipOf([{ name: 'rundeck-x/jobs/job-liar.xml', data: Buffer.alloc(30 * 1024 * 1024), declaredSize: 1024 }]));
  expect([liar.status, liar.body.field]).toEqual([400, 'body']);
  const notRundeck = await send('', zipOf([{ name: 'README', data: 'hello' }]));
  expect(notRundeck.body.error).toContain('not a Rundeck project archive');

  const nul = await send('', '- name: "bad\\0name"\n  sequence:\n    commands:\n    - exec: "true"\n');
  expect([nul.status, nul.body.field]).toEqual([400, '[0].name']);
  expect(nul.body.error).toContain('NUL');
  const latin1 = Buffer.concat([Buffer.from('<joblist><job><uuid>u2</uuid><name>ok</name><sequence><command><exec>echo '), Buffer.from([0xe9, 0x74, 0xe9]), Buffer.from('</exec></command></sequence></job></joblist>')]);
  const invalid = await send('', latin1);
  expect([invalid.status, invalid.body.field]).toEqual([400, 'joblist.job[0].command']);
  expect(invalid.body.error).toContain('not valid UTF-8');

  expect((await send('', '<joblist><job><name>x</job></joblist>')).body.error).toContain('not well-formed XML');
  expect((await send('', '<project/>')).body.error).toContain('not <joblist>');
  expect((await send('', 'name: not a list\n')).body.error).toContain('a list of jobs');
  const noName = await send('', '<joblist><job><sequence/></job></joblist>');
  expect([noName.status, noName.body.field]).toEqual([400, 'joblist.job[0].name']);
});
