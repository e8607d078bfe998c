import { randomBytes, randomUUID } from 'node:crypto';
import { requestFingerprint } from '../../services/audit/audit';
import { connectDatabase, type Sql } from '../../store/db';
import { forgeHeaders, githubPush, PUSH_PAYLOADS, SAMPLE_PUSH, SAMPLE_PUSH_VARS, type ForgeName, type SignOptions } from '../support/forge-deliveries';
import type { ApiClient, ApiResponse } from '../support/http';
import { grant, person, template as templateBy } from '../support/access';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { holdAuditHead } from '../support/audit-hold';

/**
 * Webhook triggers end to end: a real server, real PostgreSQL and Temporal, deliveries sent over
 * real HTTP with the HMACs each forge would compute, and the runs they start executed.
 */

const encryption = () => ({
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
});

let t: TestServer;
let sql: Sql;
let anonymous: ApiClient;
let viewer: ApiClient;
let template: { id: string };

beforeAll(async () => {
  // Deliveries here are answered with their launch's outcome, as a sender that waits for it is
  // (the default answers once recorded: test/integration/hook-deliveries.test.ts).
  t = await startTestServer({ ...encryption(), CAIRN_HOOK_ANSWER_WAIT: '4500ms' });
  sql = connectDatabase(t.databaseUrl, { max: 3 });
  anonymous = t.as(null);
  const vera = await t.api.post('/v1/users', { username: 'vera', role: 'viewer' });
  expect(vera.status).toBe(201);
  viewer = t.as((await t.api.post('/v1/tokens', { name: 'v', username: 'vera' })).body.token);
  template = await createTemplate({
    name: 'deploy on push',
    tool: 'bash',
    command: 'echo "forge=$git_forge branch=$git_branch tag=$git_tag commit=$git_commit repo=$git_repository by=$git_pusher ref=$git_ref"',
  });
  // A trigger follows its template: the viewer reads its triggers by reading the template.
  await grant(t.api, template.id, 'read', { user_id: vera.body.id });
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

async function createTemplate(body: Record<string, unknown>): Promise<{ id: string }> {
  const created = await t.api.post('/v1/templates', body);
  if (created.status !== 201) throw new Error(`template create: ${created.status} ${created.text}`);
  return created.body;
}

interface Made {
  id: string;
  secret: string;
  hook_path: string;
  [key: string]: unknown;
}

async function createTrigger(body: Record<string, unknown> = {}): Promise<Made> {
  const created = await t.api.post('/v1/triggers', { name: 'push hook', template_id: template.id, ...body });
  if (created.status !== 201) throw new Error(`trigger create: ${created.status} ${created.text}`);
  return created.body;
}

/** Sends a delivery as a forge would: the body's exact bytes, signed with `secret` as that forge signs. */
function deliver(
  hookPath: string,
  secret: string,
  options: SignOptions & { forge?: ForgeName; payload?: unknown; rawBody?: string; headers?: Record<string, string> } = {},
): Promise<ApiResponse> {
  const forge = options.forge ?? 'github';
  const raw = options.rawBody ?? JSON.stringify(options.payload ?? PUSH_PAYLOADS[forge]());
  return anonymous.request('POST', hookPath, { rawBody: raw, headers: { ...forgeHeaders(forge, raw, secret, options), ...options.headers } });
}

const triggerRuns = async (triggerId: string) =>
  (await sql<{ id: string }[]>`SELECT id FROM runs WHERE source_kind = 'trigger' AND source_id = ${triggerId} ORDER BY id`).map((r) => r.id);

const readTrigger = async (id: string) => (await t.api.get(`/v1/triggers/${id}`)).body;

async function auditEntries(): Promise<any[]> {
  return (await t.api.get('/v1/audit?limit=1000&order=asc')).body.entries;
}

describe('triggers: make, read, change, rotate, delete', () => {
  test('create answers the signing secret and hook path once; no read shows either', async () => {
    const created = await t.api.post('/v1/triggers', { name: 'web push', template_id: template.id });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`/v1/triggers/${created.body.id}`);
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^trg_/),
      name: 'web push',
      kind: 'push',
      template_id: template.id,
      enforce_signature: true,
      created_by: 'admin',
      last_error: null,
      last_error_at: null,
      secret: expect.stringMatching(/^cairn_whsec_/),
      hook_path: expect.stringMatching(/^\/hooks\/cairn_hook_/),
    });
    const { secret, hook_path: hookPath, ...view } = created.body;
    const token = hookPath.slice('/hooks/'.length);

    const read = await t.api.get(`/v1/triggers/${view.id}`);
    expect(read.body).toEqual(view);
    const list = await viewer.get(`/v1/triggers?id=${view.id}`);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ count: 1, total: 1, has_more: false, triggers: [view] });
    for (const text of [read.text, list.text, (await t.api.get('/v1/triggers')).text, JSON.stringify(await auditEntries())]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain(token);
    }
    // Stored sealed and hashed, never in clear.
    const [row] = await sql`SELECT * FROM triggers WHERE id = ${view.id}`;
    expect(JSON.stringify(row)).not.toContain(secret);
    expect(JSON.stringify(row)).not.toContain(token);
    expect(row.secret_sealed).toMatch(/^v1\./);
  });

  test('the list pages by limit and offset, and filters by id', async () => {
    const a = await createTrigger({ name: 'page a' });
    const b = await createTrigger({ name: 'page b' });
    const paged = await t.api.get(`/v1/triggers?id=${a.id}&id=${b.id}&limit=1`);
    expect(paged.body).toMatchObject({ count: 1, total: 2, has_more: true, next_offset: 1 });
    expect(paged.body.triggers[0].id).toBe(a.id);
    const next = await t.api.get(`/v1/triggers?id=${a.id}&id=${b.id}&limit=1&offset=1`);
    expect(next.body.triggers[0].id).toBe(b.id);
    expect((await t.api.get('/v1/triggers?limit=1001')).body).toMatchObject({ field: 'limit' });
  });

  test('bad bodies are 400 naming the field, review settings included', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ template_id: template.id }, 'name'],
      [{ name: 'x' }, 'template_id'],
      [{ name: 'x', template_id: 'tpl_missing' }, 'template_id'],
      [{ name: 'x', template_id: template.id, enforce_signature: 'yes' }, 'enforce_signature'],
      [{ name: 'x', template_id: template.id, secret: 'short' }, 'secret'],
      [{ name: 'x', template_id: template.id, secret: 'a line\nbreak inside it, sixteen+' }, 'secret'],
      [{ name: 'x', template_id: template.id, secret: 'a tab\tinside it, sixteen+' }, 'secret'],
      [{ name: 'x', template_id: template.id, secret: ' a space before it, sixteen+' }, 'secret'],
      [{ name: 'x', template_id: template.id, secret: 'a space after it, sixteen+ ' }, 'secret'],
      [{ name: 'x', template_id: template.id, secret: 'x'.repeat(256) }, 'secret'],
      [{ name: 'x', template_id: template.id, colour: 'red' }, 'colour'],
      [{ name: 'x', template_id: template.id, review: 'yes' }, 'review'],
      [{ name: 'x', template_id: template.id, review: { plan: true } }, 'review.forge'],
      [{ name: 'x', template_id: template.id, review: { forge: 'bitbucket', token: 'ghp_x' } }, 'review.forge'],
      [{ name: 'x', template_id: template.id, review: { forge: 'github', token: 'ghp_x', api_url: 'ftp://forge.example' } }, 'review.api_url'],
      [{ name: 'x', template_id: template.id, review: { forge: 'github', token: 'has a space' } }, 'review.token'],
      [{ name: 'x', template_id: template.id, review: { forge: 'github' } }, 'review.token'],
    ];
    for (const [body, field] of cases) {
      const answer = await t.api.post('/v1/triggers', body);
      expect({ body, status: answer.status, field: answer.body.field }).toEqual({ body, status: 400, field });
    }
    expect(await sql`SELECT id FROM triggers WHERE name = 'x'`).toHaveLength(0);
  });

  test('a viewer reads but cannot make, change, rotate or delete a trigger', async () => {
    const made = await createTrigger();
    const writes = [
      viewer.post('/v1/triggers', { name: 'v', template_id: template.id }),
      viewer.request('PUT', `/v1/triggers/${made.id}`, { body: { name: 'renamed' } }),
      viewer.post(`/v1/triggers/${made.id}/rotate-secret`, {}),
      viewer.request('DELETE', `/v1/triggers/${made.id}`),
    ];
    for (const answer of await Promise.all(writes)) expect(answer.body).toMatchObject({ required_role: 'operator' });
    expect((await viewer.get(`/v1/triggers/${made.id}`)).status).toBe(200);
  });

  test('a trigger follows its template: made by who may use it, read by who reads it, changed by its owner or the template’s managers', async () => {
    const owner = await person(t.api, 'operator');
    const other = await person(t.api, 'operator');
    const [asOwner, asOther] = [owner, other].map((p) => t.as(p.token));
    const tpl = await templateBy(t.api);
    expect(await asOwner.post('/v1/triggers', { name: 'x', template_id: tpl.id })).toMatchObject({ status: 400, body: { field: 'template_id' } });
    await grant(t.api, tpl.id, 'use', { user_id: owner.id });
    const made = await asOwner.post('/v1/triggers', { name: 'owned', template_id: tpl.id });
    expect(made.status).toBe(201);
    const id = made.body.id;
    expect((await asOther.get(`/v1/triggers/${id}`)).status).toBe(404);
    expect((await asOther.get('/v1/triggers')).body).toMatchObject({ total: 0 });
    expect((await asOther.post(`/v1/triggers/${id}/rotate-secret`, {})).status).toBe(404);
    await grant(t.api, tpl.id, 'use', { user_id: other.id });
    expect((await asOther.get(`/v1/triggers/${id}`)).status).toBe(200);
    expect((await asOther.request('DELETE', `/v1/triggers/${id}`))).toMatchObject({ status: 403, body: { required_grant: 'manage' } });
    expect((await asOwner.request('PUT', `/v1/triggers/${id}`, { body: { name: 'renamed' } })).status).toBe(200);
    expect((await asOwner.request('DELETE', `/v1/triggers/${id}`)).status).toBe(204);
  });

  test('PUT renames and toggles enforcement; a read sent back is a valid body; the template cannot change', async () => {
    const made = await createTrigger({ name: 'before' });
    const renamed = await t.api.request('PUT', `/v1/triggers/${made.id}`, { body: { name: 'after', enforce_signature: false } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'after', enforce_signature: false, template_id: template.id });
    const sentBack = await t.api.request('PUT', `/v1/triggers/${made.id}`, { body: { ...renamed.body, enforce_signature: true } });
    expect(sentBack.body).toMatchObject({ name: 'after', enforce_signature: true });
    const other = await createTemplate({ name: 'other template', tool: 'bash', command: 'true' });
    const moved = await t.api.request('PUT', `/v1/triggers/${made.id}`, { body: { name: 'after', template_id: other.id } });
    expect(moved).toMatchObject({ status: 400, body: { field: 'template_id' } });
    const wrongId = await t.api.request('PUT', `/v1/triggers/${made.id}`, { body: { ...sentBack.body, id: 'trg_other' } });
    expect(wrongId).toMatchObject({ status: 400, body: { field: 'id' } });
    expect((await t.api.request('PUT', '/v1/triggers/trg_missing', { body: { name: 'n' } })).status).toBe(404);
    const kinds = (await auditEntries()).filter((e) => e.body?.trigger_id === made.id).map((e) => e.body.kind);
    expect(kinds).toEqual(['trigger.created', 'trigger.updated', 'trigger.updated']);
  });

  test('a PUT keeps what it omits: renaming a trigger without enforce_signature leaves enforcement off', async () => {
    const made = await createTrigger({ name: 'unsigned hook', enforce_signature: false });
    const renamed = await t.api.request('PUT', `/v1/triggers/${made.id}`, { body: { name: 'renamed hook' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'renamed hook', enforce_signature: false });
    const toggled = await t.api.request('PUT', `/v1/triggers/${made.id}`, { body: { enforce_signature: true } });
    expect(toggled.body).toMatchObject({ name: 'renamed hook', enforce_signature: true });
    const nulls = await t.api.request('PUT', `/v1/triggers/${made.id}`, { body: { name: null, enforce_signature: null } });
    expect(nulls.body).toMatchObject({ name: 'renamed hook', enforce_signature: true });
    expect(await readTrigger(made.id)).toMatchObject({ name: 'renamed hook', enforce_signature: true });
    // An unsigned delivery to the renamed, still unenforced trigger was accepted before the toggle.
    const unsigned = await createTrigger({ enforce_signature: false });
    await t.api.request('PUT', `/v1/triggers/${unsigned.id}`, { body: { name: 'renamed unsigned' } });
    expect((await deliver(unsigned.hook_path, unsigned.secret, { unsigned: true })).status).toBe(201);
  });

  test('DELETE revokes the hook: its deliveries answer 404 and launch nothing', async () => {
    const made = await createTrigger();
    expect((await t.api.request('DELETE', `/v1/triggers/${made.id}`)).status).toBe(204);
    expect((await t.api.get(`/v1/triggers/${made.id}`)).status).toBe(404);
    expect((await t.api.request('DELETE', `/v1/triggers/${made.id}`)).status).toBe(404);
    const answer = await deliver(made.hook_path, made.secret);
    expect(answer.status).toBe(404);
    expect(await triggerRuns(made.id)).toEqual([]);
  });

  test("a secret of the caller's own is kept out of the request's fingerprint", async () => {
    const secret = `own-secret-${randomBytes(8).toString('hex')}`;
    const made = await createTrigger({ name: 'own secret', secret });
    expect(made.secret).toBe(secret);
    const entry = (await auditEntries()).find((e) => e.body?.kind === 'trigger.created' && e.body.trigger_id === made.id);
    const body = { name: 'own secret', template_id: template.id, secret };
    expect(entry.fingerprint).toBe(requestFingerprint('POST', '/v1/triggers', {}, body, new Set(['secret'])));
    expect(entry.fingerprint).toBe(requestFingerprint('POST', '/v1/triggers', {}, { ...body, secret: 'any other value' }, new Set(['secret'])));
    expect((await deliver(made.hook_path, secret)).status).toBe(201);
  });
});

