import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../core/config';
import { createLogger } from '../../cli/serve';
import { hashPassword } from '../../core/credentials/secrets';
import { usernameKey } from '../../core/access/username';
import { connectDatabase } from '../../store/db';
import { createTestDatabase, schemaBefore } from '../support/database';
import { apiClient } from '../support/http';
import { startCairn } from '../support/processes';
import { startServerInProcess, startTestServer, testSettings, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

async function createUser(role: 'admin' | 'operator' | 'viewer', extra: Record<string, unknown> = {}) {
  return createUserNamed(unique(role), role, extra);
}

async function createUserNamed(username: string, role: 'admin' | 'operator' | 'viewer', extra: Record<string, unknown> = {}) {
  const res = await t.api.post('/v1/users', { username, role, ...extra });
  if (res.status !== 201) throw new Error(`creating ${username} failed: ${res.status} ${res.text}`);
  return res.body as { id: string; username: string; role: string; profile: Record<string, unknown> };
}

/** A fresh account in the role and a user token for it, minted by the admin. */
async function tokenFor(role: 'admin' | 'operator' | 'viewer') {
  const user = await createUser(role);
  const res = await t.api.post('/v1/tokens', { name: 'test', username: user.username });
  if (res.status !== 201) throw new Error(`minting for ${user.username} failed: ${res.status} ${res.text}`);
  return { user, token: res.body.token as string, tokenId: res.body.id as string };
}

async function login(username: string, password: string) {
  return t.as(null).post('/v1/auth/login', { username, password });
}

describe('sign-in', () => {
  test('a user created with a password can log in and the session token works', async () => {
    const user = await createUser('operator', { password: 'correct horse battery' });
    const res = await login(user.username, 'correct horse battery');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ username: user.username, role: 'operator' });
    expect(typeof res.body.token).toBe('string');
    const me = await t.as(res.body.token).get('/v1/auth/me');
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ id: user.id, username: user.username, role: 'operator', kind: 'user' });
  });

  test('a wrong password and an unknown user are refused alike with 401', async () => {
    const user = await createUser('viewer', { password: 'correct horse battery' });
    const wrong = await login(user.username, 'not the password');
    const nobody = await login(unique('nobody'), 'not the password');
    expect(wrong.status).toBe(401);
    expect(nobody.status).toBe(401);
    expect(wrong.body).toEqual(nobody.body);
    expect(wrong.body.token).toBeUndefined();
  });

  test('an account created without a password cannot log in', async () => {
    const user = await createUser('viewer');
    expect((await login(user.username, 'anything-at-all')).status).toBe(401);
  });

  test('check confirms a live token and says whose it is', async () => {
    const { user, token } = await tokenFor('viewer');
    const res = await t.as(token).post('/v1/auth/check');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ valid: true, username: user.username, role: 'viewer' });
  });

  test('logout ends the session: the token stops working at once', async () => {
    const user = await createUser('viewer', { password: 'correct horse battery' });
    const { body } = await login(user.username, 'correct horse battery');
    const session = t.as(body.token);
    expect((await session.get('/v1/auth/me')).status).toBe(200);
    expect((await session.post('/v1/auth/logout')).status).toBe(204);
    expect((await session.get('/v1/auth/me')).status).toBe(401);
    expect((await session.post('/v1/auth/check')).status).toBe(401);
  });

  test('logging out one session leaves the account’s other tokens working', async () => {
    const { user, token } = await tokenFor('operator');
    await t.api.request('PUT', `/v1/users/${user.id}`, { body: { password: 'correct horse battery' } });
    const { body } = await login(user.username, 'correct horse battery');
    expect((await t.as(body.token).post('/v1/auth/logout')).status).toBe(204);
    expect((await t.as(token).get('/v1/auth/me')).status).toBe(200);
  });
});

