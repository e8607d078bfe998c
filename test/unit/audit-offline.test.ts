import { GENESIS_HASH, chainEntry, verifyChain, type AuditEntry } from '../../core/audit/audit-chain';
import { ANCHOR_TYPE, BUNDLE_TYPE, RECEIPT_TYPE, verifyAuditDocument, verifyBundle, verifyReceipt, type OfflineReport } from '../../core/audit/audit-offline';
import { consistencyProof, inclusionProof, leafHash, rootFromLeafHashes } from '../../core/audit/merkle';
import { newReasonRandom, reasonCommitment } from '../../core/audit/reason-commitment';
import { generateSigningKey, signDocument, type SigningKey } from '../../core/audit/signing';

const INSTALL = 'ins_unit';
let key: SigningKey;
let other: SigningKey;
let seal: Record<string, unknown>;

beforeAll(async () => {
  key = await generateSigningKey();
  other = await generateSigningKey();
  seal = { service: 'cairn', install_id: INSTALL, key_id: key.keyId, keys: [key.publicJwk] };
});

const hex = (hashes: Buffer[]) => hashes.map((h) => h.toString('hex'));
const leavesOf = (entries: AuditEntry[]) => entries.map((e) => leafHash(Buffer.from(e.hash, 'hex')));
const rootOf = (entries: AuditEntry[]) => rootFromLeafHashes(leavesOf(entries)).toString('hex');

/** A chain of `n` entries; every third is about `run_a`, and entry 5 is a decision with a reason. */
function buildChain(n: number, decision?: { id: string; random: string; reason: string }): AuditEntry[] {
  const entries: AuditEntry[] = [];
  for (let i = 1; i <= n; i++) {
    const isDecision = decision && i === 5;
    const body: Record<string, unknown> = isDecision
      ? { kind: 'run.decision', run_id: 'run_a', decision_id: decision.id, decision: 'approve', commitment: reasonCommitment({ event: decision.id, random: decision.random, reason: decision.reason }) }
      : i % 3 === 0
        ? { kind: i === 9 ? 'run.ended' : 'run.submitted', run_id: 'run_a', status: 'succeeded' }
        : { kind: 'user.created', account_id: `usr_${i}` };
    entries.push(
      chainEntry(entries[entries.length - 1], {
        id: isDecision ? decision.id : `aud_${i}`,
        at: new Date(Date.UTC(2025, 0, 1, 0, 0, i)),
        actor: 'admin',
        method: 'POST',
        path: '/v1/users',
        fingerprint: `sha256:${String(i).padStart(64, '0')}`,
        outcome: 201,
        body,
      }),
    );
  }
  return entries;
}

async function anchorJws(entries: AuditEntry[], size: number, signer: SigningKey = key, installId = INSTALL): Promise<string> {
  const covered = entries.slice(0, size);
  return signDocument(
    { type: ANCHOR_TYPE, install_id: installId, size, head_hash: covered[size - 1].hash, merkle_root: rootOf(covered), at: '2025-01-01T00:00:00.000Z' },
    signer.privateJwk,
    signer.keyId,
  );
}

async function bundleOf(
  entries: AuditEntry[],
  options: { after?: number; limit?: number; anchors?: string[]; signer?: SigningKey; tamper?: (payload: Record<string, any>) => void } = {},
): Promise<string> {
  const signer = options.signer ?? key;
  const after = options.after ?? 0;
  const window = entries.slice(after, options.limit === undefined ? undefined : after + options.limit);
  const last = window[window.length - 1];
  const payload: Record<string, any> = {
    type: BUNDLE_TYPE,
    install_id: INSTALL,
    key_id: signer.keyId,
    issued_at: '2025-01-02T00:00:00.000Z',
    size: entries.length,
    head_hash: entries[entries.length - 1].hash,
    merkle_root: rootOf(entries),
    anchors: options.anchors ?? [],
    window: { after, prev_hash: after === 0 ? GENESIS_HASH : entries[after - 1].hash },
    entries: window.map((e) => ({ ...e })),
    last_inclusion: last ? hex(inclusionProof(last.seq - 1, entries.length, leavesOf(entries))) : [],
  };
  options.tamper?.(payload);
  return signDocument(payload, signer.privateJwk, signer.keyId);
}

