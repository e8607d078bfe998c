import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../core/config';
import { createLogger } from '../../cli/serve';
import { connectDatabase, type Sql } from '../../store/db';
import { apiClient, type ApiResponse } from '../support/http';
import { startServerInProcess, startTestServer, testSettings, waitForRunEnd, type TestServer } from '../support/server';

// Sign-in is limited to 5 failures an account and 20 an address in 5 minutes; stream tickets to 60
// an account a minute. The counters live in PostgreSQL, so they hold across servers.

let t: TestServer;
let sql: Sql;
beforeAll(async () => {
  t = await startTestServer();
  sql = connectDatabase(t.databaseUrl, { max: 2 });
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});
// Every test starts with the windows of the ones before it over (all tests sign in from 127.0.0.1).
beforeEach(async () => {
  await letTimePass(3600);
});

/** Moves every counting window back, as if that many seconds had gone by. */
async function letTimePass(seconds: number) {
  await sql`UPDATE rate_limit_windows SET window_start = window_start - make_interval(secs => ${seconds})`;
}

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;
const PASSWORD = 'correct horse battery';

async function createUser(role: 'admin' | 'operator' | 'viewer' = 'viewer') {
  const res = await t.api.post('/v1/users', { username: unique(role), role, password: PASSWORD });
  if (res.status !== 201) throw new Error(`creating a user failed: ${res.status} ${res.text}`);
  return res.body as { id: string; username: string };
}

const login = (username: string, password: string, url = t.url) => apiClient(url).post('/v1/auth/login', { username, password });

async function chainSize(): Promise<number> {
  return (await t.api.get('/v1/audit?limit=1')).body.total as number;
}

function expectThrottled(res: ApiResponse, limit: RegExp, windowSeconds: number) {
  expect(res.status).toBe(429);
  expect(res.body.error).toMatch(limit);
  expect(res.body.token).toBeUndefined();
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThan(0);
  expect(retryAfter).toBeLessThanOrEqual(windowSeconds);
  expect(res.body.retry_after).toBe(retryAfter);
}

describe('sign-in throttling for an account', () => {
  test('five wrong passwords, then even the right one is refused with 429 and Retry-After', async () => {
    const user = await createUser();
    for (let i = 0; i < 5; i++) expect((await login(user.username, `guess number ${i}`)).status).toBe(401);
    const locked = await login(user.username, PASSWORD);
    expectThrottled(locked, /too many failed sign-ins for this account: 5 within 5 minutes/, 300);
    // A wrong guess in the lockout answers exactly as the right password does, so it tells nothing.
    const guess = await login(user.username, 'another guess');
    expect(guess.status).toBe(429);
    expect(guess.body.error).toBe(locked.body.error.replace(/\d+ seconds/, `${guess.body.retry_after} seconds`));
  });

  test('the lockout follows the account under any spelling of its name', async () => {
    const user = await createUser();
    for (let i = 0; i < 5; i++) await login(user.username.toUpperCase(), `guess number ${i}`);
    expect((await login(user.username, PASSWORD)).status).toBe(429);
  });

  test('once the window has passed the right password works again', async () => {
    const user = await createUser();
    for (let i = 0; i < 5; i++) await login(user.username, `guess number ${i}`);
    expect((await login(user.username, PASSWORD)).status).toBe(429);
    // Ten seconds before the window ends (the real seconds the sign-ins took count too, so not closer): still refused.
    await letTimePass(290);
    expect((await login(user.username, PASSWORD)).status).toBe(429);
    await letTimePass(11);
    const res = await login(user.username, PASSWORD);
    expect(res.status).toBe(200);
    expect(typeof res.body.token).toBe('string');
  });

  test('a successful sign-in starts the account’s count again', async () => {
    const user = await createUser();
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 4; i++) expect((await login(user.username, `guess ${round}.${i}`)).status).toBe(401);
      expect((await login(user.username, PASSWORD)).status).toBe(200);
    }
  });

  test('an unknown username is throttled exactly like a known one', async () => {
    const nobody = unique('nobody');
    for (let i = 0; i < 5; i++) expect((await login(nobody, `guess number ${i}`)).status).toBe(401);
    expectThrottled(await login(nobody, PASSWORD), /too many failed sign-ins for this account/, 300);
  });

  test('failures and refusals write nothing to the audit chain; a sign-in writes one entry', async () => {
    const user = await createUser();
    const before = await chainSize();
    for (let i = 0; i < 5; i++) await login(user.username, `guess number ${i}`);
    for (let i = 0; i < 3; i++) expect((await login(user.username, PASSWORD)).status).toBe(429);
    expect(await chainSize()).toBe(before);
    await letTimePass(301);
    expect((await login(user.username, PASSWORD)).status).toBe(200);
    expect(await chainSize()).toBe(before + 1);
  });

  test('guesses fired all at once get no more than five tries at the password', async () => {
    const user = await createUser();
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => login(user.username, `parallel guess ${i}`)));
    const statuses = answers.map((res) => res.status).sort();
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
  });

  test('the count holds across two servers sharing one database', async () => {
    const user = await createUser();
    const config = loadConfig({}, testSettings(t.databaseUrl));
    const second = await startServerInProcess(config, createLogger(config));
    try {
      for (let i = 0; i < 5; i++) expect((await login(user.username, `guess ${i}`, i % 2 ? second.url : t.url)).status).toBe(401);
      expect((await login(user.username, PASSWORD, second.url)).status).toBe(429);
      expect((await login(user.username, PASSWORD, t.url)).status).toBe(429);
    } finally {
      await second.stop();
    }
  });
});

