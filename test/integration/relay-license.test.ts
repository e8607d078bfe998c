import { startTsScript, type ChildHandle } from '../support/processes';
import { testLicense } from '../support/license';
import { apiClient } from '../support/http';
import { startTestServer, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

/** Every worker is Team (spec part A 1.2): a server licensed below Team refuses a relay worker at its claim. */

const WORKER_TOKEN = 'relay-license-token-0123456789abcdef';

let t: TestServer;
let license: { file: string; publicJwk: object };
let worker: ChildHandle | undefined;

beforeAll(async () => {
  license = await testLicense('pro');
  t = await startTestServer({ CAIRN_LICENSE_FILE: license.file, CAIRN_WORKER_TOKEN: WORKER_TOKEN }, { licenseKeys: [license.publicJwk] });
});
afterAll(async () => {
  await worker?.stop('SIGKILL');
  await t?.stop();
});

test('a Pro server refuses a relay worker’s claim naming the feature and its tier; the worker says so and is not in the fleet', async () => {
  const claim = await apiClient(t.url, WORKER_TOKEN).post('/relay/v1/claim', { worker: { id: 'wrk_by_hand', queue: 'edge', host: 'h', pid: 1, version: 'test' }, wait_seconds: 0 });
  expect(claim.status).toBe(403);
  expect(claim.body.error).toBe('a worker (cairn worker) needs the Team tier; this install runs Pro');

  // A real relay worker process: refused at each claim, it says so plainly and waits longer before trying again.
  worker = startTsScript(
    'test/support/worker-process.ts',
    [JSON.stringify(license.publicJwk), '--server', t.url, '--worker-token', WORKER_TOKEN, '--queue', 'edge'],
    { PATH: process.env.PATH, HOME: process.env.HOME, CAIRN_DATA_DIR: tempDir('cairn-relay-license-worker'), CAIRN_LOG_LEVEL: 'info' },
  );
  await worker.waitFor(/the server refused this worker/);
  const workers = (await t.api.get('/v1/workers')).body.workers as { kind: string }[];
  expect(workers.filter((w) => w.kind === 'relay')).toEqual([]);
}, 60_000);
