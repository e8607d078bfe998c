import { loadConfig } from '../../core/config';
import { createLogger, type RunningServer } from '../../cli/serve';
import { createTestDatabase } from '../support/database';
import { apiClient } from '../support/http';
import { startServerInProcess, testSettings } from '../support/server';

/**
 * An install running open (spec part B 5.1): chosen at start with --open, only while the install
 * holds no token at all; said in the doctor; ended by the first token minted.
 */

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let server: RunningServer | undefined;

beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await server?.stop();
  await database?.drop();
});

test('open: no token minted, token-less requests act as the admin, the doctor says so, the first token ends it, and --open then refuses to start', async () => {
  const config = loadConfig({}, testSettings(database.url, { CAIRN_OPEN: 'true' }));
  expect(config.open).toBe(true);
  server = await startServerInProcess(config, createLogger(config));
  expect(server.adminToken).toBeUndefined();
  const anyone = apiClient(server.url);

  const me = await anyone.get('/v1/auth/me');
  expect(me.status).toBe(200);
  expect(me.body).toMatchObject({ username: 'admin', role: 'admin' });
  expect((await anyone.get('/v1/users')).status).toBe(200);

  const doctor = await anyone.get('/v1/doctor');
  expect(doctor.body.checks.find((c: any) => c.name === 'open_install')).toMatchObject({ ok: false, severity: 'warning', facts: { open: true } });

  // A bad bearer is still refused: open is for token-less requests only.
  expect((await anyone.request('GET', '/v1/auth/me', { token: 'cairn_nonsense' })).status).toBe(401);

  const minted = await anyone.post('/v1/tokens', { name: 'closing', username: 'admin' });
  expect(minted.status).toBe(201);
  expect((await anyone.get('/v1/auth/me')).status).toBe(401);
  const closed = apiClient(server.url, minted.body.token);
  expect((await closed.get('/v1/auth/me')).body).toMatchObject({ username: 'admin' });
  expect((await closed.get('/v1/doctor')).body.checks.find((c: any) => c.name === 'open_install')).toMatchObject({ ok: true, facts: { open: false } });
  const audit = await closed.get('/v1/audit?limit=1000');
  expect((audit.body.entries as any[]).find((e) => e.body.kind === 'install.bootstrapped').body).toMatchObject({ open: true });

  await server.stop();
  server = undefined;
  const again = loadConfig({}, testSettings(database.url, { CAIRN_OPEN: 'true' }));
  await expect(startServerInProcess(again, createLogger(again))).rejects.toThrow(/--open \(CAIRN_OPEN\): this install holds 1 live token/);
});

test('--open is off unless chosen', () => {
  expect(loadConfig({}, testSettings('postgres://x')).open).toBe(false);
});
