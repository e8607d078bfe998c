import { randomBytes } from 'node:crypto';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import type { ApiClient, ApiResponse } from '../support/http';

// An agent never approves, so it must not be able to become a person who does: whatever role its
// account holds, an agent token may not touch accounts, passwords, roles, person tokens or
// decision records. Each refusal is a 403 that says why and leaves the audit chain as it was.

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

async function createUser(role: 'admin' | 'operator' | 'viewer', extra: Record<string, unknown> = {}) {
  const res = await t.api.post('/v1/users', { username: unique(role), role, ...extra });
  if (res.status !== 201) throw new Error(`creating a user failed: ${res.status} ${res.text}`);
  return res.body as { id: string; username: string; role: string };
}

async function mint(body: Record<string, unknown>, api: ApiClient = t.api) {
  const res = await api.post('/v1/tokens', body);
  if (res.status !== 201) throw new Error(`minting failed: ${res.status} ${res.text}`);
  return { id: res.body.id as string, secret: res.body.token as string, expiresAt: res.body.expires_at as string | null };
}

/** An admin account driven by an agent token, the strongest agent there is. */
async function adminAgent() {
  const account = await createUser('admin');
  const token = await mint({ name: 'deploy bot', username: account.username, kind: 'agent' });
  return { account, token, api: t.as(token.secret) };
}

async function chainSize(): Promise<number> {
  const res = await t.api.get('/v1/audit?limit=1');
  expect(res.status).toBe(200);
  return res.body.total as number;
}

/** A refusal for being an agent: 403, a sentence naming the agent rule, and no chain entry. */
async function expectAgentRefusal(request: () => Promise<ApiResponse>): Promise<ApiResponse> {
  const before = await chainSize();
  const res = await request();
  expect(res.status).toBe(403);
  expect(res.body.error).toMatch(/^an agent /);
  expect(await chainSize()).toBe(before);
  return res;
}

async function login(username: string, password: string) {
  return t.as(null).post('/v1/auth/login', { username, password });
}

describe('an agent on an admin account cannot make or become a person', () => {
  test('creating an account, with or without a password, is refused and no account appears', async () => {
    const { api } = await adminAgent();
    const username = unique('puppet');
    const res = await expectAgentRefusal(() => api.post('/v1/users', { username, role: 'admin', password: 'correct horse battery' }));
    expect(res.body.error).toMatch(/accounts/);
    expect((await login(username, 'correct horse battery')).status).toBe(401);
    expect((await t.api.post('/v1/users', { username, role: 'viewer' })).status).toBe(201);
  });

  test('setting its own account’s password is refused and the password does not log in', async () => {
    const { account, api } = await adminAgent();
    const res = await expectAgentRefusal(() => api.request('PUT', `/v1/users/${account.id}`, { body: { password: 'agent chose this' } }));
    expect(res.body.error).toMatch(/password/);
    expect((await login(account.username, 'agent chose this')).status).toBe(401);
  });

  test('setting a person’s password, role or profile is refused and the account is unchanged', async () => {
    const { api } = await adminAgent();
    const person = await createUser('viewer', { password: 'the real password', profile: { title: 'Analyst' } });
    for (const body of [{ password: 'taken over now' }, { role: 'admin' }, { profile: { title: 'Owned' } }]) {
      await expectAgentRefusal(() => api.request('PUT', `/v1/users/${person.id}`, { body }));
    }
    const after = await t.api.get(`/v1/users/${person.id}`);
    expect(after.body).toMatchObject({ role: 'viewer', profile: { title: 'Analyst' } });
    expect((await login(person.username, 'taken over now')).status).toBe(401);
    expect((await login(person.username, 'the real password')).status).toBe(200);
  });

  test('deleting an account is refused and the account stays', async () => {
    const { api } = await adminAgent();
    const person = await createUser('operator');
    await expectAgentRefusal(() => api.request('DELETE', `/v1/users/${person.id}`));
    expect((await t.api.get(`/v1/users/${person.id}`)).status).toBe(200);
  });

  test('minting a person token, for itself or for another account, is refused', async () => {
    const { account, api } = await adminAgent();
    const other = await createUser('admin');
    const cases = [
      { name: 'as me', kind: 'user' },
      { name: 'as me', username: account.username, kind: 'user' },
      { name: 'as them', username: other.username, kind: 'user' },
      { name: 'as them', username: other.username, kind: 'agent' },
      { name: 'as them', username: other.username },
    ];
    for (const body of cases) {
      const res = await expectAgentRefusal(() => api.post('/v1/tokens', body));
      expect(res.body.token).toBeUndefined();
    }
    const tokens = (await t.api.get('/v1/tokens?limit=1000')).body.tokens as { created_by: string }[];
    expect(tokens.filter((tok) => tok.created_by === account.username)).toEqual([]);
  });

  test('revoking a person’s token, even on its own account, is refused and the token keeps working', async () => {
    const { account, api } = await adminAgent();
    const person = await createUser('operator');
    const theirs = await mint({ name: 'laptop', username: person.username });
    const accountsOwn = await mint({ name: 'admin console', username: account.username, kind: 'user' });
    for (const token of [theirs, accountsOwn]) {
      await expectAgentRefusal(() => api.request('DELETE', `/v1/tokens/${token.id}`));
      expect((await t.as(token.secret).get('/v1/auth/me')).status).toBe(200);
    }
  });

  test('revoking another account’s agent token is refused', async () => {
    const { api } = await adminAgent();
    const other = await adminAgent();
    await expectAgentRefusal(() => api.request('DELETE', `/v1/tokens/${other.token.id}`));
    expect((await other.api.get('/v1/auth/me')).status).toBe(200);
  });
});