async function receiptOf(
  entries: AuditEntry[],
  options: { decisions?: unknown[]; from?: number; tamper?: (payload: Record<string, any>) => void; form?: 'full' | 'sparse' } = {},
): Promise<string> {
  const leaves = leavesOf(entries);
  const ofRun = entries.filter((e) => e.body.run_id === 'run_a');
  const payload: Record<string, any> = {
    type: RECEIPT_TYPE,
    form: options.form ?? 'full',
    install_id: INSTALL,
    key_id: key.keyId,
    issued_at: '2025-01-02T00:00:00.000Z',
    run_id: 'run_a',
    size: entries.length,
    merkle_root: rootOf(entries),
    head_hash: entries[entries.length - 1].hash,
    entries: ofRun.map((entry) => ({ entry, index: entry.seq - 1, proof: hex(inclusionProof(entry.seq - 1, entries.length, leaves)) })),
  };
  if (options.decisions) {
    payload.run = { id: 'run_a', status: 'succeeded' };
    payload.decisions = options.decisions;
  }
  if (options.from !== undefined) {
    payload.consistency = { from_size: options.from, from_root: rootOf(entries.slice(0, options.from)), proof: hex(consistencyProof(options.from, entries.length, leaves)) };
  }
  options.tamper?.(payload);
  return signDocument(payload, key.privateJwk, key.keyId);
}

const wheres = (report: OfflineReport) => report.problems.map((p) => p.where);

