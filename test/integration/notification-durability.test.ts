import { randomBytes } from 'node:crypto';
import { createLogger, type RunningServer } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { createTestDatabase } from '../support/database';
import { apiClient, type ApiClient } from '../support/http';
import { freshReceiverEachTest, ok, settledDeliveries as settled } from '../support/notifications';
import { startCairn, type ChildHandle } from '../support/processes';
import { startReceiver, type Receiver } from '../support/receivers';
import { startServerInProcess, startTestServer, testSettings, waitForRunEnd } from '../support/server';

const keys = () => ({
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
});

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
});
freshReceiverEachTest(() => receiver);

/** Deliveries to named targets answered 2xx, counted by delivery id. */
function arrivalsById(r: Receiver): Map<string, number> {
  const counts = new Map<string, number>();
  for (const x of r.arrived().filter((a) => a.headers['idempotency-key'])) {
    const id = String(x.headers['idempotency-key']);
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

test('kill -9 of serve with one delivery in flight and one waiting to retry: the next server delivers each once, and no secret shows anywhere', async () => {
  const database = await createTestDatabase();
  const secrets = {
    hookPath: `/a/${randomBytes(10).toString('hex')}`,
    slowPath: `/b/${randomBytes(10).toString('hex')}`,
    grafanaPath: `/g/${randomBytes(10).toString('hex')}`,
    grafanaToken: `glsa_${randomBytes(10).toString('hex')}`,
    entryPath: `/e/${randomBytes(10).toString('hex')}`,
    incidentKey: `R${randomBytes(10).toString('hex')}`,
    smsToken: `smstok${randomBytes(10).toString('hex')}`,
    smtpPassword: `smtppw${randomBytes(10).toString('hex')}`,
  };
  const settings = keys();
  const env = {
    ...process.env,
    ...testSettings(database.url, {
      ...settings,
      SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
      CAIRN_LOG_LEVEL: 'debug',
      CAIRN_LEASE_SECONDS: '3',
      CAIRN_INCIDENT_URL: `${receiver.url}/v2/enqueue`,
      CAIRN_SMS_URL: receiver.url,
      CAIRN_SMS_ACCOUNT: 'AC1',
      CAIRN_SMS_FROM: '+15550001111',
      CAIRN_SMS_TOKEN: secrets.smsToken,
      CAIRN_SMTP_URL: 'smtp://127.0.0.1:9',
      CAIRN_SMTP_PASSWORD: secrets.smtpPassword,
    }),
  };
  let first: ChildHandle | undefined = startCairn(['serve'], env);
  let second: ChildHandle | undefined;
  try {
    const [, token] = await first.waitFor(/admin token: (\S+)/);
    const [, url] = await first.waitFor(/serving at (\S+)/);
    const api = apiClient(url, token);
    const tpl = await ok(
      await api.post('/v1/templates', {
        name: 'durable deliveries',
        tool: 'bash',
        command: 'exit 1',
        notifications: [{ kind: 'incident', key: secrets.incidentKey }],
      }),
    );
    const retrying = await ok(await api.post('/v1/notifications', { name: 'retrying', kind: 'webhook', url: `${receiver.url}${secrets.hookPath}` }));
    const inFlight = await ok(await api.post('/v1/notifications', { name: 'in flight', kind: 'chat_a', url: `${receiver.url}${secrets.slowPath}` }));
    const grafana = await ok(await api.post('/v1/notifications', { name: 'grafana', kind: 'annotation', url: `${receiver.url}${secrets.grafanaPath}`, key: secrets.grafanaToken }));
    for (const target of [retrying, inFlight, grafana]) {
      await ok(await api.post(`/v1/notifications/${target.id}/attachments`, { object_kind: 'template', object_id: tpl.id, event: 'failure' }));
    }
    let hookSeen = 0;
    let slowSeen = 0;
    receiver.answer((r) => {
      if (r.path === secrets.hookPath) return hookSeen++ === 0 ? { status: 500 } : { status: 200 };
      if (r.path === secrets.slowPath) return slowSeen++ === 0 ? 'hang' : { status: 200 };
      return { status: 200 };
    });
    const run = await ok(await api.post(`/v1/templates/${tpl.id}/launch`, {}));
    const direct = await ok(await api.post('/v1/runs', { tool: 'bash', command: 'true', notifications: [{ kind: 'webhook', url: `${receiver.url}${secrets.entryPath}`, on_failure: false }] }));
    await waitForRunEnd(api, run.id);
    await waitForRunEnd(api, direct.id);
    await receiver.waitFor((r) => r.some((x) => x.path === secrets.hookPath) && r.some((x) => x.path === secrets.slowPath), 20_000, 'the first attempts');
    // The failed attempt is recorded, and its retry waits on a timer, when the server dies.
    for (const deadline = Date.now() + 10_000; ; ) {
      const told = (await api.get(`/v1/runs/${run.id}/notifications`)).body;
      const mine = told.events.flatMap((e: any) => e.deliveries).find((d: any) => d.target_id === retrying.id);
      if (mine?.status === 'retrying') break;
      if (Date.now() > deadline) throw new Error(`the failed attempt was never recorded: ${JSON.stringify(told)}`);
      await new Promise((r) => setTimeout(r, 25));
    }

    first.child.kill('SIGKILL');
    await first.exited;
    const firstOutput = first.output();
    first = undefined;

    second = startCairn(['serve'], env);
    const [, url2] = await second.waitFor(/serving at (\S+)/);
    const api2 = apiClient(url2, token);
    const deliveries = await settled(api2, run.id, 3, 60_000);
    expect(Object.fromEntries(deliveries.map((d) => [d.target_id, [d.status, d.attempts]]))).toEqual({
      [retrying.id]: ['arrived', 2],
      // The attempt cut short by the kill is not counted.
      [inFlight.id]: ['arrived', 1],
      [grafana.id]: ['arrived', 1],
    });
    const arrivals = arrivalsById(receiver);
    expect(arrivals.size).toBe(3);
    for (const [, n] of arrivals) expect(n).toBe(1);
    // Beside them, direct best-effort delivery: the template's incident entry and the run's own webhook entry.
    expect(receiver.received.filter((x) => x.path === '/v2/enqueue')).toHaveLength(1);
    expect(receiver.received.filter((x) => x.path === secrets.entryPath)).toHaveLength(1);
    expect(receiver.received.filter((x) => x.path === secrets.hookPath).map((x) => x.answered)).toEqual([500, 200]);

    // Every secret, looked for everywhere a user or an operator can see.
    const reads = [
      await api2.get(`/v1/notifications`),
      await api2.get(`/v1/templates/${tpl.id}`),
      await api2.get(`/v1/runs/${run.id}`),
      await api2.get(`/v1/runs/${direct.id}`),
      await api2.get(`/v1/runs/${run.id}/events?limit=1000`),
      await api2.get(`/v1/runs/${direct.id}/events?limit=1000`),
      await api2.get(`/v1/runs/${run.id}/notifications`),
      await api2.get(`/v1/notifications/${retrying.id}/deliveries`),
      await api2.get(`/v1/audit?limit=1000`),
      await api2.get(`/v1/runs/${run.id}/evidence?format=json`),
      await api2.get(`/v1/runs/${direct.id}/evidence?format=json`),
      await api2.get(`/v1/runs/${run.id}/receipt`),
    ];
    for (const read of reads) expect(read.status).toBe(200);
    const everything = [...reads.map((r) => r.text), firstOutput, second.output()].join('\n');
    for (const [name, secret] of Object.entries(secrets)) {
      if (everything.includes(secret)) throw new Error(`the secret ${name} was found in an API read or the server log`);
    }
    // Reads show what is safe: the URL's scheme and host, whether a key is set, masked entries.
    expect((await api2.get(`/v1/templates/${tpl.id}`)).body.notifications).toEqual([{ kind: 'incident', key: '[masked]' }]);
    expect((await api2.get(`/v1/runs/${direct.id}`)).body.notifications).toEqual([{ kind: 'webhook', url: receiver.url }]);
  } finally {
    await first?.stop('SIGKILL');
    await second?.stop();
    await database.drop();
  }
});

/**
 * The deliveries of a run's start and end once both events are recorded (or skipped: a start
 * recorded after the run ended is not sent) and every delivery has finished.
 */
async function announced(api: ApiClient, runId: string, timeoutMs = 30_000): Promise<any[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const told = (await api.get(`/v1/runs/${runId}/notifications`)).body;
    const events = (told?.events ?? []).filter((e: any) => ['run.started', 'run.finished'].includes(e.event));
    const deliveries = events.flatMap((e: any) => e.deliveries);
    const done = events.length === 2 && events.every((e: any) => e.state === 'skipped' || e.deliveries.length > 0);
    if (done && deliveries.every((d: any) => ['arrived', 'failed', 'skipped'].includes(d.status))) return deliveries;
    if (Date.now() > deadline) throw new Error(`the start and end of ${runId} were not announced: ${JSON.stringify(told)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('two servers on one database and one Temporal: every delivery is sent once', async () => {
  const settings = keys();
  const extra = { ...settings, SERVICE_EGRESS_ALLOW: '127.0.0.0/8' };
  const one = await startTestServer(extra);
  let other: RunningServer | undefined;
  try {
    const config = loadConfig({}, testSettings(one.databaseUrl, { ...extra, CAIRN_POOL_QUEUE: one.config.poolQueue }));
    other = await startServerInProcess(config, createLogger(config));
    const api = one.api;
    const api2 = apiClient(other.url, one.adminToken);
    const tpl = await ok(await api.post('/v1/templates', { name: 'two servers', tool: 'bash', command: 'true' }));
    const hook = await ok(await api.post('/v1/notifications', { name: 'shared hook', kind: 'webhook', url: `${receiver.url}/shared` }));
    for (const event of ['started', 'success']) {
      await ok(await api.post(`/v1/notifications/${hook.id}/attachments`, { object_kind: 'template', object_id: tpl.id, event }));
    }
    const runs = await Promise.all(Array.from({ length: 20 }, async (_, i) => ok(await (i % 2 ? api : api2).post(`/v1/templates/${tpl.id}/launch`, {}))));
    for (const run of runs) await announced(api, run.id, 60_000);
    // Both servers drain their outboxes and sweep again, racing, over events they both recorded and
    // deliveries both handed on: every delivery stays arrived after its one attempt.
    for (let i = 0; i < 2; i++) await Promise.all([one.server.drainOutbox(), other.drainOutbox(), one.server.sweepOnce(), other.sweepOnce()]);
    let sent = 0;
    for (const run of runs) {
      const deliveries = await announced(api, run.id);
      expect(deliveries.map((d: any) => [d.status, d.attempts])).toEqual(deliveries.map(() => ['arrived', 1]));
      sent += deliveries.length;
    }
    // A start recorded after its run ended is skipped by design (a busy machine does that): at
    // least every end is sent.
    expect(sent).toBeGreaterThanOrEqual(20);
    const counts = arrivalsById(receiver);
    expect(counts.size).toBe(sent);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(receiver.received).toHaveLength(sent);
  } finally {
    await other?.stop();
    await one.stop();
  }
});
