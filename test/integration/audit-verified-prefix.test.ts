import { verifyReceipt } from '../../core/audit/audit-offline';
import { connectDatabase, type Sql } from '../../store/db';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

// `GET /v1/audit/verify` and receipts resume from the prefix an earlier check recorded as verified
// (schema/017_scale.sql audit_verified, services/audit-verify.ts); a rewrite of any entry drops it.

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

const payloadOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString('utf8'));
const prefix = async () => (await sql<{ generation: number; size: number }[]>`SELECT generation, size::int AS size FROM audit_verified`)[0];
const chainSize = async () => (await sql<{ n: number }[]>`SELECT seq::int AS n FROM audit_head`)[0].n;

async function seal() {
  return (await t.as(null).get('/.well-known/seal.json')).body;
}

test('entries are stored with the canonical text their hash covers', async () => {
  await t.api.post('/v1/users', { username: 'prefix-reader', role: 'viewer' });
  const rows = await sql<{ canonical: string; prev_hash: string; seq: number }[]>`SELECT canonical, prev_hash, seq::int AS seq FROM audit_entries ORDER BY seq`;
  expect(rows.length).toBeGreaterThan(0);
  for (const row of rows) expect(row.canonical.endsWith(`,"prev_hash":"${row.prev_hash}","seq":${row.seq}}`)).toBe(true);
});

test('verify records its prefix and later reads only what follows; receipts resumed match receipts read whole', async () => {
  const run = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo prefix' });
  await waitForRunEnd(t.api, run.body.id);
  const first = await t.api.get('/v1/audit/verify');
  expect(first.body).toMatchObject({ ok: true, count: await chainSize() });
  expect((await prefix()).size).toBe(first.body.count);

  const whole = payloadOf((await t.api.get(`/v1/runs/${run.body.id}/receipt`)).text);
  for (let i = 0; i < 3; i++) await t.api.post('/v1/users', { username: `prefix-${i}`, role: 'viewer' });
  const second = await t.api.get('/v1/audit/verify');
  expect(second.body).toMatchObject({ ok: true, count: await chainSize() });
  expect((await prefix()).size).toBe(second.body.count);

  // A receipt resumed from the prefix proves the same entries against the grown chain.
  const res = await t.api.get(`/v1/runs/${run.body.id}/receipt`);
  expect(res.status).toBe(200);
  const resumed = payloadOf(res.text);
  expect(resumed.size).toBe(second.body.count);
  expect(resumed.merkle_root).toBe(second.body.merkle_root);
  expect(resumed.entries.map((e: any) => e.entry)).toEqual(whole.entries.map((e: any) => e.entry));
  expect((await verifyReceipt(res.text, await seal())).problems).toEqual([]);
});

test('a rewritten entry drops the prefix, so verify and receipts read the whole chain and name it', async () => {
  const run = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo rewritten' });
  await waitForRunEnd(t.api, run.body.id);
  expect((await t.api.get('/v1/audit/verify')).body.ok).toBe(true);
  const before = await prefix();
  const [row] = await sql<{ canonical: string }[]>`SELECT canonical FROM audit_entries WHERE seq = 2`;
  await sql`UPDATE audit_entries SET canonical = replace(canonical, '"kind":', '"kind":"forged","was":') WHERE seq = 2`;
  try {
    expect(await prefix()).toEqual({ generation: before.generation + 1, size: 0 });
    const verify = await t.api.get('/v1/audit/verify');
    expect(verify.body).toMatchObject({ ok: false, reason: 'chain_break', broke_at: 2, broke_seq: 2 });
    const receipt = await t.api.get(`/v1/runs/${run.body.id}/receipt`);
    expect(receipt.status).toBe(409);
    // A broken chain records no prefix.
    expect((await prefix()).size).toBe(0);
  } finally {
    await sql`UPDATE audit_entries SET canonical = ${row.canonical} WHERE seq = 2`;
  }
  expect((await t.api.get('/v1/audit/verify')).body.ok).toBe(true);
});

test('a rewrite made with triggers off stands until the prefix is older than a whole-read interval', async () => {
  expect((await t.api.get('/v1/audit/verify')).body.ok).toBe(true);
  const [row] = await sql<{ canonical: string }[]>`SELECT canonical FROM audit_entries WHERE seq = 3`;
  await sql.begin(async (tx) => {
    await tx`SET LOCAL session_replication_role = replica`;
    await tx`UPDATE audit_entries SET canonical = regexp_replace(canonical, '"actor":"[^"]*"', '"actor":"mallory"') WHERE seq = 3`;
  });
  try {
    // Documented limit (docs/operations.md): the prefix is trusted until the next whole read.
    expect((await t.api.get('/v1/audit/verify')).body.ok).toBe(true);
    await sql`UPDATE audit_verified SET verified_at = now() - interval '16 minutes'`;
    expect((await t.api.get('/v1/audit/verify')).body).toMatchObject({ ok: false, reason: 'chain_break', broke_at: 3 });
  } finally {
    await sql`UPDATE audit_entries SET canonical = ${row.canonical} WHERE seq = 3`;
  }
  expect((await t.api.get('/v1/audit/verify')).body.ok).toBe(true);
});