describe('bundles', () => {
  test('a full bundle with anchors verifies against the seal and against the bare JWK', async () => {
    const entries = buildChain(12);
    expect(verifyChain(entries).ok).toBe(true);
    const jws = await bundleOf(entries, { anchors: [await anchorJws(entries, 4), await anchorJws(entries, 12)] });
    for (const pin of [seal, key.publicJwk]) {
      const report = await verifyBundle(jws, pin);
      expect(report.problems).toEqual([]);
      expect(report.ok).toBe(true);
      expect(report.kind).toBe('bundle');
      expect(report.checked.join('\n')).toMatch(/merkle root: recomputed over all 12 entries/);
      expect(report.checked.join('\n')).toMatch(/anchors: 2 of 2 verify with the pinned key; 2 satisfied/);
    }
    expect((await verifyAuditDocument(jws, seal)).ok).toBe(true);
  });

  test('an entry changed inside a signed bundle is named with its seq', async () => {
    const entries = buildChain(8);
    const jws = await bundleOf(entries, { anchors: [await anchorJws(entries, 8)], tamper: (p) => (p.entries[2].actor = 'mallory') });
    const report = await verifyBundle(jws, seal);
    expect(report.ok).toBe(false);
    expect(wheres(report)).toContain('entries[2] (seq 3)');
    expect(report.problems.find((p) => p.where === 'entries[2] (seq 3)')!.detail).toMatch(/recomputes to/);
    // The stored hashes are unchanged, so the root over them still matches: the entry itself is the finding.
    expect(wheres(report)).not.toContain('entries[3] (seq 4)');
  });

  test('an entry dropped from the middle breaks the links and the root', async () => {
    const entries = buildChain(8);
    const jws = await bundleOf(entries, { tamper: (p) => p.entries.splice(4, 1) });
    const report = await verifyBundle(jws, seal);
    expect(report.ok).toBe(false);
    expect(wheres(report)).toContain('entries[4] (seq 5)');
    expect(wheres(report)).toContain('payload.last_inclusion');
  });

  test("a full bundle's root is recomputed over the hashes it carries: another hash names the root it makes, one that is not hex says the root cannot be made", async () => {
    const entries = buildChain(9);
    const other = 'ab'.repeat(32);
    const swapped = await bundleOf(entries, { tamper: (p) => (p.entries[8].hash = other) });
    const expected = rootOf(entries.map((e, i) => (i === 8 ? { ...e, hash: other } : e)));
    let problem = (await verifyBundle(swapped, seal)).problems.find((p) => p.where === 'payload.merkle_root');
    expect(problem?.detail).toBe(`the signed root is ${rootOf(entries)}, the entries recompute to ${expected}`);

    const mangled = await bundleOf(entries, { tamper: (p) => (p.entries[3].hash = other.toUpperCase()) });
    problem = (await verifyBundle(mangled, seal)).problems.find((p) => p.where === 'payload.merkle_root');
    expect(problem?.detail).toBe('the root cannot be recomputed: an entry has no 64-hex hash');
  });

  test('a window links from prev_hash, proves its last entry, and checks the anchors it covers', async () => {
    const entries = buildChain(20);
    const anchors = [await anchorJws(entries, 3), await anchorJws(entries, 6), await anchorJws(entries, 15)];
    const ok = await verifyBundle(await bundleOf(entries, { after: 3, limit: 5, anchors }), seal);
    expect(ok.problems).toEqual([]);
    expect(ok.checked.join('\n')).toMatch(/entries: 5 \(seq 4\.\.8\) recompute and link from prev_hash/);
    expect(ok.checked.join('\n')).toMatch(/last_inclusion: entry seq 8 is proven/);
    expect(ok.checked.join('\n')).toMatch(/1 cover entries outside the window/);

    const badPrev = await verifyBundle(await bundleOf(entries, { after: 3, limit: 5, tamper: (p) => (p.window.prev_hash = entries[1].hash) }), seal);
    expect(wheres(badPrev)).toEqual(['entries[0] (seq 4)']);

    // An anchor at 6 whose head is not entry 6's: signed by the install, so it is a real disagreement.
    const forged = await signDocument(
      { type: ANCHOR_TYPE, install_id: INSTALL, size: 6, head_hash: entries[6].hash, merkle_root: rootOf(entries), at: '2025-01-01T00:00:00.000Z' },
      key.privateJwk,
      key.keyId,
    );
    const unsatisfied = await verifyBundle(await bundleOf(entries, { after: 3, limit: 5, anchors: [forged] }), seal);
    expect(wheres(unsatisfied)).toEqual(['anchors[0] (size 6)']);
  });

  test('the window reaching the head must end at the signed head', async () => {
    const entries = buildChain(10);
    const report = await verifyBundle(await bundleOf(entries, { after: 7 }), seal);
    expect(report.problems).toEqual([]);
    expect(report.checked.join('\n')).toMatch(/head hash: the last entry \(seq 10\)/);
    const lying = await verifyBundle(await bundleOf(entries, { after: 7, tamper: (p) => (p.head_hash = entries[8].hash) }), seal);
    expect(wheres(lying)).toContain('payload.head_hash');
  });

  test('anchors signed by another key, of another install, or beyond the chain are each named', async () => {
    const entries = buildChain(6);
    const longer = buildChain(9);
    const jws = await bundleOf(entries, {
      anchors: [await anchorJws(entries, 2, other), await anchorJws(entries, 3, key, 'ins_other'), await anchorJws(longer, 9), await anchorJws(entries, 5)],
    });
    const report = await verifyBundle(jws, seal);
    expect(wheres(report)).toEqual(['anchors[0] (size 2)', 'anchors[1] (size 3)', 'anchors[2] (size 9)']);
    expect(report.problems[2].detail).toMatch(/lost its tail/);
  });

  test('a full bundle whose chain was relinked from some entry on fails the anchor over the original', async () => {
    const original = buildChain(8);
    const anchor = await anchorJws(original, 6);
    // Rewrite entry 4 and relink everything after it: the chain verifies on its own.
    const rewritten: AuditEntry[] = original.slice(0, 3);
    for (const entry of original.slice(3)) {
      const { seq: _seq, prev_hash: _prev, hash: _hash, ...fields } = entry;
      rewritten.push(chainEntry(rewritten[rewritten.length - 1], { ...fields, actor: entry.seq === 4 ? 'mallory' : entry.actor }));
    }
    expect(verifyChain(rewritten).ok).toBe(true);
    const report = await verifyBundle(await bundleOf(rewritten, { anchors: [anchor] }), seal);
    expect(report.ok).toBe(false);
    expect(wheres(report)).toEqual(['anchors[0] (size 6)', 'anchors[0] (size 6)']);
    expect(report.problems.map((p) => p.detail).join(' ')).toMatch(/head hash.*Merkle root|Merkle root.*head hash/);
  });

  test("another install's key fails on the key, not on the content", async () => {
    const entries = buildChain(4);
    const report = await verifyBundle(await bundleOf(entries, { signer: other }), seal);
    expect(report.ok).toBe(false);
    expect(wheres(report)).toContain('key_id');
    expect(report.problems.find((p) => p.where === 'key_id')!.detail).toContain(other.keyId);
    expect(wheres(report).some((w) => w.startsWith('entries'))).toBe(false);

    const againstOtherSeal = await verifyBundle(await bundleOf(entries), { ...seal, install_id: 'ins_other', key_id: other.keyId, keys: [other.publicJwk] });
    expect(wheres(againstOtherSeal)).toEqual(['key_id', 'payload.install_id']);
  });

  test('one byte changed in the payload or in the signature fails the signature', async () => {
    const jws = await bundleOf(buildChain(5));
    const [header, payload, signature] = jws.split('.');
    const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
    const payloadEdited = await verifyBundle([header, flip(payload, 40), signature].join('.'), seal);
    expect(payloadEdited.ok).toBe(false);
    expect(wheres(payloadEdited)[0]).toMatch(/^(signature|payload)$/);
    const signatureEdited = await verifyBundle([header, payload, flip(signature, 10)].join('.'), seal);
    expect(wheres(signatureEdited)).toEqual(['signature']);
  });

  test('nothing thrown on garbage', async () => {
    for (const [doc, pin] of [
      [42, seal],
      ['', seal],
      ['a.b.c', seal],
      ['a.b', null],
      [await bundleOf(buildChain(2)), 'not a seal'],
      [await bundleOf(buildChain(2)), { keys: [{ kty: 'RSA' }] }],
      [await bundleOf(buildChain(2), { tamper: (p) => Object.assign(p, { entries: 'x', window: null, size: -1, anchors: {} }) }), seal],
      [await bundleOf(buildChain(2), { tamper: (p) => Object.assign(p, { entries: [null, 7], last_inclusion: ['zz'] }) }), seal],
    ] as [unknown, unknown][]) {
      const report = await verifyBundle(doc, pin);
      expect(report.ok).toBe(false);
      expect(report.problems.length).toBeGreaterThan(0);
    }
    expect((await verifyAuditDocument('nonsense', seal)).kind).toBe('unknown');
    // A payload too damaged to name its type still has its signature checked.
    const [h, p, sig] = (await bundleOf(buildChain(2))).split('.');
    const damaged = await verifyAuditDocument([h, 'A' + p.slice(1), sig].join('.'), seal);
    expect(damaged.kind).toBe('unknown');
    expect(damaged.problems.map((x) => x.where)).toContain('signature');
  });
});

