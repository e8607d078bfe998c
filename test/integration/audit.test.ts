import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../core/config';
import { createLogger } from '../../cli/serve';
import { verifyBundle, verifyReceipt } from '../../core/audit/audit-offline';
import { startAnchoring, takeAnchor } from '../../services/audit/audit-anchors';
import { connectDatabase, type Sql } from '../../store/db';
import { createTestDatabase } from '../support/database';
import { apiClient } from '../support/http';
import { startServerInProcess, startTestServer, testSettings, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
let db: Sql;
beforeAll(async () => {
  // No anchor rounds of its own during the file: the tests take anchors when they mean to.
  t = await startTestServer({ CAIRN_AUDIT_ANCHOR_INTERVAL: '1h' });
  db = connectDatabase(t.databaseUrl, { max: 2 });
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
});

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

async function tokenFor(role: 'admin' | 'operator' | 'viewer') {
  const username = unique(role);
  const user = await t.api.post('/v1/users', { username, role });
  if (user.status !== 201) throw new Error(`creating ${username}: ${user.status} ${user.text}`);
  const minted = await t.api.post('/v1/tokens', { name: 'test', username });
  if (minted.status !== 201) throw new Error(`minting for ${username}: ${minted.status} ${minted.text}`);
  return minted.body.token as string;
}

const payloadOf = (jws: string) => JSON.parse(Buffer.from(jws.split('.')[1], 'base64url').toString('utf8'));
const chainSize = async () => (await db<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_entries`)[0].n;
const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);

async function seal() {
  const res = await t.as(null).get('/.well-known/seal.json');
  expect(res.status).toBe(200);
  return res.body;
}

describe('the trail', () => {
  test('mutations appear in GET /v1/audit, newest first, for admins only, with a bounded limit', async () => {
    for (let i = 0; i < 6; i++) await t.api.post('/v1/users', { username: unique('filler'), role: 'viewer' });
    const username = unique('listed');
    const created = await t.api.post('/v1/users', { username, role: 'viewer' });
    const page = await t.api.get('/v1/audit?limit=5');
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ count: 5, total: await chainSize(), has_more: true, next_offset: 5 });
    const newest = page.body.entries[0];
    expect(newest).toMatchObject({ seq: page.body.total, method: 'POST', path: '/v1/users', outcome: 201, actor: 'admin' });
    expect(newest.body).toEqual({ kind: 'user.created', account_id: created.body.id, role: 'viewer' });
    expect(newest.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(page.body.entries.map((e: any) => e.seq)).toEqual([...Array(5)].map((_, i) => page.body.total - i));

    const asc = await t.api.get('/v1/audit?order=asc&limit=2&offset=0');
    expect(asc.body.entries.map((e: any) => e.seq)).toEqual([1, 2]);
    expect(asc.body.entries[0].body.kind).toBe('install.bootstrapped');
    const all = await t.api.get('/v1/audit');
    expect(all.body.count).toBe(Math.min(100, all.body.total));

    for (const bad of ['limit=1001', 'limit=0', 'limit=abc', 'offset=-1', 'order=up', 'nope=1']) {
      const res = await t.api.get(`/v1/audit?${bad}`);
      expect(res.status).toBe(400);
    }
    expect((await t.api.get('/v1/audit?limit=1000')).status).toBe(200);
    expect((await t.as(await tokenFor('operator')).get('/v1/audit')).status).toBe(403);
    expect((await t.as(await tokenFor('viewer')).get('/v1/audit')).status).toBe(403);
    expect((await t.as(null).get('/v1/audit')).status).toBe(401);
  });

  test('verify is ok on an untouched chain and a viewer may ask', async () => {
    const viewer = await tokenFor('viewer');
    const res = await t.as(viewer).get('/v1/audit/verify');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, count: await chainSize(), head_hash: expect.stringMatching(/^[0-9a-f]{64}$/), merkle_root: expect.stringMatching(/^[0-9a-f]{64}$/), anchors: 0, unexplained_runs: [] });
    const [head] = await db`SELECT hash FROM audit_entries ORDER BY seq DESC LIMIT 1`;
    expect(res.body.head_hash).toBe(head.hash);
    expect((await t.as(null).get('/v1/audit/verify')).status).toBe(401);
  });
});

describe('seal, bundles and anchors', () => {
  test('the seal is public, and its key verifies a full bundle and a window', async () => {
    const pinned = await seal();
    expect(pinned).toMatchObject({ service: 'cairn', install_id: t.server.context.identity.installId, key_id: t.server.context.identity.keyId });
    expect(pinned.keys[0]).toMatchObject({ kty: 'OKP', crv: 'Ed25519', kid: pinned.key_id });
    expect(pinned.keys[0].d).toBeUndefined();

    const res = await t.api.get('/v1/audit/bundle');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('service-key-id')).toBe(pinned.key_id);
    const doc = JSON.parse(res.text);
    expect(doc).toMatchObject({ type: 'cairn.audit.bundle', version: 2 });
    const signed = payloadOf(doc.signed);
    const size = await chainSize();
    expect(signed).toMatchObject({ type: 'cairn.audit.bundle', version: 2, install_id: pinned.install_id, key_id: pinned.key_id, size, window: { after: 0, prev_hash: '0'.repeat(64) } });
    expect(signed.entries).toBeUndefined();
    expect(doc.entries).toHaveLength(size);
    // Each entry is the text its hash covers; its hash is the signed one at its place.
    expect(doc.entries.every((e: any) => e.hash === undefined && e.run_id === undefined)).toBe(true);
    expect(signed.entry_hashes).toHaveLength(size);
    const report = await verifyBundle(res.text, pinned);
    expect(report.problems).toEqual([]);
    expect(report.ok).toBe(true);

    // Version 1, asked for: one compact JWS over everything, the entries included.
    const v1 = await t.api.get('/v1/audit/bundle?version=1');
    expect(v1.headers.get('content-type')).toMatch(/^application\/jose/);
    const bundle = payloadOf(v1.text);
    expect(bundle).toMatchObject({ type: 'cairn.audit.bundle', install_id: pinned.install_id, size });
    expect(bundle.version).toBeUndefined();
    expect(bundle.entries.map(({ hash: _hash, ...rest }: any) => rest)).toEqual(doc.entries);
    expect(bundle.entries.map((e: any) => e.hash)).toEqual(signed.entry_hashes);
    expect((await verifyBundle(v1.text, pinned)).problems).toEqual([]);
    expect((await t.api.get('/v1/audit/bundle?version=3')).body).toMatchObject({ field: 'version' });

    const windowed = await t.api.get('/v1/audit/bundle?after=2&limit=3');
    expect(windowed.status).toBe(200);
    const w = JSON.parse(windowed.text);
    expect(w.entries.map((e: any) => e.seq)).toEqual([3, 4, 5]);
    expect(payloadOf(w.signed).window).toEqual({ after: 2, prev_hash: bundle.entries[1].hash });
    expect((await verifyBundle(windowed.text, pinned)).ok).toBe(true);
    const tail = await t.api.get(`/v1/audit/bundle?after=${size}`);
    expect(tail.status).toBe(200);
    expect(JSON.parse(tail.text).entries).toEqual([]);
    expect((await verifyBundle(tail.text, pinned)).ok).toBe(true);
  });

  test('a bundle refuses a limit that is not a count, a window past the end, and non-admins', async () => {
    for (const bad of ['limit=abc', 'limit=0', 'limit=-2', 'limit=1.5']) {
      const res = await t.api.get(`/v1/audit/bundle?${bad}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(/^limit/);
      expect(res.body.field).toBe('limit');
    }
    expect((await t.api.get('/v1/audit/bundle?after=x')).status).toBe(400);
    const past = await t.api.get(`/v1/audit/bundle?after=${(await chainSize()) + 10}`);
    expect(past.status).toBe(400);
    expect(past.body.field).toBe('after');
    expect((await t.as(await tokenFor('operator')).get('/v1/audit/bundle')).status).toBe(403);
  });

  test('takeAnchor signs an intact chain once per growth, and bundles carry the anchors', async () => {
    const ctx = t.server.context;
    const first = await takeAnchor(ctx);
    expect(first).toMatchObject({ anchored: true, size: await chainSize() });
    expect(await takeAnchor(ctx)).toEqual({ anchored: false, why: 'unchanged' });
    await t.api.post('/v1/users', { username: unique('grow'), role: 'viewer' });
    const second = await takeAnchor(ctx);
    expect(second).toMatchObject({ anchored: true, size: await chainSize() });

    const rows = await db`SELECT size, key_id FROM audit_anchors ORDER BY size`;
    expect(rows.map((r) => r.key_id)).toEqual([ctx.identity.keyId, ctx.identity.keyId]);
    const verify = await t.api.get('/v1/audit/verify');
    expect(verify.body).toMatchObject({ ok: true, anchors: 2 });
    const res = await t.api.get('/v1/audit/bundle');
    const bundle = payloadOf(JSON.parse(res.text).signed);
    expect(bundle.anchors).toHaveLength(2);
    expect(payloadOf(bundle.anchors[0])).toMatchObject({ type: 'cairn.audit.anchor', install_id: ctx.identity.installId, size: rows[0].size });
    const report = await verifyBundle(res.text, await seal());
    expect(report.problems).toEqual([]);
    expect(report.checked.join('\n')).toMatch(/anchors: 2 of 2 verify with the pinned key; 2 satisfied/);
  });
});

