import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { createSealer } from '../../core/credentials/seal';
import { requestFingerprint } from '../../services/audit/audit';
import { everyPage, grant, person, template, tokenOf, type Person } from '../support/access';
import { forgeHeaders, PUSH_PAYLOADS } from '../support/forge-deliveries';
import type { ApiClient } from '../support/http';
import { createTestDatabase, schemaBefore } from '../support/database';
import { migrate } from '../../store/migrate';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * Credentials and custom credential types (spec part A 2.9, 4.9; part B 5.2, 5.3, 7.2): CRUD,
 * masked reads, roles and grants (persons and agents alike), 409s for what still uses one, for a
 * missing key, for a credential with no secret and for one sealed under another key; the
 * credentials runs, splits and pipelines are given, and show on every read of them.
 */

const keys = () => ({
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
});

let t: TestServer;
let sql: postgres.Sql;
let alice: Person; // operator
let bob: Person; // operator
let vera: Person; // viewer
let as: (p: Person | string) => ApiClient;
const AWS_SECRET = `aws-secret-${randomBytes(8).toString('hex')}`;
const put = (api: ApiClient, path: string, body: unknown) => api.request('PUT', path, { body });
const del = (api: ApiClient, path: string) => api.request('DELETE', path);

beforeAll(async () => {
  // An issuer, so a run given an oidc_token credential gets its token (test/integration/federation.test.ts verifies them).
  // A webhook here is answered with its launch's outcome (CAIRN_HOOK_ANSWER_WAIT), as a sender that waits for it is.
  t = await startTestServer({ ...keys(), CAIRN_FEDERATION_ISSUER: 'https://cairn.example.com', CAIRN_HOOK_ANSWER_WAIT: '4500ms' });
  sql = postgres(t.databaseUrl, { max: 2, onnotice: () => undefined });
  as = (p) => t.as(typeof p === 'string' ? p : p.token);
  alice = await person(t.api, 'operator', 'user', 'alice');
  bob = await person(t.api, 'operator', 'user', 'bob');
  vera = await person(t.api, 'viewer', 'user', 'vera');
}, 60_000);

afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

async function awsCredential(by: ApiClient, extra: Record<string, unknown> = {}) {
  const res = await by.post('/v1/credentials', {
    name: `aws-${randomBytes(3).toString('hex')}`,
    kind: 'aws',
    inputs: { access_key: 'AKIAEXAMPLE', secret_key: AWS_SECRET, region: 'eu-west-1' },
    ...extra,
  });
  if (res.status !== 201) throw new Error(`creating a credential: ${res.status} ${res.text}`);
  return res.body;
}