describe('secrets a forge accepts, and Bitbucket', () => {
  test("GitHub's documented example secret, with spaces and an apostrophe, is accepted and checks a GitHub delivery", async () => {
    const secret = "It's a Secret to Everybody";
    const made = await createTrigger({ name: 'documented secret', secret });
    expect(made.secret).toBe(secret);
    const github = await deliver(made.hook_path, secret, { forge: 'github' });
    expect(github.status).toBe(201);
    const gitlab = await deliver(made.hook_path, secret, { forge: 'gitlab' });
    expect(gitlab.status).toBe(201);
    expect((await deliver(made.hook_path, "It's a Secret to Everybody!", { forge: 'github' })).status).toBe(403);
    const rotated = await t.api.post(`/v1/triggers/${made.id}/rotate-secret`, { secret: 'Ünïcödé secrets are text too' });
    expect(rotated.status).toBe(200);
    const gitea = await deliver(made.hook_path, 'Ünïcödé secrets are text too', { forge: 'gitea' });
    expect(gitea.status).toBe(201);
    // Their ends are on the audit chain: let them land before the next test counts it.
    for (const answer of [github, gitlab, gitea]) expect((await waitForRunEnd(t.api, answer.body.run_id)).status).toBe('succeeded');
  });

  test('a Bitbucket Cloud push, signed in X-Hub-Signature, starts the template with what it says; a redelivery starts nothing more', async () => {
    const made = await createTrigger({ name: 'bitbucket' });
    const facts = { ...SAMPLE_PUSH, ref: 'refs/heads/release', pusher: 'bb-user', repository: 'team/infra' };
    const delivery = randomUUID();
    const answer = await deliver(made.hook_path, made.secret, { forge: 'bitbucket', payload: PUSH_PAYLOADS.bitbucket(facts), delivery });
    expect(answer.status).toBe(201);
    const run = await waitForRunEnd(t.api, answer.body.run_id);
    expect(run.status).toBe('succeeded');
    expect(run.extra_vars).toMatchObject({ git_forge: 'bitbucket', git_ref: 'refs/heads/release', git_branch: 'release', git_tag: '', git_commit: SAMPLE_PUSH.commit, git_repository: 'team/infra', git_pusher: 'bb-user' });
    const again = await deliver(made.hook_path, made.secret, { forge: 'bitbucket', payload: PUSH_PAYLOADS.bitbucket(facts), delivery });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ run_id: run.id, repeated: true });
    expect((await deliver(made.hook_path, 'not-the-secret-at-all', { forge: 'bitbucket' })).body).toMatchObject({ header: 'X-Hub-Signature' });
    expect((await deliver(made.hook_path, made.secret, { forge: 'bitbucket', unsigned: true })).status).toBe(401);
    expect(await triggerRuns(made.id)).toEqual([run.id]);
  });
});