describe('receipts', () => {
  let runId: string;
  let templateId: string;
  beforeAll(async () => {
    // A template's run, so that a viewer granted the template reads it (docs/api.md, Access).
    const template = await t.api.post('/v1/templates', { name: 'receipt', tool: 'bash', command: 'echo hi' });
    expect(template.status).toBe(201);
    templateId = template.body.id;
    const { status, body } = await t.api.post(`/v1/templates/${templateId}/launch`, {});
    expect(status).toBe(201);
    runId = body.id;
    await waitForRunEnd(t.api, runId);
  });

  test('an admin gets the full receipt by default: entries proven, run outcome and decisions', async () => {
    const res = await t.api.get(`/v1/runs/${runId}/receipt`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/jose/);
    expect(res.headers.get('service-key-id')).toBe(t.server.context.identity.keyId);
    const receipt = payloadOf(res.text);
    expect(receipt).toMatchObject({ type: 'cairn.run.receipt', form: 'full', run_id: runId, size: await chainSize(), decisions: [] });
    expect(receipt.run).toMatchObject({ id: runId, tool: 'bash', status: 'succeeded', exit_code: 0, requested_by: 'admin' });
    const kinds = receipt.entries.map((e: any) => e.entry.body.kind);
    expect(kinds).toContain('run.submitted');
    expect(kinds).toContain('run.ended');
    for (const item of receipt.entries) expect(item.index).toBe(item.entry.seq - 1);
    const report = await verifyReceipt(res.text, await seal());
    expect(report.problems).toEqual([]);
    expect(report.ok).toBe(true);
  });

  test('sparse=1, and any non-admin, get the sparse form: no outcome, no decisions', async () => {
    const pinned = await seal();
    const viewer = await tokenFor('viewer');
    const viewerId = (await t.as(viewer).get('/v1/auth/me')).body.id;
    expect((await t.api.post('/v1/grants', { object: templateId, permission: 'read', user_id: viewerId })).status).toBe(201);
    for (const [client, path] of [
      [t.api, `/v1/runs/${runId}/receipt?sparse=1`],
      [t.as(viewer), `/v1/runs/${runId}/receipt`],
      [t.as(viewer), `/v1/runs/${runId}/receipt?sparse=0`],
    ] as const) {
      const res = await client.get(path);
      expect(res.status).toBe(200);
      const receipt = payloadOf(res.text);
      expect(receipt.form).toBe('sparse');
      expect(receipt.run).toBeUndefined();
      expect(receipt.decisions).toBeUndefined();
      const kinds = receipt.entries.map((e: any) => e.entry.body.kind);
      expect(kinds).toContain('run.submitted');
      for (const hidden of ['run.ended', 'run.decision', 'run.correction', 'run.redaction']) expect(kinds).not.toContain(hidden);
      expect((await verifyReceipt(res.text, pinned)).ok).toBe(true);
    }
  });

  test('from=<size> adds a consistency proof that the chain only appended since', async () => {
    const before = await chainSize();
    await t.api.post('/v1/users', { username: unique('later'), role: 'viewer' });
    const res = await t.api.get(`/v1/runs/${runId}/receipt?from=${before}`);
    expect(res.status).toBe(200);
    const receipt = payloadOf(res.text);
    expect(receipt.consistency).toMatchObject({ from_size: before, from_root: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(receipt.size).toBe(before + 1);
    const report = await verifyReceipt(res.text, await seal());
    expect(report.problems).toEqual([]);
    expect(report.checked.join('\n')).toMatch(new RegExp(`consistency: the tree of size ${before}`));
    for (const bad of ['from=0', `from=${before + 100}`, 'from=x', 'sparse=maybe']) {
      expect((await t.api.get(`/v1/runs/${runId}/receipt?${bad}`)).status).toBe(400);
    }
    expect((await t.api.get('/v1/runs/run_nope/receipt')).status).toBe(404);
  });

  test("a decided run's full receipt discloses the reason and its random value, which open the commitment", async () => {
    const marker = unique('needs-approval');
    const policy = await t.api.post('/v1/policies', { effect: 'require_approval', tool: 'bash', command_contains: marker });
    expect(policy.status).toBe(201);
    const submitted = await t.api.post('/v1/runs', { tool: 'bash', command: `echo ${marker}` });
    expect(submitted.body.status).toBe('held');
    const approved = await t.api.post(`/v1/runs/${submitted.body.id}/approve`, { reason: 'inside the change window' });
    expect(approved.status).toBe(200);
    await waitForRunEnd(t.api, submitted.body.id);

    const pinned = await seal();
    const full = await t.api.get(`/v1/runs/${submitted.body.id}/receipt`);
    const receipt = payloadOf(full.text);
    expect(receipt.decisions).toEqual([expect.objectContaining({ kind: 'approve', reason: 'inside the change window', random: expect.stringMatching(/^[0-9a-f]{64}$/) })]);
    const decisionEntry = receipt.entries.find((e: any) => e.entry.body.kind === 'run.decision');
    expect(decisionEntry.entry.id).toBe(receipt.decisions[0].id);
    const report = await verifyReceipt(full.text, pinned);
    expect(report.problems).toEqual([]);
    expect(report.checked.join('\n')).toMatch(/decisions: 1 reason opens? their commitments/);

    const sparse = payloadOf((await t.api.get(`/v1/runs/${submitted.body.id}/receipt?sparse=1`)).text);
    expect(sparse.entries.map((e: any) => e.entry.body.kind)).not.toContain('run.decision');
    expect(JSON.stringify(sparse)).not.toContain('inside the change window');
  });

  test('a receipt edited by one byte, in the payload or in the signature, fails', async () => {
    const pinned = await seal();
    const jws = (await t.api.get(`/v1/runs/${runId}/receipt`)).text;
    const [header, payload, signature] = jws.split('.');
    const editedPayload = await verifyReceipt([header, flip(payload, Math.floor(payload.length / 2)), signature].join('.'), pinned);
    expect(editedPayload.ok).toBe(false);
    expect(editedPayload.problems.map((p) => p.where)).toContain('signature');
    const editedSignature = await verifyReceipt([header, payload, flip(signature, 5)].join('.'), pinned);
    expect(editedSignature.ok).toBe(false);
    expect(editedSignature.problems.map((p) => p.where)).toEqual(['signature']);
  });
});

/** Rewrites who an entry says acted, in the text its hash covers (the entry itself), as an intruder with the database would. */
const forgeActor = (seq: number) =>
  db`UPDATE audit_entries SET canonical = regexp_replace(canonical, '"actor":"[^"]*"', '"actor":"mallory"') WHERE seq = ${seq}`;

describe('tampering', () => {
  test('one row changed in PostgreSQL: verify names it, bundles (windowed too) and receipts answer 409', async () => {
    const [row] = await db`SELECT canonical FROM audit_entries WHERE seq = 3`;
    await forgeActor(3);
    try {
      const size = await chainSize();
      const verify = await t.api.get('/v1/audit/verify');
      expect(verify.status).toBe(200);
      expect(verify.body).toMatchObject({ ok: false, reason: 'chain_break', broke_at: 3, broke_seq: 3, count: size });
      expect(verify.body.detail).toMatch(/stored text hashes to/);

      const bundle = await t.api.get('/v1/audit/bundle');
      expect(bundle.status).toBe(409);
      expect(bundle.body).toMatchObject({ reason: 'chain_break', broke_at: 3, broke_seq: 3, count: size, anchor_problems: [] });
      expect(bundle.body.error).toMatch(/breaks at position 3/);
      // The window is past the break; the whole chain is still checked first.
      const windowed = await t.api.get(`/v1/audit/bundle?after=${size - 2}&limit=2`);
      expect(windowed.status).toBe(409);
      expect(windowed.body).toMatchObject({ reason: 'chain_break', broke_at: 3, broke_seq: 3 });

      const [{ id: runId }] = await db`SELECT id FROM runs LIMIT 1`;
      const receipt = await t.api.get(`/v1/runs/${runId}/receipt`);
      expect(receipt.status).toBe(409);
      expect(receipt.body.reason).toBe('chain_break');

      expect(await takeAnchor(t.server.context)).toMatchObject({ anchored: false, why: 'chain_does_not_verify' });
    } finally {
      await db`UPDATE audit_entries SET canonical = ${row.canonical} WHERE seq = 3`;
    }
    expect((await t.api.get('/v1/audit/verify')).body.ok).toBe(true);
  });

  test('a column edited beside the entry\'s text is neither shown nor counted: the text is the entry', async () => {
    await t.api.post('/v1/users', { username: unique('column'), role: 'viewer' });
    const seq = await chainSize();
    const [row] = await db`SELECT actor, body FROM audit_entries WHERE seq = ${seq}`;
    await db`UPDATE audit_entries SET actor = 'mallory', body = jsonb_set(body, '{kind}', '"forged"') WHERE seq = ${seq}`;
    try {
      expect((await t.api.get('/v1/audit/verify')).body.ok).toBe(true);
      const [newest] = (await t.api.get('/v1/audit?limit=1')).body.entries;
      expect(newest).toMatchObject({ seq, actor: row.actor, body: row.body });
      expect(newest).not.toHaveProperty('canonical');
    } finally {
      await db`UPDATE audit_entries SET actor = ${row.actor}, body = ${db.json(row.body)} WHERE seq = ${seq}`;
    }
  });

  test('a resumed round checks only what followed the last anchor and reaches the whole chain\'s root', async () => {
    const ctx = t.server.context;
    await t.api.post('/v1/users', { username: unique('resume'), role: 'viewer' });
    const full = await takeAnchor(ctx);
    expect(full.anchored).toBe(true);
    for (let i = 0; i < 3; i++) await t.api.post('/v1/users', { username: unique('resume'), role: 'viewer' });
    const resumed = await takeAnchor(ctx, { resume: true });
    expect(resumed).toMatchObject({ anchored: true, size: await chainSize() });
    const verify = (await t.api.get('/v1/audit/verify')).body;
    expect(verify.ok).toBe(true);
    expect((resumed as { merkle_root: string }).merkle_root).toBe(verify.merkle_root);

    // Tampering before the last anchor is not what a resumed round reads; the whole scan sees it.
    await t.api.post('/v1/users', { username: unique('resume'), role: 'viewer' });
    const [row] = await db`SELECT canonical FROM audit_entries WHERE seq = 2`;
    await forgeActor(2);
    try {
      expect(await takeAnchor(ctx)).toMatchObject({ anchored: false, why: 'chain_does_not_verify', report: { broke_at: 2 } });
      expect((await takeAnchor(ctx, { resume: true })).anchored).toBe(true);
    } finally {
      await db`UPDATE audit_entries SET canonical = ${row.canonical} WHERE seq = 2`;
    }
    // Tampering after it is.
    await t.api.post('/v1/users', { username: unique('resume'), role: 'viewer' });
    const last = await chainSize();
    const [tail] = await db`SELECT canonical FROM audit_entries WHERE seq = ${last}`;
    await forgeActor(last);
    try {
      expect(await takeAnchor(ctx, { resume: true })).toMatchObject({ anchored: false, why: 'chain_does_not_verify', report: { broke_at: last } });
    } finally {
      await db`UPDATE audit_entries SET canonical = ${tail.canonical} WHERE seq = ${last}`;
    }
  });

  test('the anchorer checks the whole chain once a period for the install, whichever server or round comes next', async () => {
    const ctx = t.server.context;
    const hourly = { resume: true, wholeCheckEvery: 3600 };
    await db`UPDATE audit_anchors SET whole_check = false`;
    await t.api.post('/v1/users', { username: unique('period'), role: 'viewer' });
    // No anchor was taken after a whole check: the round checks the whole chain.
    expect(await takeAnchor(ctx, hourly)).toMatchObject({ anchored: true, whole_check: true });
    await t.api.post('/v1/users', { username: unique('period'), role: 'viewer' });
    // One was, within the period: the next round (of this server or another) resumes.
    expect(await takeAnchor(ctx, hourly)).toMatchObject({ anchored: true, whole_check: false });

    const [row] = await db`SELECT canonical FROM audit_entries WHERE seq = 2`;
    await forgeActor(2);
    try {
      await t.api.post('/v1/users', { username: unique('period'), role: 'viewer' });
      expect(await takeAnchor(ctx, hourly)).toMatchObject({ anchored: true, whole_check: false });
      // The period has passed since that whole check: the next round reads everything, sees the
      // break, and every round after it does too until the chain verifies again.
      await db`UPDATE audit_anchors SET at = at - interval '2 hours' WHERE whole_check`;
      await t.api.post('/v1/users', { username: unique('period'), role: 'viewer' });
      expect(await takeAnchor(ctx, hourly)).toMatchObject({ anchored: false, why: 'chain_does_not_verify', report: { broke_at: 2 } });
      expect(await takeAnchor(ctx, hourly)).toMatchObject({ anchored: false, why: 'chain_does_not_verify', report: { broke_at: 2 } });
    } finally {
      await db`UPDATE audit_entries SET canonical = ${row.canonical} WHERE seq = 2`;
    }
    expect(await takeAnchor(ctx, hourly)).toMatchObject({ anchored: true, whole_check: true });
    const [{ wholes }] = await db`SELECT count(*)::int AS wholes FROM audit_anchors WHERE whole_check AND at > now() - interval '1 hour'`;
    expect(wholes).toBe(1);

    // A server's graceful stop anchors what it wrote, resuming as its rounds do.
    const anchorer = startAnchoring(ctx);
    await t.api.post('/v1/users', { username: unique('period'), role: 'viewer' });
    await anchorer.stop();
    const [newest] = await db`SELECT size, whole_check FROM audit_anchors ORDER BY size DESC LIMIT 1`;
    expect(newest).toEqual({ size: await chainSize(), whole_check: false });
  });

  test('an anchor row edited in PostgreSQL no longer holds what its signature covers', async () => {
    const [anchor] = await db`SELECT size, head_hash FROM audit_anchors ORDER BY size LIMIT 1`;
    await db`UPDATE audit_anchors SET head_hash = ${'a'.repeat(64)} WHERE size = ${anchor.size}`;
    try {
      const verify = await t.api.get('/v1/audit/verify');
      expect(verify.body).toMatchObject({ ok: false, reason: 'anchor_unsatisfied', broke_at: 0, broke_seq: 0 });
      expect(verify.body.anchor_problems).toEqual([expect.objectContaining({ size: anchor.size, problem: 'row_mismatch' })]);
      await db`UPDATE audit_anchors SET signed = 'x.y.z' WHERE size = ${anchor.size}`;
      const unsigned = await t.api.get('/v1/audit/verify');
      expect(unsigned.body.anchor_problems).toEqual([expect.objectContaining({ size: anchor.size, problem: 'bad_signature' })]);
      expect((await t.api.get('/v1/audit/bundle')).status).toBe(409);
    } finally {
      await db`UPDATE audit_anchors SET head_hash = ${anchor.head_hash} WHERE size = ${anchor.size}`;
    }
  });

  test('a tail cut after an anchor shows as anchor_unsatisfied in verify and the bundle', async () => {
    // The previous test left the first anchor's signature broken; start from a clean anchor list.
    await db`DELETE FROM audit_anchors`;
    await t.api.post('/v1/users', { username: unique('tail'), role: 'viewer' });
    const anchored = await takeAnchor(t.server.context);
    expect(anchored.anchored).toBe(true);
    const size = (anchored as { size: number }).size;
    await db`DELETE FROM audit_entries WHERE seq > ${size - 2}`;

    const verify = await t.api.get('/v1/audit/verify');
    expect(verify.status).toBe(200);
    expect(verify.body).toMatchObject({ ok: false, reason: 'anchor_unsatisfied', broke_at: 0, broke_seq: 0, count: size - 2 });
    expect(verify.body.anchor_problems).toEqual(
      expect.arrayContaining([{ size, problem: 'missing_entries', expected: size, actual: size - 2 }, expect.objectContaining({ problem: 'chain_head_mismatch' })]),
    );
    const bundle = await t.api.get('/v1/audit/bundle?after=1&limit=1');
    expect(bundle.status).toBe(409);
    expect(bundle.body).toMatchObject({ reason: 'anchor_unsatisfied', broke_at: 0, broke_seq: 0, count: size - 2 });
    expect(bundle.body.anchor_problems).toEqual(expect.arrayContaining([expect.objectContaining({ size, problem: 'missing_entries' })]));
    expect(await takeAnchor(t.server.context)).toMatchObject({ anchored: false });
  });
});

test('a server anchors on its interval and once more when it stops gracefully', async () => {
  const database = await createTestDatabase();
  const config = loadConfig({}, testSettings(database.url, { CAIRN_AUDIT_ANCHOR_INTERVAL: '1s' }));
  const server = await startServerInProcess(config, createLogger(config));
  const own = connectDatabase(database.url, { max: 1 });
  let stopped = false;
  try {
    const api = apiClient(server.url, server.adminToken!);
    await api.post('/v1/users', { username: unique('interval'), role: 'viewer' });
    const size = await (async () => (await own<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_entries`)[0].n)();
    const deadline = Date.now() + 15_000;
    for (;;) {
      const [{ last }] = await own<{ last: number | null }[]>`SELECT max(size)::int AS last FROM audit_anchors`;
      if (last !== null && last >= size) break;
      if (Date.now() > deadline) throw new Error(`no anchor of size ${size} within 15 s (last ${last})`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await api.post('/v1/users', { username: unique('at-stop'), role: 'viewer' });
    stopped = true;
    await server.stop();
    const [{ n }] = await own<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_entries`;
    const [{ last }] = await own<{ last: number }[]>`SELECT max(size)::int AS last FROM audit_anchors`;
    expect(last).toBe(n);
  } finally {
    if (!stopped) await server.stop();
    await own.end();
    await database.drop();
  }
});
