import { createHash, createPublicKey, randomBytes, verify as ed25519Verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { verifyAuditDocument } from '../../core/audit/audit-offline';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * A third party's verifier, written from docs/api.md alone ("Request fingerprints", "The state
 * digest", "Verifying offline"), against a real server: nothing below imports Cairn's canonical
 * JSON, hashing, fingerprint, digest, signature or Merkle code. It recomputes the fingerprints
 * and entry hashes the chain records, the state digest of every kind of run from its read, and
 * verifies a real audit bundle; it agrees with `cairn audit verify` (core/audit-offline.ts, the
 * one Cairn function used, only as the reference verdict) on the bundle and on forgeries of it.
 */

const DOCS = readFileSync(path.join(__dirname, '../../docs/api.md'), 'utf8');

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
    // Anchors every second, so the bundle below carries some.
    CAIRN_AUDIT_ANCHOR_INTERVAL: '1s',
  });
});
afterAll(async () => {
  await t?.stop();
});

// --- the verifier, from the docs

/** RFC 8785 over values JSON.parse gives: ES number and string forms, keys sorted by UTF-16 code units. */
function jcs(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'number' || typeof value === 'string') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(jcs).join(',')}]`;
  const object = value as Record<string, unknown>;
  const keys = Object.keys(object).filter((k) => object[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${jcs(object[k])}`).join(',')}}`;
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest();
const sha256Hex = (text: string) => sha256(Buffer.from(text, 'utf8')).toString('hex');

/** "Request fingerprints": the names withheld wherever they are, whole name, any case. */
const SECRET_NAME = /^(password|current_password|new_password|reason|masked_reason|text|token|secret|.*_secret|.*_token)$/i;

function withheld(value: unknown, at: string | undefined, paths: ReadonlySet<string>): unknown {
  if (at !== undefined && paths.has(at)) return '[withheld]';
  if (Array.isArray(value)) return value.map((v, i) => withheld(v, at === undefined ? undefined : `${at}[${i}]`, paths));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, SECRET_NAME.test(k) ? '[withheld]' : withheld(v, at === undefined ? undefined : at === '' ? k : `${at}.${k}`, paths)]),
  );
}

/** "Request fingerprints", Q: the query string as parameters, a name given twice as the list of its values. */
function queryOf(raw: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of new URLSearchParams(raw)) {
    const held = out[name];
    out[name] = held === undefined ? value : Array.isArray(held) ? [...held, value] : [held, value];
  }
  return out;
}

function fingerprint(method: string, target: string, body: unknown, routePaths: string[] = []): string {
  const [pathPart, query = ''] = target.split(/\?(.*)/s);
  const request = { method, path: pathPart, query: withheld(queryOf(query), undefined, new Set()), body: withheld(body, '', new Set(routePaths)) };
  return `sha256:${sha256Hex(jcs(request))}`;
}

/** The entry hash ("Audit trail, bundles and receipts"). */
function entryHash(e: any): string {
  const { seq, id, at, actor, method, path: p, fingerprint: f, outcome, body, prev_hash } = e;
  return sha256Hex(jcs({ seq, id, at, actor, method, path: p, fingerprint: f, outcome, body, prev_hash }));
}

/** "The state digest", from a whole run's read. */
function stateDigest(run: any): string {
  const spec: Record<string, unknown> = { command: run.command, extra_vars: run.extra_vars };
  if (run.dry_run) spec.dry_run = true;
  if (run.shard) spec.shard = run.shard;
  if (run.limit) spec.limit = run.limit;
  if (run.project) spec.project = run.project;
  for (const field of ['playbook', 'inventory_id', 'inventory']) if (run[field] != null) spec[field] = run[field];
  for (const field of ['tags', 'skip_tags']) if (run[field]?.length) spec[field] = run[field];
  for (const field of ['forks', 'verbosity']) if (run[field] > 0) spec[field] = run[field];
  if (run.diff_mode) spec.diff_mode = true;
  if (run.fact_cache) spec.fact_cache = run.fact_cache;
  if (run.change != null) spec.change = run.change;
  if (run.graph) spec.steps = run.graph;
  return `sha256:${sha256Hex(jcs({ tool: run.tool, spec, queue: run.queue, timeout_seconds: run.timeout }))}`;
}

// "Verifying offline"

const B64URL = /^[A-Za-z0-9_-]+$/;
/** A segment's bytes when it is canonical base64url, else undefined. */
function segment(text: string): Buffer | undefined {
  if (!B64URL.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
function jsonObject(bytes: Buffer): Record<string, any> | undefined {
  try {
    const value = JSON.parse(strictUtf8.decode(bytes));
    return value && typeof value === 'object' && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function keyIdOf(jwk: any): string | undefined {
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || jwk.d !== undefined || typeof jwk.x !== 'string' || segment(jwk.x)?.length !== 32) return undefined;
  return sha256(Buffer.from(`{"crv":"Ed25519","kty":"OKP","x":"${jwk.x}"}`, 'utf8')).toString('base64url');
}

/** Step 2: the payload, when every check of the compact JWS holds; else why not. An anchor (`document` false) skips the last bullet. */
function openJws(text: string, seal: any, document = true): { payload: Record<string, any> } | { refused: string } {
  const parts = text.trim().split('.');
  if (parts.length !== 3) return { refused: 'not three segments' };
  const [h, p, s] = parts.map(segment);
  if (!h || !p || !s) return { refused: 'a segment is not canonical base64url' };
  const header = jsonObject(h);
  if (!header || Object.keys(header).sort().join() !== 'alg,kid,typ' || header.alg !== 'EdDSA' || header.typ !== 'cairn-document+jws' || typeof header.kid !== 'string' || !header.kid) {
    return { refused: 'the header' };
  }
  const keys: any[] = Array.isArray(seal.keys) ? seal.keys : [seal];
  const key = keys.find((k) => keyIdOf(k) === header.kid);
  if (!key) return { refused: 'no pinned key' };
  const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.x }, format: 'jwk' });
  if (!ed25519Verify(null, Buffer.from(`${parts[0]}.${parts[1]}`, 'ascii'), publicKey, s)) return { refused: 'the signature' };
  const payload = jsonObject(p);
  if (!payload || !Buffer.from(jcs(payload), 'utf8').equals(p)) return { refused: 'the payload is not canonical' };
  if (!document) return { payload };
  if (payload.key_id !== header.kid) return { refused: 'key_id' };
  if (typeof seal.install_id === 'string' && payload.install_id !== seal.install_id) return { refused: 'install_id' };
  return { payload };
}

const HEX64 = /^[0-9a-f]{64}$/;
const leaf = (hash: string) => sha256(Buffer.concat([Buffer.from([0]), Buffer.from(hash, 'hex')]));
const node = (left: Buffer, right: Buffer) => sha256(Buffer.concat([Buffer.from([1]), left, right]));

/** RFC 9162 MTH over leaf hashes. */
function treeRoot(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) return sha256(Buffer.alloc(0));
  if (leaves.length === 1) return leaves[0];
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return node(treeRoot(leaves.slice(0, k)), treeRoot(leaves.slice(k)));
}

/** RFC 9162 2.1.3.2. */
function inclusionHolds(leafHash: Buffer, index: number, size: number, proof: Buffer[], root: Buffer): boolean {
  if (index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leafHash;
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = node(p, r);
      if (fn % 2 === 0) while (fn % 2 === 0 && fn !== 0) [fn, sn] = [fn >>> 1, sn >>> 1];
    } else {
      r = node(r, p);
    }
    [fn, sn] = [fn >>> 1, sn >>> 1];
  }
  return sn === 0 && r.equals(root);
}

/** Steps 1 to 3 for a bundle: true when every check holds. */
function bundleHolds(text: string, seal: any): boolean | string {
  let b: any;
  let entries: any[];
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    // Version 2: the signed part, and the entries beside it given the signed hashes.
    let doc: any;
    try {
      doc = JSON.parse(trimmed);
    } catch {
      return 'the document';
    }
    if (doc?.type !== 'cairn.audit.bundle' || doc.version !== 2 || typeof doc.signed !== 'string' || !Array.isArray(doc.entries)) return 'the document';
    const opened = openJws(doc.signed, seal);
    if ('refused' in opened) return opened.refused;
    b = opened.payload;
    if (b.version !== 2 || !Array.isArray(b.entry_hashes) || b.entry_hashes.length !== doc.entries.length) return 'the entry hashes';
    if (doc.entries.some((e: any) => typeof e !== 'object' || e === null || Array.isArray(e) || 'hash' in e)) return 'the entries';
    entries = doc.entries.map((e: any, i: number) => ({ ...e, hash: b.entry_hashes[i] }));
  } else {
    const opened = openJws(text, seal);
    if ('refused' in opened) return opened.refused;
    b = opened.payload;
    if (b.version !== undefined) return 'the version';
    entries = b.entries;
  }
  if (b.type !== 'cairn.audit.bundle' || !Number.isSafeInteger(b.size) || b.size < 1 || !HEX64.test(b.head_hash) || !HEX64.test(b.merkle_root)) return 'the tree head';
  const { after, prev_hash } = b.window ?? {};
  if (!Number.isSafeInteger(after) || after < 0 || !HEX64.test(prev_hash) || (after === 0 && prev_hash !== '0'.repeat(64))) return 'the window';
  if (!Array.isArray(entries)) return 'the entries';
  if (after + entries.length > b.size) return 'beyond the size';
  let previous = prev_hash;
  for (const [i, e] of entries.entries()) {
    if (e.seq !== after + i + 1 || e.prev_hash !== previous || entryHash(e) !== e.hash) return `entry ${after + i + 1}`;
    previous = e.hash;
  }
  if (after + entries.length === b.size && (entries.length ? entries[entries.length - 1].hash : prev_hash) !== b.head_hash) return 'the head';
  if (entries.length === 0 ? b.last_inclusion.length !== 0 : !inclusionHolds(leaf(previous), after + entries.length - 1, b.size, b.last_inclusion.map((h: string) => Buffer.from(h, 'hex')), Buffer.from(b.merkle_root, 'hex'))) {
    return 'last_inclusion';
  }
  const whole = after === 0 && entries.length === b.size;
  const leaves = entries.map((e) => leaf(e.hash));
  if (whole && treeRoot(leaves).toString('hex') !== b.merkle_root) return 'the root';
  for (const anchorText of b.anchors) {
    const anchor = openJws(anchorText, seal, false);
    if ('refused' in anchor) return `an anchor: ${anchor.refused}`;
    const a = anchor.payload;
    if (a.type !== 'cairn.audit.anchor' || a.install_id !== b.install_id || !(a.size >= 1) || a.size > b.size) return 'an anchor';
    if (whole && (entries[a.size - 1].hash !== a.head_hash || treeRoot(leaves.slice(0, a.size)).toString('hex') !== a.merkle_root)) return `the anchor at ${a.size}`;
  }
  return true;
}

// --- the checks

async function auditEntries(): Promise<any[]> {
  const res = await t.api.get('/v1/audit?limit=1000');
  expect(res.status).toBe(200);
  return res.body.entries;
}

async function entryWhere(predicate: (e: any) => boolean): Promise<any> {
  const found = (await auditEntries()).filter(predicate);
  expect(found).toHaveLength(1);
  return found[0];
}

/** The first fenced block after `marker` in docs/api.md. */
function docsBlockAfter(marker: string): string {
  const at = DOCS.indexOf(marker);
  expect(at).toBeGreaterThan(-1);
  return /```\n([^\n]+)\n```/.exec(DOCS.slice(at))![1];
}

describe('request fingerprints, recomputed from docs/api.md', () => {
  test('the worked example: the server records the fingerprint the docs print, and the docs\' rules give it', async () => {
    const target = '/v1/users?source=docs+example&tag=a&tag=b%2Fc&api_token=s3cr3t';
    const body = { username: 'docs-example', role: 'viewer', password: 'correct horse battery staple' };
    const created = await t.api.request('POST', target, { body });
    expect(created.status).toBe(201);
    const entry = await entryWhere((e) => e.body?.kind === 'user.created' && e.body.account_id === created.body.id);
    const canonical = docsBlockAfter('Worked example (`test/integration/audit-recompute.test.ts` sends it');
    const printed = /fingerprint is\n`(sha256:[0-9a-f]{64})`/.exec(DOCS)![1];
    expect(`sha256:${sha256Hex(canonical)}`).toBe(printed);
    expect(fingerprint('POST', target, body, ['password'])).toBe(printed);
    expect(entry.fingerprint).toBe(printed);
    expect(entryHash(entry)).toBe(entry.hash);
  });

  test('a query with repeated, valueless, empty and encoded names, and a body with secrets at depth, recompute', async () => {
    const target = '/v1/runs?trace=a+b%21&trace=2&trace=%E2%9C%93&flag&=anon&weird=%zz&Session_Token=abc&note=x%3Dy%26z';
    const body = {
      tool: 'bash',
      command: 'echo recompute',
      extra_vars: { price: 1.5, big: 1e21, small: 0.000001, text: 'hidden by name', nested: { db_password: 'kept', API_SECRET: 'hidden', list: [{ token: 't' }, 'é\u2028'] } },
    };
    const submitted = await t.api.request('POST', target, { body });
    expect(submitted.status).toBe(201);
    await waitForRunEnd(t.api, submitted.body.id);
    const entry = await entryWhere((e) => e.body?.kind === 'run.submitted' && e.body.run_id === submitted.body.id);
    expect(entry.fingerprint).toBe(fingerprint('POST', target, body));
    expect(entryHash(entry)).toBe(entry.hash);
    // What a secret's value is changes nothing; what is not secret does.
    expect(fingerprint('POST', target, { ...body, extra_vars: { ...body.extra_vars, text: 'other' } })).toBe(entry.fingerprint);
    expect(fingerprint('POST', target.replace('trace=2', 'trace=3'), body)).not.toBe(entry.fingerprint);
  });

  test('paths a route withholds: a target\'s url and a template\'s secret default', async () => {
    const hook = { name: 'recompute hook', kind: 'webhook', url: 'http://127.0.0.1:9/services/T000/B000/XXXX' };
    const target = await t.api.post('/v1/notifications', hook);
    expect(target.status).toBe(201);
    const targetEntry = await entryWhere((e) => e.body?.kind === 'notification.created' && e.body.target_id === target.body.id);
    expect(targetEntry.fingerprint).toBe(fingerprint('POST', '/v1/notifications', hook, ['url', 'key']));
    const template = {
      name: 'recompute survey',
      tool: 'bash',
      command: 'true',
      survey: [
        { var: 'region', type: 'text', default: 'eu' },
        { var: 'pin', type: 'password', default: '4242' },
      ],
    };
    const saved = await t.api.post('/v1/templates', template);
    expect(saved.status).toBe(201);
    const templateEntry = await entryWhere((e) => e.body?.kind === 'template.created' && e.body.template_id === saved.body.id);
    expect(templateEntry.fingerprint).toBe(fingerprint('POST', '/v1/templates', template, ['survey[1].default']));
    expect(entryHash(templateEntry)).toBe(templateEntry.hash);
  });
});

describe('state digests, recomputed from each run\'s read', () => {
  const whole = async (id: string) => (await t.api.get(`/v1/runs/${id}`)).body;

  test('the worked example: the docs\' canonical text, its digest, and the server\'s', async () => {
    const res = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo docs', extra_vars: { greeting: 'hello' }, timeout: 60 });
    expect(res.status).toBe(201);
    const canonical = docsBlockAfter('so the digest covers the canonical JSON');
    const printed = /and is `(sha256:[0-9a-f]{64})`\./.exec(DOCS.slice(DOCS.indexOf('so the digest covers the canonical JSON')))![1];
    expect(`sha256:${sha256Hex(canonical)}`).toBe(printed);
    expect(res.body.state_digest).toBe(printed);
    expect(stateDigest(await whole(res.body.id))).toBe(printed);
  });

  test('a dry run, a labelled run, an ansible run with its controls, a split and its shards, a pipeline and its steps, a workflow and its approval step', async () => {
    const inventory = await t.api.post('/v1/inventories', { name: 'recompute hosts', content: '[web]\nh1 ansible_connection=local\n' });
    const submitted = [
      await t.api.post('/v1/runs', { tool: 'bash', command: 'echo dry', dry_run: true }),
      await t.api.post('/v1/runs', { tool: 'python', command: 'print(1)', change: 'CHG-1', extra_vars: { n: 2 } }),
      await t.api.post('/v1/runs', {
        tool: 'ansible',
        command: '- hosts: all\n  gather_facts: false\n  tasks: []\n',
        inventory_id: inventory.body.id,
        limit: 'h1',
        tags: ['a'],
        forks: 2,
        verbosity: 9,
        diff_mode: true,
      }),
      await t.api.post('/v1/runs', { tool: 'bash', command: 'echo $CAIRN_SHARD_INDEX', shards: 3, extra_vars: { x: 1 } }),
      await t.api.post('/v1/pipelines', { extra_vars: { stage: 'p' }, timeout: 120, steps: [{ tool: 'bash', command: 'true', extra_vars: { own: 1 } }, { name: 'second', tool: 'python', command: 'pass' }] }),
    ];
    const workflow = await t.api.post('/v1/templates', {
      name: 'recompute workflow',
      steps: [
        { name: 'build', tool: 'bash', command: 'true' },
        { name: 'gate', type: 'approval', description: 'go?', depends_on: ['build'], approval_timeout: 600 },
      ],
    });
    submitted.push(await t.api.post(`/v1/templates/${workflow.body.id}/launch`, {}));
    const runs: any[] = [];
    for (const res of submitted) {
      expect(res.status).toBe(201);
      runs.push(await whole(res.body.id));
      for (const child of [...((await t.api.get(`/v1/runs/${res.body.id}/steps`)).body.steps ?? []), ...((await t.api.get(`/v1/runs/${res.body.id}/shards`)).body.shards ?? [])]) {
        runs.push(await whole(child.id));
      }
    }
    expect(runs.map((r) => r.kind).sort()).toEqual(['approval', 'pipeline', 'run', 'run', 'run', 'shard', 'shard', 'shard', 'split', 'step', 'step', 'step', 'workflow']);
    for (const run of runs) expect({ id: run.id, kind: run.kind, digest: stateDigest(run) }).toEqual({ id: run.id, kind: run.kind, digest: run.state_digest });
    for (const run of runs) if (!run.finished_at && run.parent_run_id === null) await t.api.post(`/v1/runs/${run.id}/cancel`, {});
  });
});

describe('an audit bundle verified from docs/api.md', () => {
  let seal: any;
  let bundle: string;

  beforeAll(async () => {
    // An anchor over the chain as it stands (taken every second while it grows).
    const deadline = Date.now() + 20_000;
    for (;;) {
      seal = (await t.api.get('/.well-known/seal.json')).body;
      bundle = (await t.api.get('/v1/audit/bundle?version=1')).text;
      const anchors = JSON.parse(Buffer.from(bundle.split('.')[1], 'base64url').toString('utf8')).anchors;
      if (anchors.length > 0) break;
      if (Date.now() > deadline) throw new Error('no anchor was taken');
      await new Promise((r) => setTimeout(r, 250));
    }
  });

  test('the real bundle holds for both verifiers, in version 2 as in version 1', async () => {
    const v2 = (await t.api.get('/v1/audit/bundle')).text;
    expect(bundleHolds(v2, seal)).toBe(true);
    expect((await verifyAuditDocument(v2, seal)).ok).toBe(true);
    const doc = JSON.parse(v2);
    doc.entries[0].actor = 'mallory';
    expect(bundleHolds(JSON.stringify(doc), seal)).toBe('entry 1');
    expect((await verifyAuditDocument(JSON.stringify(doc), seal)).ok).toBe(false);
    expect(bundleHolds(bundle, seal)).toBe(true);
    expect((await verifyAuditDocument(bundle, seal)).ok).toBe(true);
    // Whitespace around the document is not part of it.
    expect(bundleHolds(`\n${bundle}\n`, seal)).toBe(true);
  });

  test('a signature re-encoded with its unused bits set, or padded, is refused by both, though its bytes verify', async () => {
    const [h, p, s] = bundle.split('.');
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    // 64 bytes in 86 characters: the last character's 4 low bits are unused.
    const last = alphabet.indexOf(s[s.length - 1]);
    const reencoded = `${s.slice(0, -1)}${alphabet[last | 0b0101]}`;
    expect(Buffer.from(reencoded, 'base64url').equals(Buffer.from(s, 'base64url'))).toBe(true);
    for (const forged of [`${h}.${p}.${reencoded}`, `${h}.${p}.${s}==`]) {
      expect(bundleHolds(forged, seal)).toBe('a segment is not canonical base64url');
      const cairn = await verifyAuditDocument(forged, seal);
      expect(cairn.ok).toBe(false);
      expect(cairn.problems.map((problem) => problem.detail).join(' ')).toContain('base64url');
    }
  });

  test('an entry changed under the signature, and a seal of another install, are refused by both', async () => {
    const other = JSON.parse(Buffer.from(bundle.split('.')[1], 'base64url').toString('utf8'));
    other.entries[0].actor = 'mallory';
    const tampered = `${bundle.split('.')[0]}.${Buffer.from(jcs(other), 'utf8').toString('base64url')}.${bundle.split('.')[2]}`;
    expect(bundleHolds(tampered, seal)).toBe('the signature');
    expect((await verifyAuditDocument(tampered, seal)).ok).toBe(false);
    const foreign = { ...seal, install_id: 'ins_someone_else' };
    expect(bundleHolds(bundle, foreign)).toBe('install_id');
    expect((await verifyAuditDocument(bundle, foreign)).ok).toBe(false);
  });
});
