import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { seedAuditEntries } from '../../bench/seed';
import { startCairn } from '../support/processes';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

let t: TestServer;
let dir: string;
const files: Record<string, string> = {};

/** `cairn audit verify` as a real process, with nothing configured: no database, no server. */
async function verify(...args: string[]): Promise<{ code: number | null; output: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'CAIRN_LISTEN', 'CAIRN_DATA_DIR']) delete env[name];
  const child = startCairn(['audit', 'verify', ...args], env);
  const code = await child.exited;
  return { code, output: child.output() };
}

function save(name: string, content: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, content);
  files[name] = file;
  return file;
}

beforeAll(async () => {
  t = await startTestServer({ CAIRN_AUDIT_ANCHOR_INTERVAL: '1h' });
  dir = tempDir('cairn-audit-cli');
  const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo hi' });
  await waitForRunEnd(t.api, run.id);
  save('seal.json', (await t.as(null).get('/.well-known/seal.json')).text);
  save('seal.jwk', JSON.stringify(JSON.parse((await t.as(null).get('/.well-known/seal.json')).text).keys[0]));
  save('bundle.json', (await t.api.get('/v1/audit/bundle')).text);
  save('bundle-v1.jws', (await t.api.get('/v1/audit/bundle?version=1')).text);
  save('receipt.jws', (await t.api.get(`/v1/runs/${run.id}/receipt`)).text);
});
afterAll(async () => {
  await t?.stop();
});

test('a bundle and a receipt verify against the downloaded seal, or its bare key: exit 0 and a summary', async () => {
  // Version 2 (the default) and version 1 alike.
  for (const file of ['bundle.json', 'bundle-v1.jws']) {
    const bundle = await verify('--seal', files['seal.json'], files[file]);
    expect(bundle.output).toMatch(/audit bundle/);
    expect(bundle.output).toMatch(/ok {4}signature: EdDSA/);
    expect(bundle.output).toMatch(/ok {4}entries: \d+ \(seq 1\.\.\d+\) recompute and link from the genesis hash/);
    expect(bundle.output).toMatch(/^bundle verified: \d+ checks hold$/m);
    expect(bundle.code).toBe(0);
    if (file === 'bundle.json') expect(bundle.output).toMatch(/ok {4}entry hashes: /);
  }

  const receipt = await verify(`--seal=${files['seal.jwk']}`, files['receipt.jws']);
  expect(receipt.output).toMatch(/run receipt/);
  expect(receipt.output).toMatch(/^receipt verified: /m);
  expect(receipt.code).toBe(0);
});

test('one byte edited makes it exit non-zero, naming the problem and where it is', async () => {
  const jws = readFileSync(files['receipt.jws'], 'utf8');
  const [header, payload, signature] = jws.split('.');
  const at = Math.floor(payload.length / 2);
  const edited = save('receipt-edited.jws', [header, payload.slice(0, at) + (payload[at] === 'A' ? 'B' : 'A') + payload.slice(at + 1), signature].join('.'));
  const result = await verify('--seal', files['seal.json'], edited);
  expect(result.code).toBe(1);
  expect(result.output).toMatch(/FAIL {2}signature: the signature does not verify/);
  expect(result.output).toMatch(/(receipt|the document) does NOT verify: \d+ problems?/);

  const bundleText = readFileSync(files['bundle-v1.jws'], 'utf8');
  const [bh, bp, bs] = bundleText.split('.');
  const badSignature = save('bundle-edited.jws', [bh, bp, bs.slice(0, 4) + (bs[4] === 'A' ? 'B' : 'A') + bs.slice(5)].join('.'));
  const bundle = await verify('--seal', files['seal.json'], badSignature);
  expect(bundle.code).toBe(1);
  expect(bundle.output).toMatch(/FAIL {2}signature: /);

  // Version 2: an entry edited beside the signature is named with its seq.
  const document = JSON.parse(readFileSync(files['bundle.json'], 'utf8'));
  document.entries[1].actor = 'mallory';
  const editedEntry = await verify('--seal', files['seal.json'], save('bundle-entry-edited.json', JSON.stringify(document)));
  expect(editedEntry.code).toBe(1);
  expect(editedEntry.output).toMatch(/FAIL {2}entries\[1\] \(seq 2\): hash is \S+ but the entry recomputes to/);
});

test('a bundle of 10,000 entries, whose Merkle trees the server and the command build on threads, verifies; an entry edited deep in it is named', async () => {
  await seedAuditEntries(t.server.context.sql, 10_000);
  const text = (await t.api.get('/v1/audit/bundle')).text;
  const whole = await verify('--seal', files['seal.json'], save('bundle-10k.json', text));
  expect(whole.output).toMatch(/ok {4}entries: \d{5} \(seq 1\.\.\d{5}\) recompute and link from the genesis hash/);
  expect(whole.output).toMatch(/^bundle verified: \d+ checks hold$/m);
  expect(whole.code).toBe(0);

  const document = JSON.parse(text);
  const deep = document.entries.length - 1_500;
  document.entries[deep].actor = 'mallory';
  const edited = await verify('--seal', files['seal.json'], save('bundle-10k-edited.json', JSON.stringify(document)));
  expect(edited.code).toBe(1);
  expect(edited.output).toMatch(new RegExp(`FAIL {2}entries\\[${deep}\\] \\(seq ${deep + 1}\\): hash is \\S+ but the entry recomputes to`));
});

test("a bundle checked against another install's seal fails on the key", async () => {
  const otherInstall = await startTestServer({ CAIRN_AUDIT_ANCHOR_INTERVAL: '1h' });
  try {
    const otherSeal = save('other-seal.json', (await otherInstall.as(null).get('/.well-known/seal.json')).text);
    const result = await verify('--seal', otherSeal, files['bundle.json']);
    expect(result.code).toBe(1);
    expect(result.output).toMatch(/FAIL {2}key_id: the document is signed by key \S+, not by the pinned key/);
    expect(result.output).toMatch(/FAIL {2}payload\.install_id: /);
  } finally {
    await otherInstall.stop();
  }
});

test('usage faults exit 2', async () => {
  expect((await verify(files['bundle.json'])).code).toBe(2);
  expect((await verify('--seal', files['seal.json'])).code).toBe(2);
  expect((await verify('--seal', path.join(dir, 'missing.json'), files['bundle.json'])).code).toBe(2);
  const notJson = save('not-a-seal.txt', 'hello');
  const result = await verify('--seal', notJson, files['bundle.json']);
  expect(result.code).toBe(2);
  expect(result.output).toMatch(/is not JSON/);
});