describe('tokens', () => {
  test('a minted token’s secret is shown once at creation and never in the list', async () => {
    const user = await createUser('operator');
    const minted = await t.api.post('/v1/tokens', { name: 'ci', username: user.username });
    expect(minted.status).toBe(201);
    expect(minted.body).toMatchObject({ name: 'ci', username: user.username, kind: 'user', created_by: 'admin', created_by_type: 'user' });
    const secret = minted.body.token as string;
    expect(secret.length).toBeGreaterThan(20);
    expect((await t.as(secret).get('/v1/auth/me')).body.username).toBe(user.username);

    const list = await t.api.get(`/v1/tokens?id=${minted.body.id}`);
    expect(list.status).toBe(200);
    expect(list.body.tokens).toEqual([expect.objectContaining({ id: minted.body.id, created_by: 'admin', created_by_type: 'user' })]);
    expect(list.body.tokens[0].token).toBeUndefined();
    const all = await t.api.get('/v1/tokens');
    expect(all.text).not.toContain(secret);
    expect(all.text).not.toContain(t.adminToken);
  });

  test('kind agent mints an agent token and me says the caller is an agent', async () => {
    const user = await createUser('operator');
    const minted = await t.api.post('/v1/tokens', { name: 'bot', username: user.username, kind: 'agent' });
    expect(minted.status).toBe(201);
    expect(minted.body.kind).toBe('agent');
    const me = await t.as(minted.body.token).get('/v1/auth/me');
    expect(me.body).toMatchObject({ username: user.username, kind: 'agent' });
  });

  test('a token minted by an agent records the agent as its creator', async () => {
    const user = await createUser('operator');
    const agent = await t.api.post('/v1/tokens', { name: 'bot', username: user.username, kind: 'agent' });
    const child = await t.as(agent.body.token).post('/v1/tokens', { name: 'bot-child', kind: 'agent' });
    expect(child.status).toBe(201);
    expect(child.body).toMatchObject({ created_by: user.username, created_by_type: 'agent' });
    const list = await t.api.get(`/v1/tokens?id=${child.body.id}`);
    expect(list.body.tokens[0]).toMatchObject({ created_by: user.username, created_by_type: 'agent' });
  });

  test('a non-admin may mint for itself but minting for another account is 403', async () => {
    const { token } = await tokenFor('operator');
    const other = await createUser('viewer');
    const own = await t.as(token).post('/v1/tokens', { name: 'mine' });
    expect(own.status).toBe(201);
    const theirs = await t.as(token).post('/v1/tokens', { name: 'theirs', username: other.username });
    expect(theirs.status).toBe(403);
    expect(theirs.body.token).toBeUndefined();
  });

  test('a token name over 255 bytes is refused with 400, 255 bytes is accepted', async () => {
    // Two-byte characters: 128 of them are 256 bytes though only 128 characters.
    const tooLong = await t.api.post('/v1/tokens', { name: 'é'.repeat(128) });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toMatchObject({ field: 'name' });
    expect(tooLong.body.error).toMatch(/255 bytes/);
    const fits = await t.api.post('/v1/tokens', { name: `${'é'.repeat(127)}x` });
    expect(fits.status).toBe(201);
  });

  test('deleting a token stops it at once', async () => {
    const { token, tokenId } = await tokenFor('operator');
    expect((await t.as(token).get('/v1/runs')).status).toBe(200);
    expect((await t.api.request('DELETE', `/v1/tokens/${tokenId}`)).status).toBe(204);
    expect((await t.as(token).get('/v1/runs')).status).toBe(401);
    expect((await t.api.get(`/v1/tokens?id=${tokenId}`)).body.tokens).toEqual([]);
    expect((await t.api.request('DELETE', `/v1/tokens/${tokenId}`)).status).toBe(404);
  });
});