describe('sign-in throttling for a client address', () => {
  test('twenty failures from one address lock out even an account with no failures of its own', async () => {
    // Four guesses at each of five accounts: no account reaches its own limit.
    for (let a = 0; a < 5; a++) {
      const user = await createUser();
      for (let i = 0; i < 4; i++) expect((await login(user.username, `guess ${i}`)).status).toBe(401);
    }
    const untouched = await createUser();
    expectThrottled(await login(untouched.username, PASSWORD), /too many failed sign-ins from this address: 20 within 5 minutes/, 300);
    await letTimePass(301);
    expect((await login(untouched.username, PASSWORD)).status).toBe(200);
  });

  test('a locked account’s refusals do not count toward the address', async () => {
    const locked = await createUser();
    for (let i = 0; i < 5; i++) await login(locked.username, `guess ${i}`);
    for (let i = 0; i < 20; i++) expect((await login(locked.username, PASSWORD)).status).toBe(429);
    const other = await createUser();
    expect((await login(other.username, PASSWORD)).status).toBe(200);
  });
});

describe('stream ticket minting', () => {
  test('past 60 a minute an account is answered 429 and the chain stops growing', async () => {
    const user = await createUser('viewer');
    const viewer = t.as((await t.api.post('/v1/tokens', { name: 'viewer', username: user.username })).body.token);
    // A template's run, which the viewer is granted to read (docs/api.md, Access).
    const { body: template } = await t.api.post('/v1/templates', { name: 'ticketed', tool: 'bash', command: 'true' });
    expect((await t.api.post('/v1/grants', { object: template.id, permission: 'read', user_id: user.id })).status).toBe(201);
    const { body: run } = await t.api.post(`/v1/templates/${template.id}/launch`, {});
    // Ended first, so its end's chain entry is not counted with the tickets'.
    await waitForRunEnd(t.api, run.id);
    const before = await chainSize();
    for (let i = 0; i < 60; i++) expect((await viewer.post(`/v1/runs/${run.id}/stream-ticket`)).status).toBe(201);
    expect(await chainSize()).toBe(before + 60);
    const refused = await viewer.post(`/v1/runs/${run.id}/stream-ticket`);
    expectThrottled(refused, /too many stream tickets for this account: 60 within a minute/, 60);
    expect(refused.body.ticket).toBeUndefined();
    expect(await chainSize()).toBe(before + 60);

    // Another account is counted on its own; and once the minute has passed the viewer mints again.
    expect((await t.api.post(`/v1/runs/${run.id}/stream-ticket`)).status).toBe(201);
    await letTimePass(61);
    expect((await viewer.post(`/v1/runs/${run.id}/stream-ticket`)).status).toBe(201);
  });
});
