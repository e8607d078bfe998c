import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChainVerifier, GENESIS_HASH, chainEntry, entryForBundle, type AuditEntry } from '../../core/audit/audit-chain';
import { bundleDocumentV2, bundleEntryV2, bundlePayloadV1, bundlePayloadV2, readBundleDocument, type BundleHead, type BundleVersion } from '../../core/audit/audit-bundle';
import { ANCHOR_TYPE, verifyAuditDocument, verifyBundle, type OfflineReport } from '../../core/audit/audit-offline';
import { canonicalJson } from '../../core/audit/canonical';
import { inclusionProof, leafHash, leafOfStoredHash, rootFromLeafHashes } from '../../core/audit/merkle';
import { generateSigningKey, signDocument, type SigningKey } from '../../core/audit/signing';
import { runAuditCommand } from '../../cli/audit';

/**
 * The two bundle formats (core/audit/audit-bundle.ts): version 2 signs the tree head and the
 * entries' hashes with the entries beside the signature; version 1 signs everything. Both verify
 * offline, and version 1 bundles made by the server before version 2 existed
 * (test/fixtures/audit) still do.
 */

const INSTALL = 'ins_unit';
const FIXTURES = join(__dirname, '..', 'fixtures', 'audit');
let key: SigningKey;
let seal: Record<string, unknown>;

beforeAll(async () => {
  key = await generateSigningKey();
  seal = { service: 'cairn', install_id: INSTALL, key_id: key.keyId, keys: [key.publicJwk] };
});

const leavesOf = (entries: AuditEntry[]) => entries.map((e) => leafHash(Buffer.from(e.hash, 'hex')));
const hex = (hashes: Buffer[]) => hashes.map((h) => h.toString('hex'));
const wheres = (report: OfflineReport) => report.problems.map((p) => p.where);

function buildChain(n: number): AuditEntry[] {
  const entries: AuditEntry[] = [];
  for (let i = 1; i <= n; i++) {
    entries.push(
      chainEntry(entries[entries.length - 1], {
        id: `aud_${i}`,
        at: new Date(Date.UTC(2025, 0, 1, 0, 0, i)),
        actor: 'admin',
        method: 'POST',
        path: '/v1/users',
        fingerprint: `sha256:${String(i).padStart(64, '0')}`,
        outcome: 201,
        body: { kind: 'user.created', account_id: `usr_${i}` },
      }),
    );
  }
  return entries;
}

/** The entries as the store streams them: each with the text its hash covers. */
const storedRows = (entries: AuditEntry[]) => entries.map(({ hash, ...rest }) => ({ seq: rest.seq, hash, run_id: null, canonical: canonicalJson(rest) }));

async function anchorOf(entries: AuditEntry[], size: number): Promise<string> {
  const covered = entries.slice(0, size);
  return signDocument(
    { type: ANCHOR_TYPE, install_id: INSTALL, size, head_hash: covered[size - 1].hash, merkle_root: rootFromLeafHashes(leavesOf(covered)).toString('hex'), at: '2025-01-01T00:00:00.000Z' },
    key.privateJwk,
    key.keyId,
  );
}

/** A bundle made as signBundle makes it (services/audit/audit-documents.ts), with a hook to damage the payload before signing. */
async function bundle(
  version: BundleVersion,
  entries: AuditEntry[],
  options: { after?: number; limit?: number; anchors?: string[]; tamperSigned?: (payload: Record<string, any>) => void } = {},
): Promise<string> {
  const after = options.after ?? 0;
  const window = storedRows(entries).slice(after, options.limit === undefined ? undefined : after + options.limit);
  const last = window[window.length - 1];
  const head: BundleHead = {
    install_id: INSTALL,
    key_id: key.keyId,
    issued_at: '2025-01-02T00:00:00.000Z',
    size: entries.length,
    head_hash: entries[entries.length - 1].hash,
    merkle_root: rootFromLeafHashes(leavesOf(entries)).toString('hex'),
    anchors: options.anchors ?? [],
    window: { after, prev_hash: after === 0 ? GENESIS_HASH : entries[after - 1].hash },
    last_inclusion: last ? hex(inclusionProof(last.seq - 1, entries.length, leavesOf(entries))) : [],
  };
  const payload = version === 1 ? bundlePayloadV1(head, window.map(entryForBundle)) : bundlePayloadV2(head, window.map((row) => row.hash));
  options.tamperSigned?.(payload);
  const signed = await signDocument(payload, key.privateJwk, key.keyId);
  return version === 1 ? signed : bundleDocumentV2(signed, window.map(bundleEntryV2));
}

/** The version 2 document with its entries changed after signing. */
function editEntries(document: string, edit: (entries: any[]) => void): string {
  const parsed = JSON.parse(document);
  edit(parsed.entries);
  return JSON.stringify(parsed);
}