describe('users', () => {
  test('an admin creates accounts in each role and the list shows them with their profiles', async () => {
    const made = [];
    for (const role of ['admin', 'operator', 'viewer'] as const) made.push(await createUser(role, { profile: { title: `${role} person` } }));
    const list = await t.api.get(`/v1/users?${made.map((u) => `id=${u.id}`).join('&')}`);
    expect(list.status).toBe(200);
    const byId = Object.fromEntries(list.body.users.map((u: any) => [u.id, u]));
    for (const u of made) expect(byId[u.id]).toMatchObject({ username: u.username, role: u.role, profile: { title: `${u.role} person` } });
    expect(list.text).not.toMatch(/password/);
  });

  test('a role other than admin, operator or viewer is refused naming the field', async () => {
    const res = await t.api.post('/v1/users', { username: unique('root'), role: 'root' });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe('role');
  });

  test('a duplicate username is 409', async () => {
    const user = await createUser('viewer');
    const again = await t.api.post('/v1/users', { username: user.username, role: 'operator' });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatch(/already exists/);
  });

  test('a new username mixing scripts is 400 naming the field, and says which scripts, not the name', async () => {
    const lookalike = `\u0430dmin-${randomBytes(3).toString('hex')}`; // a Cyrillic а before Latin letters
    const res = await t.api.post('/v1/users', { username: lookalike, role: 'admin' });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: 'username: username mixes scripts (Cyrillic, Latin): a username keeps to one script, or to Latin with Han and kana, Han and Bopomofo, or Han and Hangul',
      field: 'username',
    });
    for (const name of [`\u0418\u0432\u0430\u043d-${randomBytes(4).readUInt32BE()}`, `\u7530\u4e2dTaro-${randomBytes(3).toString('hex')}`]) {
      expect((await t.api.post('/v1/users', { username: name, role: 'viewer' })).status).toBe(201);
    }
  });

  test('an account named with mixed scripts before the rule still signs in and is found by name', async () => {
    const username = `p\u0430ypal-${randomBytes(3).toString('hex')}`;
    const sql = connectDatabase(t.databaseUrl, { max: 1 });
    try {
      const hash = await hashPassword('correct horse battery');
      await sql`INSERT INTO accounts (id, username, username_key, role, password_hash)
                VALUES (${`usr_mixed${randomBytes(4).toString('hex')}`}, ${username}, ${usernameKey(username)}, 'viewer', ${hash})`;
    } finally {
      await sql.end();
    }
    const signedIn = await login(username, 'correct horse battery');
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.username).toBe(username);
    expect((await t.api.post('/v1/tokens', { name: 'legacy', username })).status).toBe(201);
  });

  test('a username over 255 bytes is 400, 255 bytes is accepted', async () => {
    const tooLong = await t.api.post('/v1/users', { username: 'é'.repeat(128), role: 'viewer' });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.field).toBe('username');
    expect(tooLong.body.error).toMatch(/255 bytes/);
    const fits = await t.api.post('/v1/users', { username: `${'é'.repeat(127)}x`, role: 'viewer' });
    expect(fits.status).toBe(201);
  });

  test.each(['full_name', 'email', 'phone', 'title'])('profile %s holds at most 320 characters', async (field) => {
    const fits = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { [field]: 'a'.repeat(320) } });
    expect(fits.status).toBe(201);
    const over = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { [field]: 'a'.repeat(321) } });
    expect(over.status).toBe(400);
    expect(over.body.field).toBe(`profile.${field}`);
  });

  test('profile limits count characters, so a name in characters outside the basic plane fits', async () => {
    // Each of these is one character but two UTF-16 units.
    const res = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { full_name: '𠀀'.repeat(320), notes: '𠀀'.repeat(2000) } });
    expect(res.status).toBe(201);
    const over = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { full_name: '𠀀'.repeat(321) } });
    expect(over.status).toBe(400);
  });

  test('a profile link holding a line break, tab or other control character is refused naming it', async () => {
    for (const link of ['https://example.com/me\r\nX: 1', 'https://exa\tmple.com/', 'https://example.com/\u007f']) {
      const res = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { links: ['https://example.com/', link] } });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: 'profile.links[1]: each link must not hold control characters (such as a line break or tab)', field: 'profile.links[1]' });
    }
  });

  test('a single-line profile field holding a line break is refused', async () => {
    const res = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { title: 'Head\nof ops' } });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe('profile.title');
  });

  test('profile notes hold up to 2000 characters across lines', async () => {
    const fits = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { notes: `line one\n${'n'.repeat(1991)}` } });
    expect(fits.status).toBe(201);
    const over = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { notes: 'n'.repeat(2001) } });
    expect(over.status).toBe(400);
    expect(over.body.field).toBe('profile.notes');
  });

  test('a profile holds at most 8 links', async () => {
    const links = Array.from({ length: 9 }, (_, i) => `https://example.com/${i}`);
    const fits = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { links: links.slice(0, 8) } });
    expect(fits.status).toBe(201);
    expect(fits.body.profile.links).toEqual(links.slice(0, 8));
    const over = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { links } });
    expect(over.status).toBe(400);
    expect(over.body.field).toBe('profile.links');
  });

  test.each(['ftp://files.example.com/x', 'javascript:alert(1)', 'mailto:someone@example.com', 'file:///etc/passwd', 'example.com'])(
    'a profile link %s is refused: only http and https addresses',
    async (link) => {
      const res = await t.api.post('/v1/users', { username: unique('p'), role: 'viewer', profile: { links: ['http://example.com/', link] } });
      expect(res.status).toBe(400);
      expect(res.body.field).toBe('profile.links[1]');
    },
  );

  test('a profile rejection names the field and never echoes the value sent', async () => {
    const marker = `Zq${randomBytes(6).toString('hex')}`;
    const cases: [Record<string, unknown>, string][] = [
      [{ full_name: `${marker}${'x'.repeat(320)}` }, 'profile.full_name'],
      [{ email: `${marker}\n@example.com` }, 'profile.email'],
      [{ phone: 12345 }, 'profile.phone'],
      [{ notes: `${marker}${'x'.repeat(2000)}` }, 'profile.notes'],
      [{ links: [`gopher://${marker}.example.com/`] }, 'profile.links[0]'],
      [{ links: `https://${marker}.example.com/` }, 'profile.links'],
    ];
    for (const [profile, field] of cases) {
      for (const [method, path] of [['POST', '/v1/users'], ['PUT', `/v1/users/${(await createUser('viewer')).id}`]] as const) {
        const body = method === 'POST' ? { username: unique('p'), role: 'viewer', profile } : { profile };
        const res = await t.api.request(method, path, { body });
        expect(res.status).toBe(400);
        expect(res.body.field).toBe(field);
        expect(res.body.error).toContain(field);
        expect(res.text).not.toContain(marker);
        expect(res.text).not.toContain('12345');
      }
    }
  });

  test('PUT replaces the profile wholesale: fields left out are cleared', async () => {
    const user = await createUser('viewer', { profile: { full_name: 'Ada Lovelace', email: 'ada@example.com', links: ['https://example.com/ada'] } });
    const res = await t.api.request('PUT', `/v1/users/${user.id}`, { body: { profile: { title: 'Analyst' } } });
    expect(res.status).toBe(200);
    expect(res.body.profile).toEqual({ title: 'Analyst' });
    const list = await t.api.get(`/v1/users?id=${user.id}`);
    expect(list.body.users[0].profile).toEqual({ title: 'Analyst' });
  });

  test('PUT changes the role and the password: the new password logs in and the old one does not', async () => {
    const user = await createUser('viewer', { password: 'first password' });
    const res = await t.api.request('PUT', `/v1/users/${user.id}`, { body: { role: 'operator', password: 'second password' } });
    expect(res.status).toBe(200);
    expect(res.body.role).toBe('operator');
    expect((await login(user.username, 'first password')).status).toBe(401);
    const fresh = await login(user.username, 'second password');
    expect(fresh.body.role).toBe('operator');
  });

  test('deleting a user stops all its tokens at once', async () => {
    const { user, token, tokenId } = await tokenFor('operator');
    await t.api.request('PUT', `/v1/users/${user.id}`, { body: { password: 'correct horse battery' } });
    const session = (await login(user.username, 'correct horse battery')).body.token;
    expect((await t.as(token).get('/v1/runs')).status).toBe(200);
    expect((await t.api.request('DELETE', `/v1/users/${user.id}`)).status).toBe(204);
    expect((await t.as(token).get('/v1/runs')).status).toBe(401);
    expect((await t.as(session).get('/v1/runs')).status).toBe(401);
    expect((await t.api.get(`/v1/tokens?id=${tokenId}`)).body.tokens).toEqual([]);
    expect((await t.api.get(`/v1/users?id=${user.id}`)).body.users).toEqual([]);
    expect((await t.api.request('DELETE', `/v1/users/${user.id}`)).status).toBe(404);
  });
});

