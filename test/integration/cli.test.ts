import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { portAnswers } from '../../embedded/state';
import { connectDatabase } from '../../store/db';
import { migrate } from '../../store/migrate';
import { createTestDatabase } from '../support/database';
import { apiClient } from '../support/http';
import { testLicense } from '../support/license';
import { startCairn, startChild, startTsScript, ROOT } from '../support/processes';
import { startTestServer, testSettings, waitForRunEnd } from '../support/server';
import { tempDir } from '../support/temp';

/** The environment of a person with nothing configured: no database or Temporal address of their own. */
function bareEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, CAIRN_LOG_LEVEL: 'warn' };
  for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'CAIRN_LISTEN', 'CAIRN_DATA_DIR', 'CAIRN_POOL_QUEUE']) delete env[name];
  return env;
}

async function serveEmbedded(dataDir: string) {
  const serve = startCairn(['serve', '--data-dir', dataDir, '--listen', '127.0.0.1:0'], bareEnvironment());
  const [, url] = await serve.waitFor(/serving at (\S+)/, 180_000);
  await serve.waitFor(/Temporal UI: /);
  return { serve, url };
}

(process.getuid?.() === 0 ? test : test.skip)("a fresh clone in a private home directory starts, as root, with the README's command", async () => {
  const home = tempDir('cairn-root-home');
  chmodSync(home, 0o700);
  const checkout = path.join(home, 'cairn');
  execFileSync('git', ['clone', '-q', ROOT, checkout]);
  // What `npm install` does: lays out the packages (taken as hard links of this checkout's rather
  // than downloaded again), then runs the postinstall step, which compiles the server to dist/.
  execFileSync('cp', ['-al', path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules')]);
  execFileSync(process.execPath, ['bin/setup.js'], { cwd: checkout, stdio: 'ignore' });
  const serve = startChild('npm', ['start', '--', '--listen', '127.0.0.1:0'], { ...bareEnvironment(), HOME: home }, { cwd: checkout, group: true });
  try {
    const [, url] = await serve.waitFor(/serving at (\S+)/, 180_000);
    const [, token] = serve.output().match(/admin token: (\S+)/)!;
    const api = apiClient(url, token);
    const { body: run } = await api.post('/v1/runs', { tool: 'bash', command: 'echo from a private home' });
    expect((await waitForRunEnd(api, run.id)).status).toBe('succeeded');
    expect((await api.get(`/v1/runs/${run.id}/logs`)).text).toBe('from a private home\n');
  } finally {
    await serve.stop();
    const location = path.join(checkout, 'data', 'postgres.location');
    if (existsSync(location)) rmSync(readFileSync(location, 'utf8').trim(), { recursive: true, force: true });
  }
});

// One install's life on embedded defaults, in two starts (each start of the embedded services costs
// seconds): the first prints the admin token once and runs work; kill -9 leaves its services
// running; the next start adopts them, keeps every run and log, prints no token, and a clean stop
// takes the services down with it.
test('serve on embedded defaults prints the admin token once; after kill -9 the next serve adopts the leftover services, keeps everything, and stops them with itself', async () => {
  const dataDir = tempDir('cairn-quickstart');
  const first = await serveEmbedded(dataDir);
  let second: Awaited<ReturnType<typeof serveEmbedded>> | undefined;
  try {
    const tokens = [...first.serve.output().matchAll(/^admin token: (\S+)$/gm)].map((m) => m[1]);
    expect(tokens).toHaveLength(1);
    const [, uiUrl] = first.serve.output().match(/Temporal UI: (http:\/\/\S+)/)!;
    expect((await fetch(uiUrl)).status).toBe(200);
    const api = apiClient(first.url, tokens[0]);
    const { body: run } = await api.post('/v1/runs', { tool: 'bash', command: 'echo embedded' });
    expect((await waitForRunEnd(api, run.id)).status).toBe('succeeded');

    const statePort = (service: string) => JSON.parse(readFileSync(path.join(dataDir, `${service}.state.json`), 'utf8')).port as number;
    first.serve.child.kill('SIGKILL');
    await first.serve.exited;
    // The embedded services outlive a killed server.
    expect(await portAnswers(statePort('postgres'))).toBe(true);
    expect(await portAnswers(statePort('temporal'))).toBe(true);

    second = await serveEmbedded(dataDir);
    expect(second.serve.output()).not.toMatch(/admin token:/);
    const owner = (service: string) => JSON.parse(readFileSync(path.join(dataDir, `${service}.state.json`), 'utf8')).ownerPid;
    expect(owner('postgres')).toBe(second.serve.child.pid);
    expect(owner('temporal')).toBe(second.serve.child.pid);
    expect(second.serve.output()).toMatch(new RegExp(`Temporal UI: ${uiUrl}`));
    const again = apiClient(second.url, tokens[0]);
    expect((await again.get('/v1/runs')).body.runs.map((r: any) => r.id)).toContain(run.id);
    expect((await again.get(`/v1/runs/${run.id}/logs`)).text).toBe('embedded\n');
    const { body: adopted } = await again.post('/v1/runs', { tool: 'bash', command: 'echo adopted' });
    expect((await waitForRunEnd(again, adopted.id)).status).toBe('succeeded');

    second.serve.child.kill('SIGTERM');
    expect(await second.serve.exited).toBe(0);
    // A clean stop takes the embedded services down with it.
    expect(await portAnswers(statePort('postgres'))).toBe(false);
    expect(await portAnswers(Number(new URL(uiUrl).port))).toBe(false);
  } finally {
    await first.serve.stop();
    await second?.serve.stop();
  }
});

test('two installs with two data dirs run side by side', async () => {
  const started = await Promise.allSettled([serveEmbedded(tempDir('cairn-side-a')), serveEmbedded(tempDir('cairn-side-b'))]);
  // One that started is stopped even when the other did not start.
  const running = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(running.map((install) => install.serve.stop()));
    throw failed.reason;
  }
  const [a, b] = running;
  try {
    expect(a.url).not.toBe(b.url);
    for (const install of [a, b]) {
      const [, token] = install.serve.output().match(/admin token: (\S+)/)!;
      const api = apiClient(install.url, token);
      const { body: run } = await api.post('/v1/runs', { tool: 'bash', command: 'echo side' });
      expect((await waitForRunEnd(api, run.id)).status).toBe('succeeded');
      expect((await api.get('/v1/runs')).body.total).toBe(1);
    }
  } finally {
    await Promise.all([a.serve.stop(), b.serve.stop()]);
  }
});

test('cairn token create and cairn user create work against the install database', async () => {
  const t = await startTestServer();
  try {
    const env = { ...process.env, DATABASE_URL: t.databaseUrl, CAIRN_LOG_LEVEL: 'warn' };
    const mint = startCairn(['token', 'create', '--username', 'admin', '--name', 'ci pipeline'], env);
    expect(await mint.exited).toBe(0);
    const [, secret] = mint.output().match(/^token: (\S+)$/m)!;
    const me = await t.as(secret).get('/v1/auth/me');
    expect(me.body).toMatchObject({ username: 'admin', role: 'admin' });
    expect(me.body.token).toMatchObject({ name: 'ci pipeline', created_by: 'cairn-cli', created_by_type: 'system' });

    const create = startChild('sh', ['-c', `printf 'correct horse battery' | node ${ROOT}/bin/cairn.js user create --username dana --role operator --password-stdin`], env);
    expect(await create.exited).toBe(0);
    expect(create.output()).toMatch(/user dana created/);
    const login = await t.as(null).post('/v1/auth/login', { username: 'dana', password: 'correct horse battery' });
    expect(login.status).toBe(200);
    expect(login.body.role).toBe('operator');

    const bad = startCairn(['user', 'create', '--username', 'eve', '--role', 'root'], env);
    expect(await bad.exited).toBe(2);
    expect(bad.output()).toMatch(/role must be admin, operator or viewer/);
  } finally {
    await t.stop();
  }
});

test('two servers applying the schema at once apply each migration once', async () => {
  const database = await createTestDatabase({ empty: true });
  const a = connectDatabase(database.url);
  const b = connectDatabase(database.url);
  try {
    const [appliedA, appliedB] = await Promise.all([migrate(a), migrate(b)]);
    const migrations = readdirSync(path.resolve(__dirname, '../../schema')).filter((f) => f.endsWith('.sql')).sort();
    expect(migrations.length).toBeGreaterThan(1);
    expect([...appliedA, ...appliedB].sort()).toEqual(migrations);
    const rows = await a`SELECT version FROM schema_migrations ORDER BY version`;
    expect(rows.map((r) => r.version)).toEqual(migrations);
  } finally {
    await a.end();
    await b.end();
    await database.drop();
  }
});

test('a test database is a copy of the migrated template: a start finds every migration recorded and applies none', async () => {
  const database = await createTestDatabase();
  const sql = connectDatabase(database.url, { max: 1 });
  try {
    const migrations = readdirSync(path.resolve(__dirname, '../../schema')).filter((f) => f.endsWith('.sql')).sort();
    expect((await sql`SELECT version FROM schema_migrations ORDER BY version`).map((r) => r.version)).toEqual(migrations);
    expect(await migrate(sql)).toEqual([]);
  } finally {
    await sql.end();
    await database.drop();
  }
});

test('serve refuses a bad setting with one line naming the flag', async () => {
  const serve = startCairn(['serve', '--run-timeout', 'soon'], bareEnvironment());
  expect(await serve.exited).toBe(2);
  expect(serve.output().trim()).toBe('cairn: --run-timeout (CAIRN_RUN_TIMEOUT): "soon" is not a duration (try 3600, 90s, 30m or 24h)');
});

test('cairn worker adds execution capacity to the default pool', async () => {
  const t = await startTestServer({ CAIRN_POOL_SIZE: '1' });
  // Every worker is Team tier (spec part A 1.2): this one trusts the test's license key.
  const license = await testLicense('team');
  const worker = startTsScript('test/support/worker-process.ts', [JSON.stringify(license.publicJwk)], {
    ...process.env,
    DATABASE_URL: t.databaseUrl,
    TEMPORAL_ADDRESS: t.config.temporalAddress!,
    CAIRN_POOL_QUEUE: t.config.poolQueue,
    CAIRN_POOL_SIZE: '1',
    CAIRN_LOG_LEVEL: 'info',
    CAIRN_LICENSE_FILE: license.file,
  });
  try {
    await worker.waitFor(/worker polling/);
    const runs = await Promise.all(
      [1, 2].map(async () => (await t.api.post('/v1/runs', { tool: 'bash', command: 'sleep 2' })).body.id as string),
    );
    // One slot on the server and one on the worker: both runs are running at the same moment.
    const deadline = Date.now() + 15_000;
    let bothRunning = false;
    while (!bothRunning && Date.now() < deadline) {
      const states = await Promise.all(runs.map(async (id) => (await t.api.get(`/v1/runs/${id}`)).body.status));
      bothRunning = states.every((s) => s === 'running');
      if (!bothRunning) await new Promise((r) => setTimeout(r, 50));
    }
    expect(bothRunning).toBe(true);
    for (const id of runs) expect((await waitForRunEnd(t.api, id)).status).toBe('succeeded');
  } finally {
    await worker.stop();
    await t.stop();
  }
});

test('a tool whose program is missing on this server is refused with 400 saying so', async () => {
  const t = await startTestServer();
  // A PATH holding only sh and bash: python3 is missing on this server.
  const bin = tempDir('cairn-path');
  for (const program of ['sh', 'bash']) symlinkSync(execFileSync('sh', ['-c', `command -v ${program}`]).toString().trim(), path.join(bin, program));
  const serve = startCairn(['serve'], {
    ...process.env,
    ...testSettings(t.databaseUrl, { CAIRN_LOG_LEVEL: 'warn' }),
    PATH: bin,
  });
  try {
    const [, url] = await serve.waitFor(/serving at (\S+)/);
    const api = apiClient(url, t.adminToken);
    const refused = await api.post('/v1/runs', { tool: 'python', command: 'print(1)' });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: 'the python tool is missing on this server: python3 is not on its PATH', field: 'tool' });
    const { body: run } = await api.post('/v1/runs', { tool: 'bash', command: 'echo still here' });
    expect((await waitForRunEnd(api, run.id)).status).toBe('succeeded');
  } finally {
    await serve.stop();
    await t.stop();
  }
});