describe('version 2: the tree head and the entries\' hashes signed, the entries beside', () => {
  test('a whole bundle with anchors, a window and an empty tail each verify, as does the same chain in version 1', async () => {
    const entries = buildChain(13);
    const anchors = [await anchorOf(entries, 4), await anchorOf(entries, 13)];
    const whole = await bundle(2, entries, { anchors });
    expect(JSON.parse(whole)).toMatchObject({ type: 'cairn.audit.bundle', version: 2 });
    const report = await verifyBundle(whole, seal);
    expect(report.problems).toEqual([]);
    expect(report.checked.join('\n')).toMatch(/entry hashes: the 13 entries carried are held to the 13 signed hashes/);
    expect(report.checked.join('\n')).toMatch(/merkle root: recomputed over all 13 entries/);
    expect(report.checked.join('\n')).toMatch(/anchors: 2 of 2 verify with the pinned key; 2 satisfied/);
    expect((await verifyAuditDocument(`\n${whole}\n`, key.publicJwk)).ok).toBe(true);

    expect((await verifyBundle(await bundle(2, entries, { after: 3, limit: 5, anchors }), seal)).problems).toEqual([]);
    expect((await verifyBundle(await bundle(2, entries, { after: 13 }), seal)).problems).toEqual([]);
    expect((await verifyBundle(await bundle(1, entries, { anchors }), seal)).problems).toEqual([]);
  });

  test('the signed part carries the hashes, not the entries, and the signature does not grow with them', async () => {
    const entries = buildChain(40);
    const doc = JSON.parse(await bundle(2, entries));
    const payload = JSON.parse(Buffer.from(doc.signed.split('.')[1], 'base64url').toString('utf8'));
    expect(payload.entries).toBeUndefined();
    expect(payload.entry_hashes).toEqual(entries.map((e) => e.hash));
    // Each entry is the text its hash covers: no hash of its own.
    expect(doc.entries).toEqual(entries.map(({ hash: _hash, ...rest }) => rest));
  });

  test('an entry changed beside the signature is named: by its recomputed hash, or by the signed hash list', async () => {
    const entries = buildChain(8);
    const original = await bundle(2, entries, { anchors: [await anchorOf(entries, 8)] });

    const edited = await verifyBundle(editEntries(original, (list) => (list[2].actor = 'mallory')), seal);
    expect(edited.ok).toBe(false);
    expect(wheres(edited)).toEqual(['entries[2] (seq 3)']);
    expect(edited.problems[0].detail).toMatch(/recomputes to/);

    // Rewritten and relinked from entry 3 on: the signed hashes say otherwise.
    const relinked: AuditEntry[] = entries.slice(0, 2);
    for (const entry of entries.slice(2)) {
      const { seq: _s, prev_hash: _p, hash: _h, ...fields } = entry;
      relinked.push(chainEntry(relinked[relinked.length - 1], { ...fields, actor: entry.seq === 3 ? 'mallory' : entry.actor }));
    }
    const rewritten = await verifyBundle(editEntries(original, (list) => list.splice(0, list.length, ...relinked.map(({ hash: _h, ...rest }) => rest))), seal);
    expect(rewritten.ok).toBe(false);
    expect(wheres(rewritten)).toContain('entries[2] (seq 3)');
    expect(rewritten.problems.find((p) => p.where === 'entries[2] (seq 3)')!.detail).toMatch(/recomputes to/);

    // An entry carrying a hash of its own is refused: only the signed one counts.
    const withHash = await verifyBundle(editEntries(original, (list) => (list[0].hash = entries[0].hash)), seal);
    expect(wheres(withHash)).toEqual(['entries[0] (seq 1)']);

    const dropped = await verifyBundle(editEntries(original, (list) => list.splice(4, 1)), seal);
    expect(wheres(dropped)).toContain('payload.entry_hashes');
    const added = await verifyBundle(editEntries(original, (list) => list.push(list[7])), seal);
    expect(wheres(added)).toContain('payload.entry_hashes');
  });

  test('each entry is read as the document carries it, quotes, commas and brackets inside its strings included; a document laid out otherwise is recomputed and verifies', async () => {
    const tricky = ['a "quoted", [bracketed] {braced} text', 'ends in a backslash \\', '\\"},{"actor":"mallory"', 'line\nbreak, and \u0001'];
    const entries: AuditEntry[] = [];
    for (const [i, note] of tricky.entries()) {
      entries.push(chainEntry(entries.at(-1), { id: `aud_${i}`, at: new Date(Date.UTC(2025, 0, 1, 0, 0, i)), actor: 'admin', method: 'POST', path: '/v1/users', fingerprint: '', outcome: 201, body: { kind: 'user.created', note, nested: [{ note }, [note]] } }));
    }
    const document = await bundle(2, entries);
    expect(readBundleDocument(document)!.entryTexts).toEqual(storedRows(entries).map((row) => row.canonical));
    expect(await verifyBundle(document, seal)).toMatchObject({ ok: true });

    const laidOut = JSON.stringify(JSON.parse(document), null, 2);
    expect(readBundleDocument(laidOut)!.entryTexts).toBeUndefined();
    expect(await verifyBundle(laidOut, seal)).toMatchObject({ ok: true });
    const editedLaidOut = JSON.parse(document);
    editedLaidOut.entries[1].body.note = 'changed';
    const edited = await verifyBundle(JSON.stringify(editedLaidOut, null, 2), seal);
    expect(wheres(edited)).toEqual(['entries[1] (seq 2)']);
  });

  test('the signed part is held to its signature, its version and its document', async () => {
    const entries = buildChain(5);
    const original = await bundle(2, entries);
    const doc = JSON.parse(original);
    const [h, p, s] = doc.signed.split('.');
    const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
    const badSignature = await verifyBundle(JSON.stringify({ ...doc, signed: [h, p, flip(s, 10)].join('.') }), seal);
    expect(wheres(badSignature)).toEqual(['signature']);

    // A signed hash list that is not the entries' fails on the hashes, signature intact.
    const otherHashes = await bundle(2, entries, { tamperSigned: (payload) => (payload.entry_hashes[1] = entries[0].hash) });
    expect(wheres(await verifyBundle(otherHashes, seal))).toEqual(expect.arrayContaining(['entries[1] (seq 2)', 'payload.merkle_root']));

    expect(wheres(await verifyBundle(JSON.stringify({ ...doc, version: 1 }), seal))).toEqual(['document.version']);
    // The signed part alone is not a bundle: a bare JWS is version 1, and this one holds no entries.
    const bare = await verifyBundle(doc.signed, seal);
    expect(wheres(bare)).toEqual(expect.arrayContaining(['payload.version', 'payload.entries']));
    // Nor is a version 1 payload passed off inside a version 2 document.
    const v1Inside = JSON.stringify({ ...doc, signed: await bundle(1, entries) });
    expect(wheres(await verifyBundle(v1Inside, seal))).toEqual(expect.arrayContaining(['payload.version', 'payload.entry_hashes']));
    for (const garbage of ['{', '{}', '{"type":"cairn.audit.bundle","version":2,"signed":7,"entries":{}}']) {
      const report = await verifyAuditDocument(garbage, seal);
      expect(report.ok).toBe(false);
    }
  });

  test('the verifier\'s own tree gives the last entry\'s inclusion proof, as the leaves do', () => {
    const entries = buildChain(70);
    const verifier = new ChainVerifier();
    expect(verifier.lastInclusion()).toBeUndefined();
    entries.forEach((entry, i) => {
      verifier.push(entry);
      const fromLeaves = inclusionProof(i, i + 1, entries.slice(0, i + 1).map((e) => leafOfStoredHash(e.hash)));
      expect(hex(verifier.lastInclusion()!)).toEqual(hex(fromLeaves));
    });
  });
});