describe('a disabled account', () => {
  test('signs in no way and its tokens stop, until it is enabled again; the chain says so', async () => {
    const { user, token } = await tokenFor('operator');
    await t.api.request('PUT', `/v1/users/${user.id}`, { body: { password: 'correct horse battery' } });
    const session = (await login(user.username, 'correct horse battery')).body.token;

    const disabled = await t.api.request('PUT', `/v1/users/${user.id}`, { body: { disabled: true } });
    expect([disabled.status, disabled.body.disabled]).toEqual([200, true]);
    expect((await t.as(token).get('/v1/auth/me')).status).toBe(401);
    expect((await t.as(session).get('/v1/auth/me')).status).toBe(401);
    const refused = await login(user.username, 'correct horse battery');
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ error: `the account ${user.username} is disabled; an admin enables it again with PUT /v1/users/${user.id}` });
    expect((await login(user.username, 'not the password')).status).toBe(401);

    expect((await t.api.request('PUT', `/v1/users/${user.id}`, { body: { disabled: false } })).body.disabled).toBe(false);
    expect((await t.as(token).get('/v1/auth/me')).status).toBe(200);
    expect((await login(user.username, 'correct horse battery')).status).toBe(200);
    const changes = (await t.api.get('/v1/audit?limit=50')).body.entries.filter((e: any) => e.body.kind === 'user.updated' && e.body.account_id === user.id);
    expect(changes.map((e: any) => e.body.disabled)).toEqual([false, true, undefined]);
  });

  test('disabled must be true or false', async () => {
    const { user } = await tokenFor('viewer');
    const res = await t.api.request('PUT', `/v1/users/${user.id}`, { body: { disabled: 'yes' } });
    expect(res.body).toEqual({ error: 'disabled: disabled must be true or false', field: 'disabled' });
  });
});

