import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { ROOT } from '../support/processes';

// What a run could reach besides the API, tried as an attacker's run would. The server's own
// environment carries the install key, as a real server's does.
const keys = {
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
};

let t: TestServer;
let savedEnv: NodeJS.ProcessEnv;
beforeAll(async () => {
  savedEnv = { ...process.env };
  Object.assign(process.env, keys);
  t = await startTestServer(keys);
});
afterAll(async () => {
  await t?.stop();
  process.env = savedEnv;
});

async function run(command: string, extra: Record<string, unknown> = {}) {
  const { status, body } = await t.api.post('/v1/runs', { tool: 'bash', command, ...extra });
  expect(status).toBe(201);
  const ended = await waitForRunEnd(t.api, body.id, 60_000);
  const log = await t.api.get(`/v1/runs/${body.id}/logs`);
  return { run: ended, log: log.text };
}

test("a run cannot write Cairn's database: a held run stays held however the run tries", async () => {
  await t.api.post('/v1/policies', { name: 'hold deploys', command_contains: 'deploy-prod' });
  const held = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo deploy-prod' });
  expect(held.body.status).toBe('held');
  await t.api.request('DELETE', `/v1/policies/${(await t.api.get('/v1/policies')).body.policies[0].id}`);

  const url = new URL(t.databaseUrl);
  const attack = await run(
    `psql "${t.databaseUrl}" -c "UPDATE runs SET status='pending', hold=NULL WHERE id='${held.body.id}'" 2>&1; ` +
      `(exec 3<>/dev/tcp/${url.hostname}/${url.port || 5432}) 2>/dev/null && echo "database port open" || echo "database port closed"`,
  );
  expect(attack.log).toContain('database port closed');
  expect(attack.log).not.toMatch(/UPDATE 1/);
  await new Promise((r) => setTimeout(r, 500));
  expect((await t.api.get(`/v1/runs/${held.body.id}`)).body.status).toBe('held');
});

test("a run cannot reach the Temporal frontend or the API on the host's loopback", async () => {
  const [host, port] = t.config.temporalAddress!.split(':');
  const api = new URL(t.url);
  const { log } = await run(
    `for target in ${host}/${port} ${api.hostname}/${api.port}; do ` +
      `(exec 3<>/dev/tcp/$target) 2>/dev/null && echo "$target open" || echo "$target closed"; done`,
  );
  expect(log).toContain(`${host}/${port} closed`);
  expect(log).toContain(`${api.hostname}/${api.port} closed`);
});

test("a run sees none of the server's environment, keys or process entries", async () => {
  const { log } = await run(
    'env; echo "---parent"; tr "\\0" "\\n" < /proc/$PPID/environ 2>&1; echo "---procs"; ls /proc | grep -E "^[0-9]+$" | wc -l; ' +
      `echo "---server"; cat /proc/${process.pid}/environ 2>&1 | head -c 200`,
  );
  for (const secret of [keys.SERVICE_ENCRYPTION_KEY, keys.SERVICE_ENCRYPTION_SALT, t.databaseUrl]) expect(log).not.toContain(secret);
  expect(log).not.toMatch(/DATABASE_URL|SERVICE_ENCRYPTION|TEMPORAL_ADDRESS|CAIRN_DATA_DIR/);
  // Only the run's own few processes are visible.
  const procs = Number(/---procs\n(\d+)/.exec(log)![1]);
  expect(procs).toBeLessThan(10);
});

test("a run cannot read the data dir, the checkout or the server's home", async () => {
  const dataDir = t.config.dataDir;
  const { log } = await run(
    `for p in "${dataDir}" "${ROOT}" "${path.join(ROOT, 'package.json')}" "$(getent passwd 0 | cut -d: -f6)" /run /var/run/postgresql; do ` +
      `ls "$p" >/dev/null 2>&1 && echo "readable $p" || echo "hidden $p"; done; id -u`,
  );
  expect(log).not.toMatch(/^readable /m);
  if (process.getuid?.() === 0) {
    // A root server runs tools as its unprivileged run account.
    const uid = Number(log.trim().split('\n').pop());
    expect(uid).not.toBe(0);
  }
});

test('a run still writes its work dir, its own /tmp, and runs python', async () => {
  const { run: ended, log } = await run('echo data > here.txt && cat here.txt && echo x > /tmp/t && python3 -c "print(6*7)" && pwd');
  expect(ended.status).toBe('succeeded');
  expect(log).toContain('data\n');
  expect(log).toContain('42\n');
});

test('a cancel lets the tool clean up before the sandbox ends', async () => {
  const { body } = await t.api.post('/v1/runs', {
    tool: 'bash',
    command: 'trap "echo cleaning up; exit 7" TERM; echo started; while true; do sleep 0.1; done',
  });
  for (let i = 0; i < 100; i++) {
    if ((await t.api.get(`/v1/runs/${body.id}/logs`)).text.includes('started')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await t.api.post(`/v1/runs/${body.id}/cancel`);
  const ended = await waitForRunEnd(t.api, body.id);
  expect(ended.status).toBe('canceled');
  expect((await t.api.get(`/v1/runs/${body.id}/logs`)).text).toContain('cleaning up');
});