describe('deliveries: the signature is checked first', () => {
  test('a GitHub push signed with the secret starts the template with what the push says', async () => {
    const made = await createTrigger();
    const answer = await deliver(made.hook_path, made.secret, { forge: 'github' });
    expect(answer.status).toBe(201);
    expect(answer.body).toEqual({ run_id: expect.stringMatching(/^run_/), status: 'pending', trigger_id: made.id, delivery_id: expect.any(String) });
    expect(answer.headers.get('location')).toBe(`/v1/runs/${answer.body.run_id}`);
    const run = await waitForRunEnd(t.api, answer.body.run_id);
    expect(run).toMatchObject({
      status: 'succeeded',
      template_id: template.id,
      source: { kind: 'trigger', id: made.id },
      requested_by: 'admin',
      extra_vars: SAMPLE_PUSH_VARS,
    });
    const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
    expect(log).toContain(`forge=github branch=main tag= commit=${SAMPLE_PUSH.commit} repo=acme/web by=octocat ref=refs/heads/main`);
    // The chain names the trigger, never the token in the hook's path.
    const entry = (await auditEntries()).find((e) => e.body?.kind === 'run.submitted' && e.body.run_id === run.id);
    expect(entry).toMatchObject({ method: 'POST', path: `/hooks/${made.id}`, actor: 'admin', body: { source: { kind: 'trigger', id: made.id } } });
  });

  test.each(['gitlab', 'gitea'] as const)('a %s push in its own format starts the template', async (forge) => {
    const made = await createTrigger();
    const facts = { ...SAMPLE_PUSH, ref: 'refs/tags/v2.0.0', pusher: `${forge}-user`, repository: `group/${forge}` };
    const answer = await deliver(made.hook_path, made.secret, { forge, payload: PUSH_PAYLOADS[forge](facts), ...(forge === 'gitlab' ? { event: 'Tag Push Hook' } : {}) });
    expect(answer.status).toBe(201);
    const run = await waitForRunEnd(t.api, answer.body.run_id);
    expect(run.extra_vars).toMatchObject({ git_forge: forge, git_tag: 'v2.0.0', git_branch: '', git_pusher: `${forge}-user`, git_repository: `group/${forge}` });
    expect(run.status).toBe('succeeded');
  });

  test("GitHub's form-encoded delivery is read from its payload field, signed over the form bytes", async () => {
    const made = await createTrigger();
    const raw = new URLSearchParams({ payload: JSON.stringify(githubPush()) }).toString();
    const answer = await deliver(made.hook_path, made.secret, { rawBody: raw, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(answer.status).toBe(201);
    // Ended before the next test counts the audit chain, which this run's entries would grow.
    expect((await waitForRunEnd(t.api, answer.body.run_id)).status).toBe('succeeded');
  });

  test('a wrong signature is 403 and a missing one 401: nothing launched, nothing recorded', async () => {
    const made = await createTrigger();
    const chainBefore = (await auditEntries()).length;
    const wrong = await deliver(made.hook_path, 'not-the-secret-at-all');
    expect(wrong.status).toBe(403);
    expect(wrong.body.error).toMatch(/X-Hub-Signature-256 does not match/);
    const wrongToken = await deliver(made.hook_path, 'not-the-secret-at-all', { forge: 'gitlab' });
    expect(wrongToken).toMatchObject({ status: 403, body: { header: 'X-Gitlab-Token' } });
    // The right signature over other bytes: a body altered on the way.
    const raw = JSON.stringify(githubPush());
    const tampered = await anonymous.request('POST', made.hook_path, {
      rawBody: raw.replace('acme/web', 'evil/web'),
      headers: forgeHeaders('github', raw, made.secret),
    });
    expect(tampered.status).toBe(403);
    const missing = await deliver(made.hook_path, made.secret, { unsigned: true });
    expect(missing.status).toBe(401);
    expect(missing.body.error).toMatch(/needs a signed delivery/);
    expect(await triggerRuns(made.id)).toEqual([]);
    expect(await readTrigger(made.id)).toMatchObject({ last_error: null, last_error_at: null, last_delivery_at: null });
    expect((await auditEntries()).length).toBe(chainBefore);
  });

  test('a rotated secret is answered once, and the old one is refused from then on', async () => {
    const made = await createTrigger();
    expect((await deliver(made.hook_path, made.secret)).status).toBe(201);
    const rotated = await t.api.post(`/v1/triggers/${made.id}/rotate-secret`, {});
    expect(rotated.status).toBe(200);
    expect(rotated.body).toMatchObject({ id: made.id, secret: expect.stringMatching(/^cairn_whsec_/), secret_rotated_at: expect.any(String) });
    expect(rotated.body.secret).not.toBe(made.secret);
    expect((await t.api.get(`/v1/triggers/${made.id}`)).text).not.toContain(rotated.body.secret);

    const old = await deliver(made.hook_path, made.secret);
    expect(old.status).toBe(403);
    const oldToken = await deliver(made.hook_path, made.secret, { forge: 'gitlab' });
    expect(oldToken.status).toBe(403);
    expect(await triggerRuns(made.id)).toHaveLength(1);
    expect((await deliver(made.hook_path, rotated.body.secret)).status).toBe(201);
    expect((await deliver(made.hook_path, rotated.body.secret, { forge: 'gitea' })).status).toBe(201);
    expect(await triggerRuns(made.id)).toHaveLength(3);
    const kinds = (await auditEntries()).filter((e) => e.body?.trigger_id === made.id).map((e) => e.body.kind);
    expect(kinds).toContain('trigger.secret_rotated');
    expect(JSON.stringify(await auditEntries())).not.toContain(rotated.body.secret);
  });

  test('with enforcement off an unsigned delivery fires, but a wrong signature is still refused', async () => {
    const made = await createTrigger({ enforce_signature: false });
    const unsigned = await deliver(made.hook_path, made.secret, { unsigned: true });
    expect(unsigned.status).toBe(201);
    const wrong = await deliver(made.hook_path, 'wrong-secret-for-sure');
    expect(wrong.status).toBe(403);
    expect(await triggerRuns(made.id)).toEqual([unsigned.body.run_id]);
    // Turned back on, the same unsigned delivery is refused.
    await t.api.request('PUT', `/v1/triggers/${made.id}`, { body: { name: 'push hook', enforce_signature: true } });
    expect((await deliver(made.hook_path, made.secret, { unsigned: true })).status).toBe(401);
  });

  test('an unknown token is 404 and launches nothing', async () => {
    const before = (await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs`)[0].n;
    const answer = await deliver(`/hooks/cairn_hook_${randomBytes(32).toString('base64url')}`, 'any-secret-whatever');
    expect(answer.status).toBe(404);
    expect(answer.text).not.toContain('cairn_hook_');
    expect((await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM runs`)[0].n).toBe(before);
  });

  test('an oversized body is 413 and launches nothing', async () => {
    const made = await createTrigger();
    const raw = JSON.stringify(githubPush(SAMPLE_PUSH, { padding: 'x'.repeat(1024 * 1024) }));
    const answer = await deliver(made.hook_path, made.secret, { rawBody: raw });
    expect(answer.status).toBe(413);
    expect(answer.body).toMatchObject({ limit_bytes: 1024 * 1024 });
    expect(await triggerRuns(made.id)).toEqual([]);
  });

  test("a bearer token is no substitute for a delivery's signature", async () => {
    const made = await createTrigger();
    const withToken = await t.api.request('POST', made.hook_path, { rawBody: '{}', headers: { 'content-type': 'application/json' } });
    expect(withToken.status).toBe(401);
    expect((await anonymous.get(made.hook_path)).status).toBe(405);
  });
});

describe('deliveries: what starts no run is said on last_error', () => {
  test('a survey nobody can answer is 409 naming its questions, recorded on last_error and in the chain', async () => {
    const asking = await createTemplate({
      name: 'asks questions',
      tool: 'bash',
      command: 'true',
      survey: [
        { var: 'approver', type: 'text', required: true },
        { var: 'region', type: 'text', required: true, default: 'eu' },
        { var: 'ticket', type: 'text', required: true },
      ],
    });
    const made = await createTrigger({ template_id: asking.id });
    const answer = await deliver(made.hook_path, made.secret);
    expect(answer.status).toBe(409);
    expect(answer.body).toEqual({ error: expect.stringMatching(/approver, ticket have no default/), questions: ['approver', 'ticket'] });
    expect(await triggerRuns(made.id)).toEqual([]);
    const read = await readTrigger(made.id);
    expect(read.last_error).toBe(answer.body.error);
    expect(Date.parse(read.last_error_at)).toBeGreaterThan(Date.now() - 60_000);
    const refusals = (await auditEntries()).filter((e) => e.path === `/hooks/${made.id}/refused/survey/approver,ticket`);
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({ method: 'POST', outcome: 409, body: { kind: 'trigger.refused', trigger_id: made.id, questions: ['approver', 'ticket'] } });

    // Once the template can be answered, the next delivery starts a run and clears last_error.
    const fixed = await t.api.request('PUT', `/v1/templates/${asking.id}`, { body: { name: 'asks questions', tool: 'bash', command: 'true' } });
    expect(fixed.status).toBe(200);
    expect((await deliver(made.hook_path, made.secret)).status).toBe(201);
    expect(await readTrigger(made.id)).toMatchObject({ last_error: null, last_error_at: null });
  });

  test("a template that no longer exists is a 409 naming the error only; the trigger's list shows it", async () => {
    const doomed = await createTemplate({ name: 'doomed', tool: 'bash', command: 'true' });
    const made = await createTrigger({ template_id: doomed.id });
    expect((await t.api.request('DELETE', `/v1/templates/${doomed.id}`)).status).toBe(204);
    const answer = await deliver(made.hook_path, made.secret);
    expect(answer.status).toBe(409);
    expect(answer.body).toEqual({ error: `this template cannot launch: template ${doomed.id} no longer exists` });
    const listed = (await t.api.get(`/v1/triggers?id=${made.id}`)).body.triggers[0];
    expect(listed).toMatchObject({ last_error: answer.body.error, last_error_at: expect.any(String) });
  });

  test('a non-push event and a ref deletion are skipped with why; a ping is answered and not recorded', async () => {
    const made = await createTrigger();
    const ping = await deliver(made.hook_path, made.secret, { event: 'ping', payload: { zen: 'Design for failure.', hook_id: 1 } });
    expect(ping).toMatchObject({ status: 200, body: { ping: true } });
    expect(await readTrigger(made.id)).toMatchObject({ last_error: null, last_delivery_at: null });

    const issue = await deliver(made.hook_path, made.secret, { event: 'issues', payload: { action: 'opened' } });
    expect(issue).toMatchObject({ status: 200, body: { skipped: true, reason: 'github issues events start no run: this trigger fires on a push' } });
    expect((await readTrigger(made.id)).last_error).toBe(issue.body.reason);

    const deleted = await deliver(made.hook_path, made.secret, { payload: githubPush(SAMPLE_PUSH, { deleted: true, after: '0'.repeat(40) }) });
    expect(deleted).toMatchObject({ status: 200, body: { skipped: true } });
    expect((await readTrigger(made.id)).last_error).toBe('the push deleted refs/heads/main: there is nothing to run');
    expect(await triggerRuns(made.id)).toEqual([]);
  });

  test("a push whose template's inventory holds no host is skipped with why, 200, and starts nothing", async () => {
    const inventory = (await t.api.post('/v1/inventories', { name: `empty ${Date.now()}`, content: 'all:\n  hosts: {}\n' })).body;
    const play = '- hosts: all\n  gather_facts: false\n  tasks: [{ ansible.builtin.ping: }]\n';
    const hostless = await createTemplate({ name: `hostless ${Date.now()}`, tool: 'ansible', command: play, inventory_id: inventory.id });
    const made = await createTrigger({ template_id: hostless.id });
    const answer = await deliver(made.hook_path, made.secret);
    expect(answer).toMatchObject({ status: 200, body: { skipped: true, reason: `inventory ${inventory.name} holds no hosts`, trigger_id: made.id } });
    expect((await readTrigger(made.id)).last_error).toBe(answer.body.reason);
    expect(await triggerRuns(made.id)).toEqual([]);
  });

  test('a signed body that is not JSON, or not a push, is 400 and recorded', async () => {
    const made = await createTrigger();
    const notJson = await deliver(made.hook_path, made.secret, { rawBody: '{"ref": ' });
    expect(notJson.status).toBe(400);
    expect((await readTrigger(made.id)).last_error).toMatch(/^the delivery's body could not be read: request body is not valid JSON/);
    const noRef = await deliver(made.hook_path, made.secret, { payload: { after: 'abc' } });
    expect(noRef).toMatchObject({ status: 400, body: { field: 'ref' } });
    expect(await triggerRuns(made.id)).toEqual([]);
  });

  test('a trigger whose owner became a viewer does not fire as them', async () => {
    const ottoId = (await t.api.post('/v1/users', { username: 'otto', role: 'operator' })).body.id;
    const otto = t.as((await t.api.post('/v1/tokens', { name: 'o', username: 'otto' })).body.token);
    const own = (await otto.post('/v1/templates', { name: "otto's template", tool: 'bash', command: 'true' })).body;
    const made = (await otto.post('/v1/triggers', { name: "otto's", template_id: own.id })).body;
    expect((await deliver(made.hook_path, made.secret)).status).toBe(201);
    expect((await t.api.request('PUT', `/v1/users/${ottoId}`, { body: { role: 'viewer' } })).status).toBe(200);
    const answer = await deliver(made.hook_path, made.secret);
    expect(answer).toMatchObject({ status: 409, body: { error: expect.stringMatching(/owner \(.*\), otto, is now a viewer and may not submit runs/) } });
    expect(await triggerRuns(made.id)).toHaveLength(1);
  });
});

describe('deliveries: repeats and answer time', () => {
  test('a repeated delivery id launches once, however often and however concurrently it comes', async () => {
    const made = await createTrigger();
    const delivery = randomUUID();
    const first = await deliver(made.hook_path, made.secret, { delivery });
    expect(first.status).toBe(201);
    const again = await deliver(made.hook_path, made.secret, { delivery });
    expect(again).toMatchObject({ status: 200, body: { run_id: first.body.run_id, repeated: true } });

    const burst = randomUUID();
    const answers = await Promise.all(Array.from({ length: 8 }, () => deliver(made.hook_path, made.secret, { delivery: burst, forge: 'gitlab' })));
    const runIds = new Set(answers.map((a) => a.body.run_id));
    expect(runIds.size).toBe(1);
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(await triggerRuns(made.id)).toHaveLength(2);
    // The same delivery id on another trigger is another delivery.
    const other = await createTrigger();
    expect((await deliver(other.hook_path, other.secret, { delivery })).status).toBe(201);
  });

  test('a delivery is answered well within five seconds', async () => {
    const made = await createTrigger();
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = Date.now();
      expect((await deliver(made.hook_path, made.secret)).status).toBe(201);
      times.push(Date.now() - started);
    }
    expect(Math.max(...times)).toBeLessThan(5000);
  });

  test('a launch still going at the end of the answer wait is answered 202 accepted, and its run follows once', async () => {
    const made = await createTrigger();
    // Hold the audit chain's head so the launch's insert waits, as a very busy database would make it.
    const release = await holdAuditHead(sql);
    const started = Date.now();
    const answer = await deliver(made.hook_path, made.secret);
    const took = Date.now() - started;
    await release();
    expect(answer).toMatchObject({ status: 202, body: { accepted: true, trigger_id: made.id, delivery_id: expect.any(String) } });
    expect(answer.headers.get('location')).toBe(`/v1/triggers/${made.id}/deliveries/${answer.body.delivery_id}`);
    expect(took).toBeLessThan(5000);
    const deadline = Date.now() + 10_000;
    let runs: string[] = [];
    while (runs.length === 0 && Date.now() < deadline) {
      runs = await triggerRuns(made.id);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(runs).toHaveLength(1);
    expect((await waitForRunEnd(t.api, runs[0])).status).toBe('succeeded');
  });
});

describe('without the encryption key', () => {
  let bare: TestServer;
  beforeAll(async () => {
    bare = await startTestServer();
  });
  afterAll(async () => {
    await bare?.stop();
  });

  test('making a trigger is 409 naming both settings, and nothing is made', async () => {
    const tpl = (await bare.api.post('/v1/templates', { name: 't', tool: 'bash', command: 'true' })).body;
    const answer = await bare.api.post('/v1/triggers', { name: 'hook', template_id: tpl.id });
    expect(answer.status).toBe(409);
    expect(answer.body.error).toContain('SERVICE_ENCRYPTION_KEY');
    expect(answer.body.error).toContain('SERVICE_ENCRYPTION_SALT');
    expect((await bare.api.get('/v1/triggers')).body.total).toBe(0);
  });
});