describe('usernames are unique after normalization and case folding', () => {
  test.each([
    ['another case', (name: string) => name.toUpperCase()],
    ['full-width letters', (name: string) => name.replace(/[a-z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0))],
    ['a trailing variation selector', (name: string) => `${name}\ufe0f`],
  ])('a name differing only by %s is 409 naming username', async (_, spell) => {
    const user = await createUser('viewer');
    const again = await t.api.post('/v1/users', { username: spell(user.username), role: 'operator' });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ field: 'username' });
    expect(again.body.error).toMatch(/already exists/);
  });

  test('ADMIN collides with admin', async () => {
    const res = await t.api.post('/v1/users', { username: 'ADMIN', role: 'admin', password: 'correct horse battery' });
    expect(res.status).toBe(409);
    expect(res.body.field).toBe('username');
  });

  test('café composed (NFC) and decomposed (NFD) are the same name', async () => {
    const base = unique('caf');
    const composed = `${base}\u00e9`;
    const decomposed = `${base}e\u0301`;
    expect(composed).not.toBe(decomposed);
    expect((await t.api.post('/v1/users', { username: composed, role: 'viewer' })).status).toBe(201);
    const again = await t.api.post('/v1/users', { username: decomposed, role: 'viewer' });
    expect(again.status).toBe(409);
    expect(again.body.field).toBe('username');
  });

  test('ß and ss, and a final sigma and a sigma, are the same name', async () => {
    const base = unique('n');
    expect((await t.api.post('/v1/users', { username: `${base}straße`, role: 'viewer' })).status).toBe(201);
    expect((await t.api.post('/v1/users', { username: `${base}STRASSE`, role: 'viewer' })).status).toBe(409);
    // Greek alone: a name keeps to one script (digits go with any).
    const greek = `${randomBytes(4).readUInt32BE()}-`;
    expect((await t.api.post('/v1/users', { username: `${greek}οδος`, role: 'viewer' })).status).toBe(201);
    expect((await t.api.post('/v1/users', { username: `${greek}οδοσ`, role: 'viewer' })).status).toBe(409);
  });

  test('a name that swaps in a look-alike letter of another script is refused, not made beside the original', async () => {
    const base = unique('n');
    expect((await t.api.post('/v1/users', { username: `${base}a`, role: 'viewer' })).status).toBe(201);
    // Cyrillic а (U+0430) does not fold to Latin a, so a Latin name may not hold it.
    const lookalike = await t.api.post('/v1/users', { username: `${base}\u0430`, role: 'viewer' });
    expect(lookalike).toMatchObject({ status: 400, body: { field: 'username' } });
    expect(lookalike.body.error).not.toContain(base);
  });

  test('sign-in is case- and normalization-insensitive and answers with the name as stored', async () => {
    const name = `${unique('Dana')}-Café`;
    await createUserNamed(name, 'operator', { password: 'correct horse battery' });
    for (const spelling of [name, name.toLowerCase(), name.toUpperCase(), name.normalize('NFD')]) {
      const res = await login(spelling, 'correct horse battery');
      expect(res.status).toBe(200);
      expect(res.body.username).toBe(name);
    }
  });

  test('minting for another account finds it under any spelling', async () => {
    const user = await createUser('viewer');
    const res = await t.api.post('/v1/tokens', { name: 'x', username: user.username.toUpperCase() });
    expect(res.status).toBe(201);
    expect(res.body.username).toBe(user.username);
  });

  test('cairn user create refuses a name that collides, as the API does', async () => {
    const user = await createUser('viewer');
    const env = { ...process.env, DATABASE_URL: t.databaseUrl, CAIRN_LOG_LEVEL: 'warn' };
    const create = startCairn(['user', 'create', '--username', user.username.toUpperCase(), '--role', 'admin'], env);
    expect(await create.exited).toBe(2);
    expect(create.output()).toMatch(/already exists/);
    expect((await t.api.get('/v1/users?limit=1000')).body.users.filter((u: any) => u.username === user.username.toUpperCase())).toEqual([]);
  });
});