describe('kinds and reads', () => {
  test('fifteen built-in kinds, the four federated ones with no secret field', async () => {
    const res = await as(vera).get('/v1/credential-kinds');
    expect(res.status).toBe(200);
    const kinds = res.body.kinds.map((k: any) => k.kind);
    expect(kinds).toHaveLength(15);
    for (const k of ['machine', 'scm', 'vault', 'aws', 'gcp', 'azure', 'kubernetes', 'registry', 'network', 'hashicorp_token', 'aws_oidc', 'gcp_oidc', 'azure_oidc', 'oidc_token']) {
      expect(kinds).toContain(k);
    }
    for (const k of res.body.kinds.filter((k: any) => k.federated)) expect(k.fields.some((f: any) => f.secret)).toBe(false);
    expect(res.body.kinds.filter((k: any) => k.federated).map((k: any) => k.kind).sort()).toEqual(['aws_oidc', 'azure_oidc', 'gcp_oidc', 'oidc_token']);
    const machine = res.body.kinds.find((k: any) => k.kind === 'machine');
    expect(machine.fields.filter((f: any) => f.secret).map((f: any) => f.id)).toEqual(['password', 'ssh_key_data', 'ssh_key_unlock', 'become_password']);
  });

  test('a secret is sealed and never returned; reads show [redacted] and secrets_set; an echoed mask or blank keeps it, null clears it', async () => {
    const created = await alice_post();
    expect(created).toMatchObject({
      kind: 'aws',
      inputs: { access_key: 'AKIAEXAMPLE', secret_key: '[redacted]', region: 'eu-west-1' },
      secrets_set: ['secret_key'],
      status: 'ready',
      owner_id: alice.id,
      created_by: alice.username,
    });
    const [row] = await sql`SELECT inputs, sealed FROM credentials WHERE id = ${created.id}`;
    expect(JSON.stringify(row.inputs)).not.toContain(AWS_SECRET);
    expect(row.sealed.secret_key).toMatch(/^v1\./);
    expect(JSON.stringify(row.sealed)).not.toContain(AWS_SECRET);

    const read = await as(alice).get(`/v1/credentials/${created.id}`);
    expect(read.text).not.toContain(AWS_SECRET);
    // The read sent back unchanged keeps the secret.
    const echoed = await put(as(alice), `/v1/credentials/${created.id}`, { ...read.body, name: 'renamed' });
    expect(echoed.status).toBe(200);
    expect(echoed.body).toMatchObject({ name: 'renamed', secrets_set: ['secret_key'], status: 'ready' });
    expect((await sql`SELECT sealed FROM credentials WHERE id = ${created.id}`)[0].sealed.secret_key).toBe(row.sealed.secret_key);
    // Blank keeps it too.
    const blank = await put(as(alice), `/v1/credentials/${created.id}`, { name: 'renamed', kind: 'aws', inputs: { access_key: 'AKIA2', secret_key: '' } });
    expect(blank.body).toMatchObject({ inputs: { access_key: 'AKIA2', secret_key: '[redacted]' }, status: 'ready' });
    expect((await sql`SELECT sealed FROM credentials WHERE id = ${created.id}`)[0].sealed.secret_key).toBe(row.sealed.secret_key);
    // A new value replaces it; null clears it, and the credential then waits for its secret.
    const replaced = await put(as(alice), `/v1/credentials/${created.id}`, { name: 'renamed', kind: 'aws', inputs: { access_key: 'AKIA2', secret_key: 'another-secret-value' } });
    expect(replaced.status).toBe(200);
    expect((await sql`SELECT sealed FROM credentials WHERE id = ${created.id}`)[0].sealed.secret_key).not.toBe(row.sealed.secret_key);
    const cleared = await put(as(alice), `/v1/credentials/${created.id}`, { name: 'renamed', kind: 'aws', inputs: { access_key: 'AKIA2', secret_key: null } });
    expect(cleared.body).toMatchObject({ secrets_set: [], status: 'needs_secret' });
    expect(cleared.body.inputs).toEqual({ access_key: 'AKIA2' });

    // Nothing written anywhere readable holds the secret: the chain's entries and the request fingerprints.
    const audit = await t.api.get('/v1/audit?limit=1000');
    expect(audit.status).toBe(200);
    expect(audit.text).not.toContain(AWS_SECRET);
    expect(audit.text).not.toContain('another-secret-value');
    expect(audit.text).toContain('credential.created');
  });

  async function alice_post() {
    return awsCredential(as(alice));
  }

  test('bad bodies are 400 naming the field; nothing is stored', async () => {
    const before = (await sql`SELECT count(*)::int AS n FROM credentials`)[0].n;
    const cases: [unknown, string][] = [
      [{ name: 'x', kind: 'nope' }, 'kind'],
      [{ name: 'x', kind: 'aws', inputs: { access_key: 'a', secret_key: 'b', colour: 'blue' } }, 'inputs.colour'],
      [{ name: 'x', kind: 'aws', inputs: { secret_key: 'b' } }, 'inputs.access_key'],
      [{ name: 'x', kind: 'kubernetes', inputs: { host: 'h', bearer_token: 't', verify_ssl: 'maybe' } }, 'inputs.verify_ssl'],
      [{ name: '', kind: 'aws' }, 'name'],
      [{ name: 'x', kind: 'aws', inputs: 'text' }, 'inputs'],
      [{ name: 'x', type_id: 'ctype_nope', inputs: {} }, 'type_id'],
      [{ name: 'x', kind: 'aws', inputs: { access_key: 'a' }, extra: 1 }, 'extra'],
    ];
    for (const [body, field] of cases) {
      const res = await as(alice).post('/v1/credentials', body);
      expect([res.status, res.body.field]).toEqual([400, field]);
    }
    expect((await sql`SELECT count(*)::int AS n FROM credentials`)[0].n).toBe(before);
  });

  test('a federated kind takes settings only and is ready without a secret', async () => {
    const res = await as(alice).post('/v1/credentials', { name: 'fed', kind: 'aws_oidc', inputs: { role_arn: 'arn:aws:iam::1:role/x', region: 'eu-west-1' } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ status: 'ready', secrets_set: [], inputs: { role_arn: 'arn:aws:iam::1:role/x', region: 'eu-west-1' } });
    const refused = await as(alice).post('/v1/credentials', { name: 'fed', kind: 'oidc_token', inputs: { audience: 'a', token: 'x' } });
    expect([refused.status, refused.body.field]).toEqual([400, 'inputs.token']);
  });
});

