import { createHash, randomBytes } from 'node:crypto';
import { createSealer } from '../../core/credentials/seal';
import { connectDatabase, type Sql } from '../../store/db';
import { createTestDatabase } from '../support/database';
import { apiClient, type ApiClient } from '../support/http';
import { startCairn } from '../support/processes';
import { startTestServer, testSettings, waitForRunEnd, type TestServer } from '../support/server';

const encryption = () => ({
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
});
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
/** A script line that prints the SHA-256 of a variable, so a test sees that the value arrived without printing it. */
const hashLine = (name: string) => `printf '%s' "$${name}" | sha256sum | cut -d' ' -f1 | sed 's/^/${name}_sha=/'`;

let t: TestServer;
let sql: Sql;
const keys = encryption();

beforeAll(async () => {
  t = await startTestServer(keys);
  sql = connectDatabase(t.databaseUrl, { max: 2 });
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

async function createTemplate(body: Record<string, unknown>, api: ApiClient = t.api) {
  const created = await api.post('/v1/templates', body);
  if (created.status !== 201) throw new Error(`template create: ${created.status} ${created.text}`);
  return created.body;
}

const put = (id: string, body: unknown, api: ApiClient = t.api) => api.request('PUT', `/v1/templates/${id}`, { body });
const launch = (id: string, body: unknown = {}, api: ApiClient = t.api) => api.post(`/v1/templates/${id}/launch`, body);
const logOf = async (runId: string, api: ApiClient = t.api) => (await api.get(`/v1/runs/${runId}/logs`)).text;
const runCount = async () => (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs`)[0].n;

describe('template CRUD', () => {
  test('create, read, list by id, replace, delete; reads show the template as stored', async () => {
    const created = await t.api.post('/v1/templates', {
      name: 'deploy web',
      tool: 'bash',
      command: 'echo "$environment"',
      extra_vars: { region: 'eu' },
      timeout: 600,
      survey: [{ var: 'environment', type: 'choice', choices: ['staging', 'production'], default: 'staging', label: 'Where' }],
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`/v1/templates/${created.body.id}`);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^tpl_/),
      name: 'deploy web',
      kind: 'job',
      tool: 'bash',
      command: 'echo "$environment"',
      extra_vars: { region: 'eu' },
      queue: '',
      timeout: 600,
      shards: null,
      steps: null,
      notifications: [],
      created_by: 'admin',
      survey: [{ var: 'environment', type: 'choice', choices: ['staging', 'production'], default: 'staging', label: 'Where' }],
    });
    const id = created.body.id;
    expect((await t.api.get(`/v1/templates/${id}`)).body).toEqual(created.body);

    const other = await createTemplate({ name: 'other', tool: 'python', command: 'print(1)' });
    const byId = await t.api.get(`/v1/templates?id=${id}`);
    expect(byId.body).toMatchObject({ count: 1, total: 1, has_more: false });
    expect(byId.body.templates[0].id).toBe(id);
    const paged = await t.api.get(`/v1/templates?id=${id}&id=${other.id}&limit=1`);
    expect(paged.body).toMatchObject({ count: 1, total: 2, has_more: true, next_offset: 1 });

    // A read sent back as it is (read-only fields and nulls included) is a valid replacement.
    const replaced = await put(id, { ...created.body, command: 'echo "$environment!"' });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ id, command: 'echo "$environment!"', extra_vars: { region: 'eu' }, timeout: 600 });
    // Replace means replace: omitted fields go back to their defaults.
    const bare = await put(id, { name: 'deploy web', tool: 'bash', command: 'true' });
    expect(bare.body).toMatchObject({ extra_vars: {}, timeout: 0, survey: [] });
    expect((await put(id, { ...bare.body, id: other.id })).body).toMatchObject({ field: 'id' });

    // The chain records each write.
    const audit = (await t.api.get('/v1/audit?limit=1000&order=asc')).body.entries.map((e: any) => e.body);
    expect(audit.filter((b: any) => b.template_id === id && b.kind.startsWith('template.')).map((b: any) => b.kind)).toEqual(['template.created', 'template.updated', 'template.updated']);

    expect((await t.api.request('DELETE', `/v1/templates/${id}`)).status).toBe(204);
    expect((await t.api.get(`/v1/templates/${id}`)).status).toBe(404);
    expect((await t.api.request('DELETE', `/v1/templates/${id}`)).status).toBe(404);
    expect((await launch(id)).status).toBe(404);
    expect((await put(id, { name: 'x', tool: 'bash', command: 'true' })).status).toBe(404);
  });

  test('names are unique', async () => {
    await createTemplate({ name: 'only once', tool: 'bash', command: 'true' });
    const again = await t.api.post('/v1/templates', { name: 'only once', tool: 'bash', command: 'true' });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ field: 'name' });
    const renamed = await createTemplate({ name: 'only twice', tool: 'bash', command: 'true' });
    expect((await put(renamed.id, { name: 'only once', tool: 'bash', command: 'true' })).status).toBe(409);
  });

  test.each([
    ['no name', { tool: 'bash', command: 'x' }, 'name'],
    ['a job template without tool', { name: 'a', command: 'x' }, 'tool'],
    ['a job template without command', { name: 'a', tool: 'bash' }, 'command'],
    ['an unknown tool', { name: 'a', tool: 'fortran', command: 'x' }, 'tool'],
    ['a tool this server lacks', { name: 'a', tool: 'powershell', command: 'x' }, 'tool'],
    ['a negative timeout', { name: 'a', tool: 'bash', command: 'x', timeout: -1 }, 'timeout'],
    ['a fractional timeout', { name: 'a', tool: 'bash', command: 'x', timeout: 1.5 }, 'timeout'],
    ['extra_vars not an object', { name: 'a', tool: 'bash', command: 'x', extra_vars: [1] }, 'extra_vars'],
    ['a queue over 255 bytes', { name: 'a', tool: 'bash', command: 'x', queue: 'é'.repeat(128) }, 'queue'],
    ['an unknown key in a survey field', { name: 'a', tool: 'bash', command: 'x', survey: [{ var: 'v', type: 'text', colour: 'red' }] }, 'survey[0].colour'],
    ['a survey key for another type', { name: 'a', tool: 'bash', command: 'x', survey: [{ var: 'v', type: 'text', min: 1 }] }, 'survey[0].min'],
    ['a default breaking its own field', { name: 'a', tool: 'bash', command: 'x', survey: [{ var: 'n', type: 'int', max: 3, default: 4 }] }, 'survey[0].default'],
    ['a workflow template with command', { name: 'a', command: 'x', steps: [{ name: 's', tool: 'bash', command: 'x' }] }, 'command'],
    ['a workflow template with tool', { name: 'a', tool: 'bash', steps: [{ name: 's', tool: 'bash', command: 'x' }] }, 'tool'],
    ['a workflow template with shards', { name: 'a', shards: 2, steps: [{ name: 's', tool: 'bash', command: 'x' }] }, 'shards'],
    ['a workflow template with an Ansible control', { name: 'a', limit: 'web', steps: [{ name: 's', tool: 'bash', command: 'x' }] }, 'limit'],
    [
      'a cycle in the steps',
      { name: 'a', steps: [{ name: 'one', tool: 'bash', command: 'x', depends_on: ['two'] }, { name: 'two', tool: 'bash', command: 'x', depends_on: ['one'] }] },
      'steps[0].depends_on',
    ],
    ['an unknown dependency', { name: 'a', steps: [{ name: 'one', tool: 'bash', command: 'x', depends_on: ['nope'] }] }, 'steps[0].depends_on[0]'],
    ['a step with an unknown tool', { name: 'a', steps: [{ name: 'one', tool: 'fortran', command: 'x' }] }, 'steps[0].tool'],
    ['a notification entry without its url', { name: 'a', tool: 'bash', command: 'x', notifications: [{ kind: 'webhook' }] }, 'notifications[0].url'],
    ['a playbook that is not a string', { name: 'a', tool: 'ansible', playbook: 5 }, 'playbook'],
    ['an ansible template with neither playbook nor command', { name: 'a', tool: 'ansible', limit: 'web' }, 'command'],
    ['an unknown field', { name: 'a', tool: 'bash', command: 'x', colour: 'red' }, 'colour'],
  ])('%s is refused with 400 naming the field', async (_, body, field) => {
    const before = (await t.api.get('/v1/templates')).body.total;
    const refused = await t.api.post('/v1/templates', body);
    expect(refused.status).toBe(400);
    expect(refused.body.field).toBe(field);
    expect(refused.body.error).toContain(field);
    expect((await t.api.get('/v1/templates')).body.total).toBe(before);
  });

  test('a named queue needs Team when saved; roles: viewers read, operators write', async () => {
    const queued = await t.api.post('/v1/templates', { name: 'queued', tool: 'bash', command: 'x', queue: 'gpu' });
    expect(queued.status).toBe(403);
    expect(queued.body).toMatchObject({ feature: 'named_queue', field: 'queue' });

    const ids: Record<string, string> = {};
    for (const [username, role] of [
      ['vera', 'viewer'],
      ['otto', 'operator'],
    ]) {
      const created = await t.api.post('/v1/users', { username, role });
      expect(created.status).toBe(201);
      ids[username] = created.body.id;
    }
    const viewer = t.as((await t.api.post('/v1/tokens', { name: 'v', username: 'vera' })).body.token);
    const operator = t.as((await t.api.post('/v1/tokens', { name: 'o', username: 'otto' })).body.token);
    const mine = await createTemplate({ name: 'by operator', tool: 'bash', command: 'echo ok' }, operator);
    expect(mine.created_by).toBe('otto');
    // Below admin, a template is read by its owner and those it is granted to (docs/api.md, Access).
    expect((await viewer.get(`/v1/templates/${mine.id}`)).status).toBe(404);
    expect((await operator.post('/v1/grants', { object: mine.id, permission: 'read', user_id: ids.vera })).status).toBe(201);
    expect((await viewer.get(`/v1/templates/${mine.id}`)).status).toBe(200);
    expect((await viewer.get('/v1/templates')).status).toBe(200);
    expect((await viewer.post('/v1/templates', { name: 'by viewer', tool: 'bash', command: 'x' })).status).toBe(403);
    expect((await launch(mine.id, {}, viewer)).status).toBe(403);
    const ran = await launch(mine.id, {}, operator);
    expect(ran.status).toBe(201);
    expect((await waitForRunEnd(t.api, ran.body.id)).status).toBe('succeeded');
  });
});

describe('launch', () => {
  test('answers become extra vars over the template’s own, and the run records its template', async () => {
    const template = await createTemplate({
      name: 'answers',
      tool: 'bash',
      command: 'echo "$environment $batch_size $region $dry"',
      extra_vars: { region: 'eu', batch_size: 1, environment: 'none' },
      survey: [
        { var: 'environment', type: 'choice', choices: ['staging', 'production'], required: true },
        { var: 'batch_size', type: 'int', min: 1, max: 10 },
        { var: 'dry', type: 'bool', default: true },
      ],
    });
    const launched = await launch(template.id, { answers: { environment: 'production', batch_size: 5 } });
    expect(launched.status).toBe(201);
    expect(launched.headers.get('location')).toBe(`/v1/runs/${launched.body.id}`);
    expect(launched.body).toMatchObject({
      kind: 'run',
      tool: 'bash',
      template_id: template.id,
      extra_vars: { region: 'eu', batch_size: 5, environment: 'production', dry: true },
      secret_vars: [],
    });
    expect((await waitForRunEnd(t.api, launched.body.id)).status).toBe('succeeded');
    expect(await logOf(launched.body.id)).toBe('production 5 eu true\n');

    // Unanswered optional questions leave the template's own extra var in place.
    const second = await launch(template.id, { answers: { environment: 'staging' } });
    expect(second.body.extra_vars).toEqual({ region: 'eu', batch_size: 1, environment: 'staging', dry: true });
    await waitForRunEnd(t.api, second.body.id);
  });

  test.each([
    ['a choice not offered', { environment: 'qa' }, 'answers.environment'],
    ['an int below its bound', { environment: 'staging', batch_size: 0 }, 'answers.batch_size'],
    ['an int above its bound', { environment: 'staging', batch_size: 11 }, 'answers.batch_size'],
    ['a string for an int', { environment: 'staging', batch_size: '5' }, 'answers.batch_size'],
    ['a pattern matched only in part', { environment: 'staging', ticket: 'CHG-12x' }, 'answers.ticket'],
    ['a required question missing', { batch_size: 2 }, 'answers.environment'],
    ['an answer to no question', { environment: 'staging', colour: 'red' }, 'answers.colour'],
  ])('%s is refused with 400 naming the answer, and no run is created', async (_, answers, field) => {
    const name = `constraints ${field} ${JSON.stringify(answers)}`;
    const template = await createTemplate({
      name,
      tool: 'bash',
      command: 'echo never',
      survey: [
        { var: 'environment', type: 'choice', choices: ['staging', 'production'], required: true },
        { var: 'batch_size', type: 'int', min: 1, max: 10 },
        { var: 'ticket', type: 'text', pattern: 'CHG-[0-9]+' },
      ],
    });
    const before = await runCount();
    const refused = await launch(template.id, { answers });
    expect(refused.status).toBe(400);
    expect(refused.body.field).toBe(field);
    expect(refused.body.error).toContain(field);
    expect(await runCount()).toBe(before);
  });

  test('answers must be an object and the body is strict', async () => {
    const template = await createTemplate({ name: 'strict launch', tool: 'bash', command: 'true' });
    expect((await launch(template.id, { answers: [1] })).body).toMatchObject({ field: 'answers' });
    expect((await launch(template.id, { answers: {}, extra_vars: { a: 1 } })).body).toMatchObject({ field: 'extra_vars' });
  });

  test('the template’s timeout rides onto the run; a launch may lower it, never raise it', async () => {
    const template = await createTemplate({ name: 'timed', tool: 'bash', command: 'sleep 5', timeout: 30 });
    const plain = await launch(template.id);
    expect(plain.body.timeout).toBe(30);
    const lower = await launch(template.id, { timeout: 1 });
    expect(lower.body.timeout).toBe(1);
    const before = await runCount();
    const higher = await launch(template.id, { timeout: 31 });
    expect(higher.status).toBe(400);
    expect(higher.body.field).toBe('timeout');
    expect(await runCount()).toBe(before);
    expect((await waitForRunEnd(t.api, lower.body.id)).error).toBe('timed out after 1 s');
    await t.api.post(`/v1/runs/${plain.body.id}/cancel`);

    // Zero on the template leaves the server's --run-timeout, which a launch may not exceed either.
    const unset = await createTemplate({ name: 'untimed', tool: 'bash', command: 'true' });
    expect((await launch(unset.id)).body.timeout).toBe(t.config.runTimeout);
    expect((await launch(unset.id, { timeout: t.config.runTimeout + 1 })).status).toBe(400);
  });

  test('shards make each launch a split, and a workflow template runs its graph with the answers in every step', async () => {
    const split = await createTemplate({
      name: 'split',
      tool: 'bash',
      command: 'echo "$CAIRN_SHARD_INDEX/$CAIRN_SHARD_COUNT $who"',
      shards: 2,
      survey: [{ var: 'who', type: 'text', default: 'everyone' }],
    });
    const splitRun = await launch(split.id);
    expect(splitRun.body).toMatchObject({ kind: 'split', template_id: split.id });
    expect((await waitForRunEnd(t.api, splitRun.body.id)).status).toBe('succeeded');
    const shards = (await t.api.get(`/v1/runs/${splitRun.body.id}/shards`)).body.shards;
    expect(await Promise.all(shards.map((s: any) => logOf(s.id)))).toEqual(['0/2 everyone\n', '1/2 everyone\n']);

    const workflow = await createTemplate({
      name: 'workflow',
      extra_vars: { site: 'ams' },
      survey: [{ var: 'version', type: 'text', required: true }],
      steps: [
        { name: 'build', tool: 'bash', command: 'echo "build $version $site"' },
        { name: 'ship', tool: 'python', command: 'import os; print("ship", os.environ["version"])', depends_on: ['build'] },
      ],
    });
    expect(workflow).toMatchObject({ kind: 'workflow', tool: null, command: null, shards: null });
    expect(workflow.steps.map((s: any) => [s.name, s.depends_on])).toEqual([
      ['build', []],
      ['ship', ['build']],
    ]);
    const run = await launch(workflow.id, { answers: { version: '1.2.3' } });
    expect(run.status).toBe(201);
    expect(run.body).toMatchObject({ kind: 'workflow', tool: 'workflow', template_id: workflow.id, extra_vars: { site: 'ams', version: '1.2.3' } });
    expect((await waitForRunEnd(t.api, run.body.id)).status).toBe('succeeded');
    const steps = (await t.api.get(`/v1/runs/${run.body.id}/steps`)).body.steps;
    expect(await Promise.all(steps.map((s: any) => logOf(s.id)))).toEqual(['build 1.2.3 ams\n', 'ship 1.2.3\n']);
  });
});

describe('secret questions', () => {
  const SECRET_COMMAND = ['echo "token=$api_token"', 'echo "bare $api_token end"', hashLine('api_token')].join('\n');

  test('editing a secret default: the mask keeps it, a new value replaces it, an empty string clears it', async () => {
    const original = `orig-${randomBytes(8).toString('hex')}`;
    const replacement = `next-${randomBytes(8).toString('hex')}`;
    const created = await createTemplate({
      name: 'edit secret',
      tool: 'bash',
      command: SECRET_COMMAND,
      survey: [{ var: 'api_token', type: 'password', default: original, min_length: 8 }],
    });
    expect(created.survey).toEqual([{ var: 'api_token', type: 'secret', default: '[redacted]', min_length: 8 }]);

    const hashOfRun = async (answers?: Record<string, unknown>) => {
      const run = await launch(created.id, answers ? { answers } : {});
      expect(run.status).toBe(201);
      const ended = await waitForRunEnd(t.api, run.body.id);
      expect(ended.status).toBe('succeeded');
      const log = await logOf(run.body.id);
      return { run: ended, log, sha: /api_token_sha=([0-9a-f]+)/.exec(log)![1] };
    };

    // The read sent back unchanged keeps the stored default.
    const kept = await put(created.id, created);
    expect(kept.status).toBe(200);
    expect(kept.body.survey[0].default).toBe('[redacted]');
    const first = await hashOfRun();
    expect(first.sha).toBe(sha256(original));
    expect(first.run.secret_vars).toEqual(['api_token']);
    expect(first.log).toContain('token=[masked]\nbare [masked] end\n');

    // A new value replaces it.
    const replaced = await put(created.id, { ...created, survey: [{ var: 'api_token', type: 'secret', default: replacement, min_length: 8 }] });
    expect(replaced.body.survey[0].default).toBe('[redacted]');
    expect((await hashOfRun()).sha).toBe(sha256(replacement));
    // An answer wins over the default.
    expect((await hashOfRun({ api_token: 'answered-value' })).sha).toBe(sha256('answered-value'));
    // The new value is held to the field's constraints; the mask and "" are edit instructions, not values.
    const short = await put(created.id, { ...created, survey: [{ var: 'api_token', type: 'secret', default: 'short', min_length: 8 }] });
    expect(short.status).toBe(400);
    expect(short.body.field).toBe('survey[0].default');
    expect(short.body.error).not.toContain('short');

    // An empty string clears it: the question has no default any more.
    const cleared = await put(created.id, { ...created, survey: [{ var: 'api_token', type: 'secret', default: '', min_length: 8 }] });
    expect(cleared.body.survey).toEqual([{ var: 'api_token', type: 'secret', min_length: 8 }]);
    const none = await hashOfRun();
    expect(none.sha).toBe(sha256(''));
    expect(none.run.secret_vars).toEqual([]);
    // …so the mask has nothing left to keep.
    const masked = await put(created.id, created);
    expect(masked.status).toBe(400);
    expect(masked.body.field).toBe('survey[0].default');

    // The chain names what happened to the secret default, and which launches carried a secret: names, never values.
    const entries = (await t.api.get('/v1/audit?limit=1000&order=asc')).body.entries
      .map((e: any) => e.body)
      .filter((b: any) => b.template_id === created.id);
    const edits = entries.filter((b: any) => b.kind.startsWith('template.'));
    expect(edits.map((b: any) => b.secret_defaults)).toEqual([{ api_token: 'set' }, { api_token: 'kept' }, { api_token: 'replaced' }, { api_token: 'cleared' }]);
    const launches = entries.filter((b: any) => b.kind === 'run.submitted');
    expect(launches.map((b: any) => b.secret_vars)).toEqual([['api_token'], ['api_token'], ['api_token'], undefined]);
    for (const value of [original, replacement, 'answered-value']) expect(JSON.stringify(entries)).not.toContain(value);
  });

  test('a sealed value that does not open under this key fails the run naming the variable and the fix; a rerun is refused', async () => {
    // Hold the run so its sealed value can be swapped for one sealed under another key before it executes.
    for (const existing of (await t.api.get('/v1/policies')).body.policies) await t.api.request('DELETE', `/v1/policies/${existing.id}`);
    expect((await t.api.post('/v1/policies', { name: 'hold marked', command_contains: 'HOLD-FOR-KEY-TEST' })).status).toBe(201);
    try {
      const template = await createTemplate({
        name: 'other key',
        tool: 'bash',
        command: `# HOLD-FOR-KEY-TEST\n${hashLine('api_token')}`,
        survey: [{ var: 'api_token', type: 'secret' }],
      });
      const held = await launch(template.id, { answers: { api_token: 'the-answer-1234' } });
      expect(held.body).toMatchObject({ status: 'held', secret_vars: ['api_token'] });
      const other = createSealer({ key: 'another-key-another-key-another-key!', salt: 'another-salt-1234' });
      const context = `run:${held.body.id}:${held.body.state_digest}:api_token`;
      await sql`UPDATE runs SET sealed_vars = ${sql.json({ api_token: other.seal('the-answer-1234', context) })} WHERE id = ${held.body.id}`;

      const approved = await t.api.post(`/v1/runs/${held.body.id}/approve`, { reason: 'key test', state_digest: held.body.state_digest });
      expect(approved.status).toBe(200);
      const ended = await waitForRunEnd(t.api, held.body.id);
      expect(ended.status).toBe('failed');
      expect(ended.error).toMatch(/api_token/);
      expect(ended.error).toMatch(/restore the SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT it was sealed with/);
      expect(ended.error).not.toContain('the-answer-1234');

      const rerun = await t.api.post(`/v1/runs/${held.body.id}/rerun`);
      expect(rerun.status).toBe(409);
      expect(rerun.body).toMatchObject({ variable: 'api_token' });
    } finally {
      for (const existing of (await t.api.get('/v1/policies')).body.policies) await t.api.request('DELETE', `/v1/policies/${existing.id}`);
    }
  });

  test('without the encryption key: a secret default or a secret answer is refused with 409 naming the settings', async () => {
    const bare = await startTestServer();
    try {
      const refused = await bare.api.post('/v1/templates', {
        name: 'needs key',
        tool: 'bash',
        command: 'true',
        survey: [
          { var: 'api_token', type: 'secret', default: 'a-default-value' },
          { var: 'db_password', type: 'secret', default: 'another-default' },
        ],
      });
      expect(refused.status).toBe(409);
      expect(refused.body.variables).toEqual(['api_token', 'db_password']);
      expect(refused.body.error).toContain('SERVICE_ENCRYPTION_KEY');
      expect(refused.body.error).toContain('SERVICE_ENCRYPTION_SALT');
      expect(refused.text).not.toContain('a-default-value');
      expect((await bare.api.get('/v1/templates')).body.total).toBe(0);

      // A secret question without a default saves; answering it needs the key, leaving it unanswered does not.
      const template = await createTemplate({ name: 'asks', tool: 'bash', command: 'echo "[$api_token]"', survey: [{ var: 'api_token', type: 'secret' }] }, bare.api);
      const answered = await bare.api.post(`/v1/templates/${template.id}/launch`, { answers: { api_token: 'some-answer' } });
      expect(answered.status).toBe(409);
      expect(answered.body.error).toContain('SERVICE_ENCRYPTION_KEY');
      const unanswered = await bare.api.post(`/v1/templates/${template.id}/launch`, {});
      expect(unanswered.status).toBe(201);
      expect((await waitForRunEnd(bare.api, unanswered.body.id)).status).toBe('succeeded');
      expect(await logOf(unanswered.body.id, bare.api)).toBe('[]\n');
    } finally {
      await bare.stop();
    }
  });
});