describe('an install whose usernames collide under the new rule', () => {
  test('still starts; each account signs in with its own spelling, and no new name may join them', async () => {
    const database = await createTestDatabase({ empty: true });
    const sql = connectDatabase(database.url, { max: 1 });
    try {
      await schemaBefore(sql, '006');
      const hash = await hashPassword('correct horse battery');
      const legacy = [
        ['usr_legacy1', 'bob'],
        ['usr_legacy2', 'BOB'],
        ['usr_legacy3', 'caf\u00e9'],
        ['usr_legacy4', 'cafe\u0301'],
      ];
      for (const [id, username] of legacy) {
        await sql`INSERT INTO accounts (id, username, role, password_hash) VALUES (${id}, ${username}, 'operator', ${hash})`;
      }
      const config = loadConfig({}, testSettings(database.url));
      const server = await startServerInProcess(config, createLogger(config));
      try {
        const anyone = apiClient(server.url);
        for (const [, username] of legacy) {
          const res = await anyone.post('/v1/auth/login', { username, password: 'correct horse battery' });
          expect(res.status).toBe(200);
          expect(res.body.username).toBe(username);
        }
        // Any other spelling reaches the oldest of the colliding accounts.
        expect((await anyone.post('/v1/auth/login', { username: 'Bob', password: 'correct horse battery' })).body.username).toBe('bob');
        const admin = apiClient(server.url, server.adminToken);
        for (const username of ['Bob', 'CAFÉ']) {
          const res = await admin.post('/v1/users', { username, role: 'viewer' });
          expect(res.status).toBe(409);
          expect(res.body.field).toBe('username');
        }
      } finally {
        await server.stop();
      }
    } finally {
      await sql.end();
      await database.drop();
    }
  });
});