describe('roles, grants and lists', () => {
  test('a viewer may not store one; a reader reads, a user uses, a manager edits and deletes; agents are bounded alike', async () => {
    expect((await as(vera).post('/v1/credentials', { name: 'v', kind: 'aws_oidc', inputs: { role_arn: 'r' } })).status).toBe(403);
    const cred = await awsCredential(as(alice));
    const path = `/v1/credentials/${cred.id}`;
    const body = { name: 'edited', kind: 'aws', inputs: { access_key: 'AKIAEXAMPLE' } };

    // Bob holds nothing: 404 alike for reads, edits and deletes, so the id is not confirmed.
    expect((await as(bob).get(path)).status).toBe(404);
    expect((await put(as(bob), path, body)).status).toBe(404);
    expect((await del(as(bob), path)).status).toBe(404);
    // His agent token is bounded by his account's grants.
    const bobAgent = await tokenOf(t.api, bob, 'agent');
    expect((await as(bobAgent).get(path)).status).toBe(404);

    await grant(as(alice), cred.id, 'read', { user_id: bob.id });
    expect((await as(bob).get(path)).status).toBe(200);
    expect((await as(bobAgent).get(path)).status).toBe(200);
    const refused = await put(as(bob), path, body);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ required_grant: 'manage', object: cred.id });
    expect((await put(as(bobAgent), path, body)).status).toBe(403);

    // Read is not use: a template naming it is refused.
    const tplRefused = await as(bob).post('/v1/templates', { name: `t-${randomBytes(3).toString('hex')}`, tool: 'bash', command: 'true', credentials: [cred.id] });
    expect([tplRefused.status, tplRefused.body.field]).toEqual([403, 'credentials[0]']);
    const runRefused = await as(bobAgent).post('/v1/runs', { tool: 'bash', command: 'true', credentials: [cred.id] });
    expect([runRefused.status, runRefused.body.field]).toEqual([403, 'credentials[0]']);

    await grant(as(alice), cred.id, 'use', { user_id: bob.id });
    const tpl = await template(as(bob), { credentials: [cred.id] });
    expect(tpl.credentials).toEqual([cred.id]);
    // An agent token of the same account may use it too.
    const agentRun = await as(bobAgent).post('/v1/runs', { tool: 'bash', command: 'true', credentials: [cred.id] });
    expect(agentRun.status).toBe(201);

    // A viewer with use may not manage (the role's ceiling), even through a manage grant.
    await grant(as(alice), cred.id, 'manage', { user_id: vera.id });
    expect((await as(vera).get(path)).status).toBe(200);
    expect((await put(as(vera), path, body)).status).toBe(403);

    await grant(as(alice), cred.id, 'manage', { user_id: bob.id });
    expect((await put(as(bob), path, body)).status).toBe(200);
    // Deleting what a template uses is refused, naming the template.
    const inUse = await del(as(bob), path);
    expect(inUse.status).toBe(409);
    expect(inUse.body.templates).toEqual([tpl.id]);
    expect(inUse.body.error).toContain(tpl.id);
    expect((await del(as(bob), `/v1/templates/${tpl.id}`)).status).toBe(204);
    // The agent's held run still names it: refused while that run has not ended.
    expect((await t.api.get(`/v1/runs/${agentRun.body.id}`)).body.status).toBe('held');
    const heldRun = await del(as(bob), path);
    expect(heldRun.status).toBe(409);
    expect(heldRun.body.runs).toContain(agentRun.body.id);
    expect([200, 202]).toContain((await t.api.post(`/v1/runs/${agentRun.body.id}/cancel`)).status);
    expect((await del(as(bob), path)).status).toBe(204);
    expect((await t.api.get(path)).status).toBe(404);
    expect((await sql`SELECT count(*)::int AS n FROM grants WHERE object = ${cred.id}`)[0].n).toBe(0);
  });

  test('lists hold only what the caller may read, and total counts only that, through paging', async () => {
    const owner = await person(t.api, 'operator', 'user', 'owner');
    const reader = await person(t.api, 'operator', 'user', 'reader');
    const mine = [];
    for (let i = 0; i < 5; i++) mine.push(await awsCredential(as(owner)));
    const own = await awsCredential(as(reader));
    await grant(as(owner), mine[1].id, 'read', { user_id: reader.id });
    await grant(as(owner), mine[3].id, 'use', { user_id: reader.id });

    const pages = await everyPage(as(reader), '/v1/credentials', 'credentials', 1);
    expect(pages.ids.sort()).toEqual([mine[1].id, mine[3].id, own.id].sort());
    expect(new Set(pages.totals)).toEqual(new Set([3]));
    const ownerPages = await everyPage(as(owner), '/v1/credentials', 'credentials', 2);
    expect(ownerPages.ids.sort()).toEqual(mine.map((c) => c.id).sort());
    const all = await t.api.get('/v1/credentials?limit=1000');
    expect(all.body.total).toBe((await sql`SELECT count(*)::int AS n FROM credentials`)[0].n);
    expect(all.text).not.toContain(AWS_SECRET);
    const byKind = await as(reader).get('/v1/credentials?kind=aws');
    expect(byKind.body.total).toBe(3);
  });
});