/**
 * The whole path of a secret on a real `cairn serve` process with a debug log: the plaintext of a
 * sealed default and of an answer reaches the script (it prints their hashes) and nothing else:
 * not the log (masked), not an API read, not a PostgreSQL row, not the server's output.
 */
test('a secret answer and a secret default are grep-able nowhere, yet reach the script', async () => {
  const database = await createTestDatabase();
  const settings = testSettings(database.url, { CAIRN_LOG_LEVEL: 'debug', ...encryption() });
  const serve = startCairn(['serve'], { ...process.env, ...settings });
  const db = connectDatabase(database.url, { max: 2 });
  const secretDefault = `DefaultSecret${randomBytes(12).toString('hex')}`;
  const secretAnswer = `AnsweredSecret${randomBytes(12).toString('hex')}`;
  const forms = (secret: string) => [secret, Buffer.from(secret).toString('hex'), Buffer.from(secret).toString('base64'), Buffer.from(secret).toString('base64url')];
  const needles = [...forms(secretDefault), ...forms(secretAnswer)];
  const leaks = (text: string) => needles.filter((needle) => text.includes(needle));
  try {
    const [, token] = await serve.waitFor(/admin token: (\S+)/);
    const [, url] = await serve.waitFor(/serving at (\S+)/);
    const api = apiClient(url, token);
    const command = ['echo "token=$api_token"', 'echo "bare $api_token end"', hashLine('api_token')].join('\n');
    const survey = [{ var: 'api_token', type: 'secret', label: 'API token', default: secretDefault }];
    const job = await createTemplate({ name: 'secret job', tool: 'bash', command, survey }, api);
    const split = await createTemplate({ name: 'secret split', tool: 'bash', command, shards: 2, survey }, api);
    const workflow = await createTemplate(
      {
        name: 'secret workflow',
        survey,
        steps: [
          { name: 'one', tool: 'bash', command },
          { name: 'two', tool: 'python', command: 'import hashlib, os; print("api_token_sha=" + hashlib.sha256(os.environ["api_token"].encode()).hexdigest())', depends_on: ['one'] },
        ],
      },
      api,
    );
    expect(job.survey[0].default).toBe('[redacted]');

    // What each launch must have handed its script: [top-level run id, expected secret].
    const launched: [string, string][] = [];
    for (const [template, answers, expected] of [
      [job, undefined, secretDefault],
      [job, { api_token: secretAnswer }, secretAnswer],
      [split, { api_token: secretAnswer }, secretAnswer],
      [workflow, undefined, secretDefault],
    ] as const) {
      const run = await api.post(`/v1/templates/${template.id}/launch`, answers ? { answers } : {});
      expect(run.status).toBe(201);
      expect(run.body.secret_vars).toEqual(['api_token']);
      expect(run.body.extra_vars).toEqual({});
      launched.push([run.body.id, expected]);
    }
    // A rerun carries the sealed answer of the run it comes from.
    await waitForRunEnd(api, launched[1][0]);
    const rerun = await api.post(`/v1/runs/${launched[1][0]}/rerun`);
    expect(rerun.status).toBe(201);
    expect(rerun.body.secret_vars).toEqual(['api_token']);
    launched.push([rerun.body.id, secretAnswer]);

    const runIds: string[] = [];
    for (const [id, expected] of launched) {
      const ended = await waitForRunEnd(api, id, 60_000);
      expect(ended.status).toBe('succeeded');
      runIds.push(id);
      const children = ended.kind === 'run' ? [] : (await api.get(`/v1/runs/${id}/${ended.kind === 'split' ? 'shards' : 'steps'}`)).body[ended.kind === 'split' ? 'shards' : 'steps'];
      for (const executed of children.length ? children : [ended]) {
        if (executed.id !== id) runIds.push(executed.id);
        expect(executed.secret_vars).toEqual(['api_token']);
        const log = (await api.get(`/v1/runs/${executed.id}/logs`)).text;
        expect(log).toContain(`api_token_sha=${sha256(expected)}`);
        if (executed.tool === 'bash') expect(log).toContain('token=[masked]\nbare [masked] end\n');
      }
    }

    // Every API read: templates, runs and their children, events, logs, decisions, evidence, receipts, the audit trail.
    const reads = ['/v1/templates', `/v1/templates/${job.id}`, `/v1/templates/${workflow.id}`, '/v1/runs?limit=1000', '/v1/audit?limit=1000', '/v1/audit/bundle'];
    for (const id of runIds) {
      for (const path of ['', '/events', '/logs', '/decisions', '/evidence', '/receipt', '/steps', '/shards']) reads.push(`/v1/runs/${id}${path}`);
    }
    let answered = 0;
    for (const path of reads) {
      const response = await api.get(path);
      if (response.status === 200) answered++;
      expect({ path, leaks: leaks(response.text) }).toEqual({ path, leaks: [] });
    }
    expect(answered).toBeGreaterThan(runIds.length * 4);
    // The sealed values are there, under the names only.
    const [{ sealed }] = await db<{ sealed: unknown }[]>`SELECT sealed_vars AS sealed FROM runs WHERE id = ${launched[0][0]}`;
    expect(Object.keys(sealed as object)).toEqual(['api_token']);

    // Every row of every table, as text (bytea as hex).
    const tables = await db<{ name: string }[]>`
      SELECT format('%I.%I', table_schema, table_name) AS name FROM information_schema.tables
      WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`;
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['public.runs', 'public.templates', 'public.audit_entries', 'public.run_log_chunks', 'public.run_events']));
    let rows = 0;
    for (const { name } of tables) {
      for (const { row } of await db.unsafe<{ row: string }[]>(`SELECT t::text AS row FROM ${name} t`)) {
        rows++;
        expect({ name, leaks: leaks(row) }).toEqual({ name, leaks: [] });
      }
    }
    expect(rows).toBeGreaterThan(50);
  } finally {
    await db.end();
    await serve.stop();
    // The server's whole output (its debug log included) never held a secret.
    const output = serve.output();
    expect(output).toMatch(/"level":20/);
    expect(leaks(output)).toEqual([]);
    await database.drop();
  }
});