describe('an agent never corrects or redacts a decision record', () => {
  test('corrections and redactions are refused and the record is unchanged', async () => {
    const { api } = await adminAgent();
    const { body: run } = await api.post('/v1/runs', { tool: 'bash', command: 'echo held for a person' });
    expect(run.status).toBe('held');
    const approved = await t.api.post(`/v1/runs/${run.id}/approve`, { reason: 'checked the change ticket' });
    expect(approved.status).toBe(200);
    const decisionId = approved.body.decision.id as string;
    // The approved run's end is a chain entry too: let it land before counting entries.
    await waitForRunEnd(t.api, run.id);

    const correction = await expectAgentRefusal(() => api.post(`/v1/runs/${run.id}/decisions/${decisionId}/corrections`, { text: 'never mind' }));
    expect(correction.body.error).toMatch(/decision record/);
    const redaction = await expectAgentRefusal(() => api.post(`/v1/runs/${run.id}/decisions/${decisionId}/redact`, { category: 'other' }));
    expect(redaction.body.error).toMatch(/decision record/);

    const records = (await t.api.get(`/v1/runs/${run.id}/decisions`)).body.decisions;
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ id: decisionId, reason: 'checked the change ticket', redaction: null });
  });
});

describe('what an agent may still do', () => {
  test('it reads what its role allows', async () => {
    const { api } = await adminAgent();
    expect((await api.get('/v1/users')).status).toBe(200);
    expect((await api.get('/v1/tokens')).status).toBe(200);
    expect((await api.get('/v1/audit?limit=1')).status).toBe(200);
  });

  test('it mints agent tokens for its own account and revokes them', async () => {
    const { account, api } = await adminAgent();
    const child = await api.post('/v1/tokens', { name: 'short job' });
    expect(child.status).toBe(201);
    expect(child.body).toMatchObject({ kind: 'agent', username: account.username, created_by: account.username, created_by_type: 'agent' });
    expect((await t.as(child.body.token).get('/v1/auth/me')).body.kind).toBe('agent');
    expect((await api.request('DELETE', `/v1/tokens/${child.body.id}`)).status).toBe(204);
    expect((await t.as(child.body.token).get('/v1/auth/me')).status).toBe(401);
  });

  test('what it mints is an agent too, bound by the same limits', async () => {
    const { api } = await adminAgent();
    const child = t.as((await mint({ name: 'child' }, api)).secret);
    await expectAgentRefusal(() => child.post('/v1/users', { username: unique('puppet'), role: 'admin', password: 'correct horse battery' }));
    await expectAgentRefusal(() => child.post('/v1/tokens', { name: 'grandchild', kind: 'user' }));
  });

  test('a token it mints never outlives the token that minted it', async () => {
    const account = await createUser('operator');
    const parent = await mint({ name: 'hour job', username: account.username, kind: 'agent', expires_in: 3600 });
    const forever = await mint({ name: 'asks for forever' }, t.as(parent.secret));
    expect(forever.expiresAt).toBe(parent.expiresAt);
    const longer = await mint({ name: 'asks for a day', expires_in: 86_400 }, t.as(parent.secret));
    expect(longer.expiresAt).toBe(parent.expiresAt);
    const shorter = await mint({ name: 'asks for ten minutes', expires_in: 600 }, t.as(parent.secret));
    expect(Date.parse(shorter.expiresAt!)).toBeLessThan(Date.parse(parent.expiresAt!));
  });

  test('a person on the same account still does all of it', async () => {
    const { account } = await adminAgent();
    const person = t.as((await mint({ name: 'console', username: account.username, kind: 'user' })).secret);
    const created = await person.post('/v1/users', { username: unique('made'), role: 'viewer', password: 'correct horse battery' });
    expect(created.status).toBe(201);
    expect((await person.request('PUT', `/v1/users/${created.body.id}`, { body: { role: 'operator' } })).status).toBe(200);
    expect((await person.request('DELETE', `/v1/users/${created.body.id}`)).status).toBe(204);
  });
});