describe('custom credential types', () => {
  test('admin only; fields and injectors checked; replace keeps creation time and origin; delete refused while used', async () => {
    const body = {
      name: `acme-${randomBytes(3).toString('hex')}`,
      fields: [
        { id: 'endpoint', label: 'Endpoint', required: true },
        { id: 'api_key', label: 'API key', secret: true, required: true },
      ],
      injectors: { env: { ACME_ENDPOINT: '{{ endpoint }}', ACME_KEY_FILE: '{{ file.key }}' }, extra_vars: { acme_endpoint: '{{endpoint}}' }, files: { key: '{{ api_key }}' } },
    };
    expect((await as(alice).post('/v1/credential-types', body)).status).toBe(403);
    expect((await as(alice).get('/v1/credential-types')).status).toBe(403);
    const bad: [unknown, string][] = [
      [{ ...body, injectors: { env: { ACME: '{{ nothing }}' } } }, 'injectors.env.ACME'],
      [{ ...body, injectors: { env: { LD_PRELOAD: '{{ endpoint }}' } } }, 'injectors.env.LD_PRELOAD'],
      [{ ...body, injectors: { env: { X: '{{ file.missing }}' } } }, 'injectors.env.X'],
      [{ ...body, fields: [{ id: 'Bad Name' }] }, 'fields[0].id'],
      [{ ...body, fields: [{ id: 'a' }, { id: 'a' }] }, 'fields[1].id'],
    ];
    for (const [b, field] of bad) {
      const res = await t.api.post('/v1/credential-types', b);
      expect([res.status, res.body.field]).toEqual([400, field]);
    }
    const created = await t.api.post('/v1/credential-types', body);
    expect(created.status).toBe(201);
    const type = created.body;
    expect(type).toMatchObject({ kind: 'custom', created_by: 'admin' });

    // An operator stores a credential of it; the secret field is sealed and masked like a built-in kind's.
    const cred = await as(alice).post('/v1/credentials', { name: 'acme', type_id: type.id, fields: { endpoint: 'https://acme.example', api_key: 'acme-key-123456' } });
    expect(cred.status).toBe(201);
    expect(cred.body).toMatchObject({ kind: 'custom', type_id: type.id, inputs: { endpoint: 'https://acme.example', api_key: '[redacted]' }, status: 'ready' });
    expect(cred.text).not.toContain('acme-key-123456');
    // The secret field is withheld from the request's fingerprint by path, whatever its name.
    const sent = { name: 'acme', type_id: type.id, fields: { endpoint: 'https://acme.example', api_key: 'acme-key-123456' } };
    const entries = (await t.api.get('/v1/audit?limit=50')).body.entries as any[];
    const entry = entries.find((e) => e.body?.kind === 'credential.created' && e.body.credential_id === cred.body.id);
    expect(entry.fingerprint).toBe(requestFingerprint('POST', '/v1/credentials', {}, sent, new Set(['inputs.api_key', 'fields.api_key'])));
    expect(entry.fingerprint).not.toBe(requestFingerprint('POST', '/v1/credentials', {}, sent));
    expect(JSON.stringify(entry)).not.toContain('acme-key-123456');

    await new Promise((r) => setTimeout(r, 20));
    const replaced = await put(t.api, `/v1/credential-types/${type.id}`, { ...body, description: 'replaced' });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ id: type.id, created_at: type.created_at, created_by: 'admin', description: 'replaced' });
    expect(replaced.body.updated_at > type.updated_at).toBe(true);

    const inUse = await del(t.api, `/v1/credential-types/${type.id}`);
    expect(inUse.status).toBe(409);
    expect(inUse.body.credentials).toEqual([cred.body.id]);
    expect((await del(as(alice), `/v1/credentials/${cred.body.id}`)).status).toBe(204);
    expect((await del(t.api, `/v1/credential-types/${type.id}`)).status).toBe(204);
    expect((await t.api.get(`/v1/credential-types/${type.id}`)).status).toBe(404);
  });
});