describe('the last admin', () => {
  // Its own install, so the admins other tests create do not count.
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.stop();
  });

  async function adminId() {
    const { body } = await s.api.get('/v1/auth/me');
    return body.id as string;
  }

  test('the only admin cannot be demoted: 409', async () => {
    const res = await s.api.request('PUT', `/v1/users/${await adminId()}`, { body: { role: 'operator' } });
    expect(res.status).toBe(409);
    expect((await s.api.get('/v1/auth/me')).body.role).toBe('admin');
  });

  test('the only admin cannot be deleted: 409', async () => {
    const res = await s.api.request('DELETE', `/v1/users/${await adminId()}`);
    expect(res.status).toBe(409);
    expect((await s.api.get('/v1/auth/me')).status).toBe(200);
  });

  test('the only enabled admin cannot be disabled: 409', async () => {
    const res = await s.api.request('PUT', `/v1/users/${await adminId()}`, { body: { disabled: true } });
    expect([res.status, res.body.field]).toEqual([409, 'disabled']);
    expect((await s.api.get('/v1/auth/me')).status).toBe(200);
  });

  test('two admins demoting each other at the same moment leave one admin', async () => {
    const other = await s.api.post('/v1/users', { username: 'second-admin', role: 'admin' });
    const otherToken = (await s.api.post('/v1/tokens', { name: 'x', username: 'second-admin' })).body.token;
    const firstId = await adminId();
    const [a, b] = await Promise.all([
      s.api.request('PUT', `/v1/users/${other.body.id}`, { body: { role: 'viewer' } }),
      s.as(otherToken).request('PUT', `/v1/users/${firstId}`, { body: { role: 'viewer' } }),
    ]);
    // One wins. The other either loses inside the admin-count lock (409) or arrives after its own
    // caller was demoted and is refused as a viewer (403); either way one admin is left.
    const statuses = [a.status, b.status].sort();
    expect(statuses[0]).toBe(200);
    expect([403, 409]).toContain(statuses[1]);
    const admins = (await s.as(a.status === 200 ? s.adminToken : otherToken).get('/v1/users')).body.users.filter((u: any) => u.role === 'admin');
    expect(admins).toHaveLength(1);
  });
});

describe('roles', () => {
  test('a viewer can list runs but submitting one is 403', async () => {
    const { token } = await tokenFor('viewer');
    expect((await t.as(token).get('/v1/runs')).status).toBe(200);
    const submit = await t.as(token).post('/v1/runs', { tool: 'bash', command: 'true' });
    expect(submit.status).toBe(403);
    expect(submit.body.error).toMatch(/operator/);
  });

  test('an operator can submit runs', async () => {
    const { token } = await tokenFor('operator');
    const res = await t.as(token).post('/v1/runs', { tool: 'bash', command: 'true' });
    expect(res.status).toBe(201);
    expect((await waitForRunEnd(t.as(token), res.body.id)).status).toBe('succeeded');
  });

  test.each([
    ['GET', '/v1/tokens'],
    ['DELETE', '/v1/tokens/tok_any'],
    ['GET', '/v1/users'],
    ['GET', '/v1/users/usr_any'],
    ['POST', '/v1/users'],
    ['PUT', '/v1/users/usr_any'],
    ['DELETE', '/v1/users/usr_any'],
  ])('an operator or viewer is refused %s %s with 403', async (method, path) => {
    for (const role of ['operator', 'viewer'] as const) {
      const { token } = await tokenFor(role);
      const body = method === 'POST' ? { username: unique('x'), role: 'admin' } : method === 'PUT' ? { role: 'admin' } : undefined;
      const res = await t.as(token).request(method, path, { body });
      expect(res.status).toBe(403);
      expect(res.body.error).toMatch(/admin/);
    }
  });

  test('a non-admin cannot make itself an admin', async () => {
    const { user, token } = await tokenFor('operator');
    const res = await t.as(token).request('PUT', `/v1/users/${user.id}`, { body: { role: 'admin' } });
    expect(res.status).toBe(403);
    expect((await t.as(token).get('/v1/auth/me')).body.role).toBe('operator');
  });

  test.each(['/v1/runs', '/v1/auth/me', '/v1/users', '/v1/tokens'])('no token on %s is 401', async (path) => {
    const res = await t.as(null).get(path);
    expect(res.status).toBe(401);
    expect(typeof res.body.error).toBe('string');
  });

  test('a garbage token is 401', async () => {
    for (const header of ['Bearer not-a-real-token', `Bearer ${t.adminToken}x`, 'Basic YWRtaW46YWRtaW4=']) {
      const res = await t.as(null).request('GET', '/v1/runs', { headers: { authorization: header } });
      expect(res.status).toBe(401);
    }
  });
});