describe('version 1 bundles the server made before version 2', () => {
  const fixture = (name: string) => readFileSync(join(FIXTURES, name), 'utf8');
  const fixtureSeal = () => JSON.parse(fixture('seal.json'));

  test('a whole bundle with an anchor, and a window, still verify', async () => {
    for (const name of ['bundle-v1.jws', 'bundle-v1-window.jws']) {
      const report = await verifyAuditDocument(fixture(name), fixtureSeal());
      expect(report.problems).toEqual([]);
      expect(report.kind).toBe('bundle');
    }
    const whole = await verifyBundle(fixture('bundle-v1.jws'), fixtureSeal());
    expect(whole.checked.join('\n')).toMatch(/anchors: 1 of 1 verify with the pinned key; 1 satisfied/);
  });

  test('cairn audit verify accepts the old file and names a change to it', async () => {
    const lines: string[] = [];
    process.exitCode = undefined;
    await runAuditCommand(['verify', '--seal', join(FIXTURES, 'seal.json'), join(FIXTURES, 'bundle-v1.jws')], (line) => lines.push(line));
    expect(process.exitCode).toBeUndefined();
    expect(lines[lines.length - 1]).toMatch(/^bundle verified/);

    const [h, p, s] = fixture('bundle-v1.jws').trim().split('.');
    const payload = JSON.parse(Buffer.from(p, 'base64url').toString('utf8'));
    payload.entries[1].actor = 'mallory';
    const tampered = [h, Buffer.from(canonicalJson(payload)).toString('base64url'), s].join('.');
    const report = await verifyBundle(tampered, fixtureSeal());
    expect(wheres(report)).toEqual(expect.arrayContaining(['signature', 'entries[1] (seq 2)']));
  });
});