describe('receipts', () => {
  const decisionId = 'aud_decision';

  test('a full receipt verifies: entries proven, the reason opens its commitment, consistency holds', async () => {
    const random = newReasonRandom();
    const entries = buildChain(12, { id: decisionId, random, reason: 'change window approved' });
    const decisions = [{ id: decisionId, kind: 'approve', reason: 'change window approved', random, commitment: entries[4].body.commitment }];
    const report = await verifyReceipt(await receiptOf(entries, { decisions, from: 7 }), seal);
    expect(report.problems).toEqual([]);
    expect(report.kind).toBe('receipt');
    expect(report.checked.join('\n')).toMatch(/entries: 5 recompute and are proven in the tree of size 12/);
    expect(report.checked.join('\n')).toMatch(/decisions: 1 reason open/);
    expect(report.checked.join('\n')).toMatch(/consistency: the tree of size 7/);
  });

  test('a reason that does not open its commitment is named; a redacted one is not a failure', async () => {
    const random = newReasonRandom();
    const entries = buildChain(9, { id: decisionId, random, reason: 'ok' });
    const wrong = await verifyReceipt(await receiptOf(entries, { decisions: [{ id: decisionId, kind: 'approve', reason: 'OK', random }] }), seal);
    expect(wheres(wrong)).toEqual([`decisions[0] (${decisionId})`]);
    expect(wrong.problems[0].detail).toMatch(/do not open the commitment/);
    const redacted = await verifyReceipt(await receiptOf(entries, { decisions: [{ id: decisionId, kind: 'approve', reason: null, random: null }] }), seal);
    expect(redacted.ok).toBe(true);
    const missing = await verifyReceipt(await receiptOf(entries, { decisions: [{ id: 'aud_elsewhere', kind: 'approve', reason: 'ok', random }] }), seal);
    expect(missing.problems[0].detail).toMatch(/no chain entry in the receipt/);
  });

  test('a bad inclusion proof, a changed entry and a bad consistency proof are each named', async () => {
    const entries = buildChain(10);
    const report = await verifyReceipt(
      await receiptOf(entries, {
        from: 4,
        tamper: (p) => {
          p.entries[0].proof[0] = 'f'.repeat(64);
          p.entries[1].entry.body.status = 'failed';
          p.consistency.from_root = 'e'.repeat(64);
        },
      }),
      seal,
    );
    expect(wheres(report)).toEqual(['entries[0] (seq 3)', 'entries[1] (seq 6)', 'consistency']);
  });

  test('an entry of another run, or at the wrong index, fails', async () => {
    const entries = buildChain(6);
    const report = await verifyReceipt(
      await receiptOf(entries, {
        form: 'sparse',
        tamper: (p) => {
          p.entries[0].index = 5;
          p.run_id = 'run_b';
        },
      }),
      seal,
    );
    expect(wheres(report)).toEqual(['entries[0] (seq 3)', 'entries[0] (seq 3)', 'entries[1] (seq 6)']);
  });
});