describe('launching with credentials', () => {
  test('a launch picks only the template\'s selectable credentials, with use on each', async () => {
    const fixed = await awsCredential(as(alice));
    const offered = await awsCredential(as(alice));
    const other = await awsCredential(as(alice));
    const tpl = await template(as(alice), { credentials: [fixed.id], selectable_credentials: [offered.id] });
    expect(tpl).toMatchObject({ credentials: [fixed.id], selectable_credentials: [offered.id] });
    const notOffered = await as(alice).post(`/v1/templates/${tpl.id}/launch`, { credentials: [other.id] });
    expect([notOffered.status, notOffered.body.field]).toEqual([400, 'credentials[0]']);
    const launched = await as(alice).post(`/v1/templates/${tpl.id}/launch`, { credentials: [offered.id] });
    expect(launched.status).toBe(201);
    // The run shows them in order, the template's first; ids only.
    expect(launched.body.credentials).toEqual([fixed.id, offered.id]);
    expect((await as(alice).get(`/v1/runs/${launched.body.id}`)).body.credentials).toEqual([fixed.id, offered.id]);
    await waitForRunEnd(t.api, launched.body.id);

    // Bob may use the template, so its own credential goes with his launch; the offered one needs his use grant.
    await grant(as(alice), tpl.id, 'use', { user_id: bob.id });
    const plain = await as(bob).post(`/v1/templates/${tpl.id}/launch`, {});
    expect(plain.status).toBe(201);
    // Bob may not read that credential; his run still names it: an id is not a secret.
    expect((await as(bob).get(`/v1/runs/${plain.body.id}`)).body.credentials).toEqual([fixed.id]);
    const picked = await as(bob).post(`/v1/templates/${tpl.id}/launch`, { credentials: [offered.id] });
    expect([picked.status, picked.body.field]).toEqual([400, 'credentials[0]']);
    await waitForRunEnd(t.api, plain.body.id);
    // The audit entry of the launch names the credentials, by id only.
    const entries = (await t.api.get('/v1/audit?limit=1000')).body.entries as any[];
    const submitted = entries.find((e) => e.body?.kind === 'run.submitted' && e.body.run_id === launched.body.id);
    expect(submitted.body.credentials).toEqual([fixed.id, offered.id]);
  });

  test('runs, splits and pipelines show their credentials in order on every read; a pipeline is checked as a run is', async () => {
    const aws = await awsCredential(as(alice));
    const oidc = await as(alice).post('/v1/credentials', { name: 'sts', kind: 'oidc_token', inputs: { audience: 'sts' } });
    const ids = [oidc.body.id, aws.id];
    const marker = `creds-${randomBytes(4).toString('hex')}`;

    const run = await as(alice).post('/v1/runs', { tool: 'bash', command: `echo ${marker}`, credentials: ids });
    expect([run.status, run.body.credentials]).toEqual([201, ids]);
    expect((await as(alice).get(`/v1/runs/${run.body.id}`)).body.credentials).toEqual(ids);
    const listed = await as(alice).get(`/v1/runs?q=${marker}`);
    expect(listed.body.runs.map((r: any) => [r.id, r.credentials])).toEqual([[run.body.id, ids]]);
    const none = await as(alice).post('/v1/runs', { tool: 'bash', command: 'true' });
    expect(none.body.credentials).toEqual([]);

    const split = await as(alice).post('/v1/runs', { tool: 'bash', command: 'true', shards: 2, credentials: [aws.id] });
    expect(split.body.credentials).toEqual([aws.id]);
    expect((await as(alice).get(`/v1/runs/${split.body.id}/shards`)).body.shards.map((s: any) => s.credentials)).toEqual([[aws.id], [aws.id]]);

    const steps = [{ tool: 'bash', command: 'test -n "$CAIRN_OIDC_AUDIENCE" && test -s "$CAIRN_OIDC_TOKEN_FILE"' }, { tool: 'bash', command: 'true' }];
    const pipeline = await as(alice).post('/v1/pipelines', { steps, credentials: ids });
    expect([pipeline.status, pipeline.body.credentials]).toEqual([201, ids]);
    expect((await as(alice).get(`/v1/runs/${pipeline.body.id}/steps`)).body.steps.map((s: any) => s.credentials)).toEqual([ids, ids]);
    // Each step is given them at execution: the first step fails without the injected variable.
    expect((await waitForRunEnd(t.api, pipeline.body.id)).status).toBe('succeeded');
    const rerun = await as(alice).post(`/v1/runs/${pipeline.body.id}/rerun`);
    expect([rerun.status, rerun.body.credentials]).toEqual([201, ids]);

    // Bob reads neither: 400 naming the field; with read and not use, 403; an id named twice, 400.
    const refused = await as(bob).post('/v1/pipelines', { steps, credentials: [aws.id] });
    expect([refused.status, refused.body.field]).toEqual([400, 'credentials[0]']);
    await grant(as(alice), aws.id, 'read', { user_id: bob.id });
    const readOnly = await as(bob).post('/v1/pipelines', { steps, credentials: [aws.id] });
    expect([readOnly.status, readOnly.body.field]).toEqual([403, 'credentials[0]']);
    const twice = await as(alice).post('/v1/pipelines', { steps, credentials: [aws.id, aws.id] });
    expect([twice.status, twice.body.field]).toEqual([400, 'credentials[1]']);
    const waiting = await as(alice).post('/v1/credentials', { name: 'no secret', kind: 'machine', inputs: { username: 'deploy' } });
    const notReady = await as(alice).post('/v1/pipelines', { steps, credentials: [waiting.body.id] });
    expect([notReady.status, notReady.body.credential, notReady.body.reason]).toEqual([409, waiting.body.id, 'needs_secret']);
    for (const id of [run.body.id, none.body.id, split.body.id, rerun.body.id]) await waitForRunEnd(t.api, id);
  });

  test('a credential with no secret yet makes launch and rerun answer 409 naming it and the fix', async () => {
    const machine = await as(alice).post('/v1/credentials', { name: 'waiting', kind: 'machine', inputs: { username: 'deploy' } });
    expect(machine.body.status).toBe('needs_secret');
    const tpl = await template(as(alice), { credentials: [machine.body.id] });
    const refused = await as(alice).post(`/v1/templates/${tpl.id}/launch`, {});
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ credential: machine.body.id, reason: 'needs_secret' });
    expect(refused.body.error).toContain(machine.body.id);
    expect(refused.body.error).toContain(`PUT /v1/credentials/${machine.body.id}`);

    // With its secret set it launches; cleared again, a rerun of that run is refused alike.
    const set = await put(as(alice), `/v1/credentials/${machine.body.id}`, { name: 'waiting', kind: 'machine', inputs: { username: 'deploy', password: 'pw-1234567' } });
    expect(set.body.status).toBe('ready');
    const run = await as(alice).post(`/v1/templates/${tpl.id}/launch`, {});
    expect(run.status).toBe(201);
    expect((await waitForRunEnd(t.api, run.body.id)).status).toBe('succeeded');
    await put(as(alice), `/v1/credentials/${machine.body.id}`, { name: 'waiting', kind: 'machine', inputs: { username: 'deploy', password: null } });
    const rerun = await as(alice).post(`/v1/runs/${run.body.id}/rerun`);
    expect(rerun.status).toBe(409);
    expect(rerun.body).toMatchObject({ credential: machine.body.id, reason: 'needs_secret' });
  });

  test('a webhook launch of a template whose credential has no secret is refused 409 naming it, on the trigger too', async () => {
    const waiting = await as(alice).post('/v1/credentials', { name: 'hook cred', kind: 'hashicorp_token', inputs: { url: 'https://vault.example' } });
    expect(waiting.body.status).toBe('needs_secret');
    const tpl = await template(as(alice), { credentials: [waiting.body.id] });
    const trigger = await as(alice).post('/v1/triggers', { name: 'push', template_id: tpl.id });
    expect(trigger.status).toBe(201);
    const raw = JSON.stringify(PUSH_PAYLOADS.github());
    const answer = await t.as(null).request('POST', trigger.body.hook_path, { rawBody: raw, headers: forgeHeaders('github', raw, trigger.body.secret, {}) });
    expect(answer.status).toBe(409);
    expect(answer.body.error).toContain(waiting.body.id);
    expect(answer.body.error).toContain(`PUT /v1/credentials/${waiting.body.id}`);
    expect((await sql`SELECT count(*)::int AS n FROM runs WHERE source_kind = 'trigger' AND source_id = ${trigger.body.id}`)[0].n).toBe(0);
    expect((await as(alice).get(`/v1/triggers/${trigger.body.id}`)).body.last_error).toContain(waiting.body.id);
  });

  test('without the encryption key a secret is refused with 409 naming the settings; settings-only kinds still store', async () => {
    const bare = await startTestServer();
    try {
      const refused = await bare.api.post('/v1/credentials', { name: 'k', kind: 'aws', inputs: { access_key: 'a', secret_key: 'never-stored-secret' } });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toContain('SERVICE_ENCRYPTION_KEY');
      expect(refused.body.error).toContain('SERVICE_ENCRYPTION_SALT');
      expect(refused.body.variables).toEqual(['inputs.secret_key']);
      expect((await bare.api.get('/v1/credentials')).body.total).toBe(0);
      expect((await bare.api.post('/v1/credentials', { name: 'fed', kind: 'oidc_token', inputs: { audience: 'sts' } })).status).toBe(201);
    } finally {
      await bare.stop();
    }
  }, 60_000);

  test('a credential sealed under another key makes launch and a run submission answer 409 naming it; reads still work', async () => {
    // A server never starts under another key (its own signing key would not open), so the
    // credential's secret is sealed under another key and salt in place, as a restored copy would be.
    const cred = await awsCredential(as(alice));
    const tpl = await template(as(alice), { credentials: [cred.id] });
    const other = createSealer({ key: 'another-key-another-key-another-key!', salt: 'another-salt-1234' });
    await sql`UPDATE credentials SET sealed = ${sql.json({ secret_key: other.seal(AWS_SECRET, `credential:${cred.id}:secret_key`) })} WHERE id = ${cred.id}`;

    const launch = await as(alice).post(`/v1/templates/${tpl.id}/launch`, {});
    expect(launch.status).toBe(409);
    expect(launch.body).toMatchObject({ credential: cred.id, reason: 'does_not_open', settings: ['SERVICE_ENCRYPTION_KEY', 'SERVICE_ENCRYPTION_SALT'] });
    expect(launch.body.error).toContain(cred.id);
    expect(launch.body.error).toMatch(/restore the SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT it was sealed with/);
    expect(launch.text).not.toContain(AWS_SECRET);
    const direct = await as(alice).post('/v1/runs', { tool: 'bash', command: 'true', credentials: [cred.id] });
    expect(direct.status).toBe(409);
    expect(direct.body.credential).toBe(cred.id);
    const read = await as(alice).get(`/v1/credentials/${cred.id}`);
    expect(read.body).toMatchObject({ secrets_set: ['secret_key'] });

    // Setting the secret again under this server's key is the other fix.
    const reset = await put(as(alice), `/v1/credentials/${cred.id}`, { name: cred.name, kind: 'aws', inputs: { access_key: 'AKIAEXAMPLE', secret_key: 'a-new-secret-here' } });
    expect(reset.status).toBe(200);
    const relaunched = await as(alice).post(`/v1/templates/${tpl.id}/launch`, {});
    expect(relaunched.status).toBe(201);
    expect((await waitForRunEnd(t.api, relaunched.body.id)).status).toBe('succeeded');
  });

  test('a run whose credential stops opening before it executes fails naming the credential, never a value', async () => {
    const cred = await awsCredential(as(alice));
    // Held by a policy, so the key changes under it while it waits.
    const policy = await t.api.post('/v1/policies', { name: `hold-${randomBytes(3).toString('hex')}`, effect: 'require_approval', command_contains: 'HOLD-CRED-KEY' });
    expect(policy.status).toBe(201);
    try {
      const held = await as(alice).post('/v1/runs', { tool: 'bash', command: 'echo HOLD-CRED-KEY', credentials: [cred.id] });
      expect(held.body.status).toBe('held');
      const other = createSealer({ key: 'another-key-another-key-another-key!', salt: 'another-salt-1234' });
      await sql`UPDATE credentials SET sealed = ${sql.json({ secret_key: other.seal(AWS_SECRET, `credential:${cred.id}:secret_key`) })} WHERE id = ${cred.id}`;
      expect((await t.api.post(`/v1/runs/${held.body.id}/approve`, { reason: 'key test', state_digest: held.body.state_digest })).status).toBe(200);
      const ended = await waitForRunEnd(t.api, held.body.id);
      expect(ended.status).toBe('failed');
      expect(ended.error).toContain(cred.id);
      expect(ended.error).toMatch(/restore the SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT/);
      expect(JSON.stringify(ended)).not.toContain(AWS_SECRET);
    } finally {
      await t.api.request('DELETE', `/v1/policies/${policy.body.id}`);
    }
  });
});

test('migration 022 moves the credentials each run was given onto the run, in order', async () => {
  const database = await createTestDatabase({ empty: true });
  const old = postgres(database.url, { max: 1, onnotice: () => undefined });
  try {
    await schemaBefore(old, '022');
    await old`
      INSERT INTO runs (id, tool, status, spec, timeout_seconds, requested_by, actor_kind)
      VALUES ('run_given', 'bash', 'succeeded', '{}', 60, 'admin', 'user'), ('run_none', 'bash', 'succeeded', '{}', 60, 'admin', 'user')`;
    await old`INSERT INTO run_credentials (run_id, position, credential_id) VALUES ('run_given', 1, 'cred_b'), ('run_given', 0, 'cred_a')`;
    await migrate(old);
    const rows = await old`SELECT id, credentials FROM runs ORDER BY id`;
    expect(rows.map((r) => [r.id, r.credentials])).toEqual([
      ['run_given', ['cred_a', 'cred_b']],
      ['run_none', []],
    ]);
  } finally {
    await old.end();
    await database.drop();
  }
});