describe('survey patterns are RE2', () => {
  test('(a+)+b against 31 characters answers at once, and /healthz stays responsive while it is checked', async () => {
    const template = await createTemplate({ name: 'catastrophic pattern', tool: 'bash', command: 'true', survey: [{ var: 'v', type: 'text', pattern: '(a+)+b' }] });
    const before = await runCount();

    // Probe /healthz every 20 ms while the launch is checked, timing each answer.
    let checking = true;
    const latencies: number[] = [];
    const probing = (async () => {
      while (checking) {
        const started = performance.now();
        expect((await t.as(null).get('/healthz')).status).toBe(200);
        latencies.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 100));
    const started = performance.now();
    const refused = await launch(template.id, { answers: { v: 'a'.repeat(31) } });
    const took = performance.now() - started;
    await new Promise((r) => setTimeout(r, 100));
    checking = false;
    await probing;

    expect(refused.status).toBe(400);
    expect(refused.body.field).toBe('answers.v');
    expect(refused.body.error).toContain('must match the pattern');
    expect(took).toBeLessThan(1000);
    expect(latencies.length).toBeGreaterThan(5);
    expect(Math.max(...latencies)).toBeLessThan(1000);
    expect(await runCount()).toBe(before);
    // The pattern still does its job.
    const accepted = await launch(template.id, { answers: { v: `${'a'.repeat(31)}b` } });
    expect(accepted.status).toBe(201);
    await waitForRunEnd(t.api, accepted.body.id);
  });

  test.each([
    ['a back reference', '(a)\\1'],
    ['a lookahead', '(?=a)a'],
    ['a lookbehind', '(?<=a)b'],
    ['a pattern breaking out of the anchoring', 'a)|(?:b'],
  ])('%s is refused when the template is saved, with 400 naming the field and RE2', async (_, pattern) => {
    const before = (await t.api.get('/v1/templates')).body.total;
    const refused = await t.api.post('/v1/templates', { name: `re2 ${pattern}`, tool: 'bash', command: 'true', survey: [{ var: 'v', type: 'text', pattern }] });
    expect(refused.status).toBe(400);
    expect(refused.body.field).toBe('survey[0].pattern');
    expect(refused.body.error).toMatch(/^survey\[0\]\.pattern must be RE2 syntax/);
    expect((await t.api.get('/v1/templates')).body.total).toBe(before);
  });

  test('a template stored with a pattern RE2 does not accept refuses to launch with 409 naming the field and the fix, until it is edited', async () => {
    const template = await createTemplate({
      name: 'stored before RE2',
      tool: 'bash',
      command: 'true',
      survey: [
        { var: 'ok', type: 'text', pattern: '[a-z]+' },
        { var: 'ticket', type: 'text', pattern: 'CHG-[0-9]+' },
      ],
    });
    // As saved by an earlier release that took JavaScript syntax.
    const stored = [
      { var: 'ok', type: 'text', pattern: '[a-z]+' },
      { var: 'ticket', type: 'text', pattern: '(?=CHG-)CHG-\\d+' },
    ];
    await sql`UPDATE templates SET survey = ${sql.json(stored)} WHERE id = ${template.id}`;
    const before = await runCount();
    const refused = await launch(template.id, { answers: { ticket: 'CHG-1' } });
    expect(refused.status).toBe(409);
    expect(refused.body.field).toBe('survey[1].pattern');
    expect(refused.body.error).toContain('RE2 syntax');
    expect(refused.body.error).toContain(`PUT /v1/templates/${template.id}`);
    expect(await runCount()).toBe(before);

    // The read still shows it; sent back unchanged it is refused; rewritten, the template launches.
    const read = (await t.api.get(`/v1/templates/${template.id}`)).body;
    expect((await put(template.id, read)).body.field).toBe('survey[1].pattern');
    const fixed = await put(template.id, { ...read, survey: [read.survey[0], { var: 'ticket', type: 'text', pattern: 'CHG-\\d+' }] });
    expect(fixed.status).toBe(200);
    const ran = await launch(template.id, { answers: { ticket: 'CHG-1' } });
    expect(ran.status).toBe(201);
    await waitForRunEnd(t.api, ran.body.id);
  });
});

describe('a changed command does not inherit another account’s sealed default', () => {
  const SECRET = `sealed-${randomBytes(8).toString('hex')}`;
  const clients: Record<string, ApiClient> = {};
  const accountIds: Record<string, string> = {};

  beforeAll(async () => {
    for (const username of ['alma', 'boris']) {
      const user = await t.api.post('/v1/users', { username, role: 'operator' });
      expect(user.status).toBe(201);
      accountIds[username] = user.body.id;
      clients[username] = t.as((await t.api.post('/v1/tokens', { name: username, username })).body.token);
    }
  });

  /** A template of alma's whose required secret question has a sealed default she set; she lets boris manage it too. */
  const almasTemplate = async (name: string) => {
    const template = await createTemplate(
      { name, tool: 'bash', command: hashLine('db_password'), survey: [{ var: 'db_password', type: 'secret', required: true, default: SECRET }] },
      clients.alma,
    );
    expect((await clients.alma.post('/v1/grants', { object: template.id, permission: 'manage', user_id: accountIds.boris })).status).toBe(201);
    return template;
  };

  const editEntry = async (templateId: string) => {
    const entries = (await t.api.get('/v1/audit?limit=1000')).body.entries;
    return entries.find((e: any) => e.body.kind === 'template.updated' && e.body.template_id === templateId).body;
  };

  test('another operator’s edit of the command clears it, even sent back as [redacted]; a launch then has no default', async () => {
    const template = await almasTemplate('leaky edit');
    const edited = await put(template.id, { ...template, command: 'echo "$db_password" | rev' }, clients.boris);
    expect(edited.status).toBe(200);
    expect(edited.body.survey).toEqual([{ var: 'db_password', type: 'secret', required: true }]);
    expect(edited.body.secret_defaults_cleared).toEqual({ db_password: 'run_changed' });
    const entry = await editEntry(template.id);
    expect(entry.secret_defaults).toEqual({ db_password: 'cleared' });
    expect(entry.secret_defaults_cleared).toEqual({ db_password: 'run_changed' });

    const before = await runCount();
    const refused = await launch(template.id, {}, clients.boris);
    expect(refused.status).toBe(400);
    expect(refused.body.field).toBe('answers.db_password');
    expect(await runCount()).toBe(before);
    // The answer with its note, sent back as it is, is a valid edit.
    expect((await put(template.id, edited.body, clients.boris)).status).toBe(200);
  });

  test.each([
    ['the account that set it', 'alma', { command: 'echo changed; ' }],
    ['an admin', 'admin', { command: 'echo changed; ' }],
    ['another operator changing only the name', 'boris', { name: 'renamed' }],
  ])('an edit by %s keeps it', async (_, editor, change) => {
    const template = await almasTemplate(`kept by ${editor} ${JSON.stringify(change)}`);
    const body = { ...template, ...('command' in change ? { command: `${change.command}${template.command}` } : { name: `${template.name} ${change.name}` }) };
    const edited = await put(template.id, body, editor === 'admin' ? t.api : clients[editor]);
    expect(edited.status).toBe(200);
    expect(edited.body.survey[0].default).toBe('[redacted]');
    expect(edited.body.secret_defaults_cleared).toBeUndefined();
    expect((await editEntry(template.id)).secret_defaults).toEqual({ db_password: 'kept' });

    const run = await launch(template.id, {}, clients.alma);
    expect(run.status).toBe(201);
    expect(run.body.secret_vars).toEqual(['db_password']);
    expect((await waitForRunEnd(t.api, run.body.id)).status).toBe('succeeded');
    expect(await logOf(run.body.id)).toContain(`db_password_sha=${sha256(SECRET)}`);
  });

  test('a default stored without its setter counts as set by the template’s creator', async () => {
    const template = await almasTemplate('stored without setter');
    const [{ survey }] = await sql<{ survey: any[] }[]>`SELECT survey FROM templates WHERE id = ${template.id}`;
    expect(survey[0].default_sealed_by).toBe(accountIds.alma);
    await sql`UPDATE templates SET survey = ${sql.json([{ ...survey[0], default_sealed_by: undefined }])} WHERE id = ${template.id}`;

    const byCreator = await put(template.id, { ...template, command: `echo mine; ${template.command}` }, clients.alma);
    expect(byCreator.body.survey[0].default).toBe('[redacted]');
    const byOther = await put(template.id, { ...byCreator.body, command: 'echo "$db_password" | rev' }, clients.boris);
    expect(byOther.body.secret_defaults_cleared).toEqual({ db_password: 'run_changed' });

    // A default boris sets is his: his later command changes keep it.
    const set = await put(template.id, { ...byOther.body, survey: [{ var: 'db_password', type: 'secret', required: true, default: 'boris-own-value' }] }, clients.boris);
    const again = await put(template.id, { ...set.body, command: 'true' }, clients.boris);
    expect(again.body.survey[0].default).toBe('[redacted]');
    expect((await editEntry(template.id)).secret_defaults).toEqual({ db_password: 'kept' });
  });
});