describe('configuration list paging', () => {
  test('limit past 1000 is refused with 400, 1000 is accepted', async () => {
    for (const path of ['/v1/users', '/v1/tokens']) {
      const over = await t.api.get(`${path}?limit=1001`);
      expect(over.status).toBe(400);
      expect(over.body.error).toMatch(/at most 1000/);
      expect((await t.api.get(`${path}?limit=1000`)).status).toBe(200);
      expect((await t.api.get(`${path}?limit=0`)).status).toBe(400);
    }
  });

  test('id is repeatable and each list holds only the ids named', async () => {
    const a = await tokenFor('viewer');
    const b = await tokenFor('viewer');
    await createUser('viewer');
    const users = await t.api.get(`/v1/users?id=${a.user.id}&id=${b.user.id}`);
    expect(users.body.users.map((u: any) => u.id).sort()).toEqual([a.user.id, b.user.id].sort());
    expect(users.body).toMatchObject({ count: 2, total: 2, has_more: false });
    const tokens = await t.api.get(`/v1/tokens?id=${a.tokenId}&id=${b.tokenId}`);
    expect(tokens.body.tokens.map((x: any) => x.id).sort()).toEqual([a.tokenId, b.tokenId].sort());
    expect(tokens.body).toMatchObject({ count: 2, total: 2 });
  });

  test('an id filter over 512 bytes is refused with 400', async () => {
    // 300 two-byte characters: 600 bytes.
    const res = await t.api.get(`/v1/users?id=${encodeURIComponent('é'.repeat(300))}`);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/512 bytes/);
    expect((await t.api.get(`/v1/tokens?id=${encodeURIComponent('é'.repeat(256))}`)).status).toBe(200);
  });

  test('limit and offset page through a list without gaps or repeats', async () => {
    for (let i = 0; i < 3; i++) await createUser('viewer');
    const all = (await t.api.get('/v1/users')).body.users.map((u: any) => u.id);
    const first = await t.api.get('/v1/users?limit=2');
    expect(first.body).toMatchObject({ count: 2, has_more: true, next_offset: 2 });
    const second = await t.api.get('/v1/users?limit=2&offset=2');
    expect([...first.body.users, ...second.body.users].map((u: any) => u.id)).toEqual(all.slice(0, 4));
  });

  test('without a limit a list answers 1000 rows and says there are more', async () => {
    const existing = (await t.api.get('/v1/users?limit=1')).body.total as number;
    const needed = 1001 - existing;
    for (let i = 0; i < needed; i += 25) {
      await Promise.all(
        Array.from({ length: Math.min(25, needed - i) }, (_, j) => t.api.post('/v1/users', { username: `bulk-${i + j}-${randomBytes(3).toString('hex')}`, role: 'viewer' })),
      );
    }
    const page = await t.api.get('/v1/users');
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ count: 1000, total: 1001, has_more: true, next_offset: 1000 });
    const rest = await t.api.get('/v1/users?offset=1000');
    expect(rest.body).toMatchObject({ count: 1, has_more: false, next_offset: null });
  });
});
