import { ChainVerifier, chainEntry, entryForBundle, type AuditEntry } from '../core/audit/audit-chain';
import { verifyBundle } from '../core/audit/audit-offline';
import { bundleDocumentV2, bundleEntryV2, bundlePayloadV1, bundlePayloadV2, type BundleVersion } from '../core/audit/audit-bundle';
import { canonicalJson } from '../core/audit/canonical';
import { MerkleAccumulator, offloadSubtrees } from '../core/audit/merkle';
import { lendMerkleThreads } from '../services/audit/merkle-threads';
import { sha256 } from '../core/sha256';
import { generateSigningKey, signDocument } from '../core/audit/signing';
import type postgres from 'postgres';
import { expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import { submitTrue, waitSucceeded } from './run-client';
import { seedAuditEntries } from './seed';
import type { ChainRow } from '../store/audit';
import { msSince, percentile, timed as timedAsync } from './stats';

const ENTRIES = 100_000;
const ROUNDS = 5;

/** A chain shaped like a busy install's: run submissions and ends, decisions, account changes. */
function buildChain(count: number): AuditEntry[] {
  const entries: AuditEntry[] = [];
  let previous: AuditEntry | undefined;
  const start = Date.UTC(2025, 0, 1);
  for (let i = 1; i <= count; i++) {
    const runId = `run_01J${String(Math.floor(i / 3)).padStart(23, '0')}`;
    const body: Record<string, unknown> =
      i % 3 === 0
        ? { kind: 'run.ended', run_id: runId, status: i % 7 === 0 ? 'failed' : 'succeeded', exit_code: i % 7 === 0 ? 2 : 0, error: i % 7 === 0 ? 'exited with code 2' : null }
        : i % 3 === 1
          ? { kind: 'run.submitted', run_id: runId, tool: 'bash', status: 'pending', state_digest: `sha256:${String(i).padStart(64, '0')}`, actor_kind: 'user', rerun_of: null, hold: null, exempted_by: [] }
          : i % 11 === 0
            ? { kind: 'user.created', account_id: `usr_${i}`, role: 'viewer' }
            : { kind: 'run.decision', run_id: runId, decision_id: `aud_${i}`, decision: 'approve', commitment: `sha256:${String(i).padStart(64, 'a')}` };
    previous = chainEntry(previous, {
      id: `aud_01J${String(i).padStart(23, '0')}`,
      at: new Date(start + i * 1000),
      actor: i % 3 === 0 ? 'cairn' : 'admin',
      method: i % 3 === 0 ? 'RUN' : 'POST',
      path: i % 3 === 0 ? `/v1/runs/${runId}` : '/v1/runs',
      fingerprint: i % 3 === 0 ? '' : `sha256:${String(i).padStart(64, 'f')}`,
      outcome: i % 3 === 0 ? 'succeeded' : 201,
      body,
    });
    entries.push(previous);
  }
  return entries;
}

/**
 * `rounds` timings (ms) of each piece of work, taken in turns (one of each per round), so load
 * that comes and goes on the machine (the full pass's servers, PostgreSQL's vacuum) falls on
 * every figure alike instead of on whichever ran during it.
 */
function timedInTurns<K extends string>(rounds: number, work: Record<K, () => unknown>): Record<K, number[]> {
  const names = Object.keys(work) as K[];
  const samples = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<K, number[]>;
  for (let i = 0; i < rounds; i++) {
    for (const name of names) {
      const start = process.hrtime.bigint();
      work[name]();
      samples[name].push(msSince(start));
    }
  }
  return samples;
}

/**
 * (d) The audit chain in memory, no database: `ChainVerifier` over 100,000 entries, and building a
 * full signed bundle of them as `GET /v1/audit/bundle` does (verify and Merkle root, the last
 * entry's inclusion proof, the entries' texts, the Ed25519 signature of version 2 over the tree
 * head and the entries' hashes), each beside SHA-256 alone
 * over the same bytes: the canonical JSON of every entry, the floor any verification pays.
 */
export async function auditBenchmark(): Promise<Section> {
  const buildStart = process.hrtime.bigint();
  const entries = buildChain(ENTRIES);
  const texts = entries.map(({ hash: _hash, ...rest }) => canonicalJson(rest));
  const hashed = texts.map((text) => Buffer.from(text, 'utf8'));
  // As the store streams them for verification (store/audit.ts streamAuditEntries): each row the
  // text its hash covers, which is the entry (schema/021), and nothing else.
  const stored: ChainRow[] = entries.map((entry, i) => ({ seq: entry.seq, hash: entry.hash, run_id: null, canonical: texts[i] }));
  const bytes = hashed.reduce((total, b) => total + b.length, 0);
  const buildMs = msSince(buildStart);
  const key = await generateSigningKey();

  // As cairn serve and cairn audit verify run it, the Merkle tree built on threads beside the
  // scan (services/audit/merkle-threads.ts); and, beside it, everything on this one thread.
  lendMerkleThreads();
  const threads = offloadSubtrees(undefined);
  offloadSubtrees(threads);
  const onThisThread = (work: () => void) => () => {
    offloadSubtrees(undefined);
    try {
      work();
    } finally {
      offloadSubtrees(threads);
    }
  };
  const verifyOver = (list: readonly unknown[]) => () => {
    const verifier = new ChainVerifier();
    for (const entry of list) verifier.push(entry);
    const report = verifier.report();
    if (!report.ok || report.count !== ENTRIES) throw new Error(`the bench chain does not verify: ${JSON.stringify(report)}`);
  };
  const { shaOnly, verify, verifyHere, recompute, merkleOnly } = timedInTurns(ROUNDS, {
    shaOnly: () => {
      for (const b of hashed) sha256(b);
    },
    verify: verifyOver(stored),
    verifyHere: onThisThread(verifyOver(stored)),
    // The path rows without stored canonical text take (entries appended before schema/017_scale.sql).
    recompute: verifyOver(entries),
    // Of verification on one thread, the Merkle tree alone (a leaf and its share of node hashes per entry).
    merkleOnly: () => {
      const tree = new MerkleAccumulator(undefined);
      for (const entry of entries) tree.pushHexHash(entry.hash);
      tree.root();
    },
  });

  // As signBundle (services/audit/audit-documents.ts) makes a whole bundle: one verifying pass,
  // the last entry's proof read off the verifier's tree, each entry's stored text with its hash
  // spliced in, and the signature over the payload of the version asked for.
  let jws = '';
  const scanPhase: number[] = [];
  const signPhase: number[] = [];
  const bundleOf = async (version: BundleVersion) => {
    const scanStart = process.hrtime.bigint();
    const verifier = new ChainVerifier();
    for (const entry of stored) verifier.push(entry);
    const report = verifier.report();
    if (!report.ok) throw new Error('the bench chain does not verify');
    const lastInclusion = verifier.lastInclusion()!.map((h) => h.toString('hex'));
    scanPhase.push(msSince(scanStart));
    const signStart = process.hrtime.bigint();
    const head = {
      install_id: 'ins_bench',
      key_id: key.keyId,
      issued_at: new Date().toISOString(),
      size: report.count,
      head_hash: report.head_hash,
      merkle_root: report.merkle_root,
      anchors: [],
      window: { after: 0, prev_hash: '0'.repeat(64) },
      last_inclusion: lastInclusion,
    };
    const document =
      version === 1
        ? await signDocument(bundlePayloadV1(head, stored.map(entryForBundle)), key.privateJwk, key.keyId)
        : bundleDocumentV2(await signDocument(bundlePayloadV2(head, stored.map((row) => row.hash)), key.privateJwk, key.keyId), stored.map(bundleEntryV2));
    signPhase.push(msSince(signStart));
    return document;
  };
  const bundle = await timedAsync(ROUNDS, 0, async () => {
    jws = await bundleOf(2);
  });
  // The version 1 bundle (the whole payload signed), once, beside it.
  const v1Start = process.hrtime.bigint();
  const v1 = await bundleOf(1);
  const v1Ms = msSince(v1Start);
  scanPhase.pop();
  signPhase.pop();

  const offlineStart = process.hrtime.bigint();
  const offline = await verifyBundle(jws, key.publicJwk);
  const offlineMs = msSince(offlineStart);
  if (!offline.ok) throw new Error(`the bench bundle does not verify offline: ${JSON.stringify(offline.problems.slice(0, 3))}`);
  const v1Bytes = Buffer.byteLength(v1);

  const sha = percentile(shaOnly, 50);
  const v = percentile(verify, 50);
  const b = percentile(bundle, 50);
  const perSecond = (ms: number) => Math.round(ENTRIES / (ms / 1000)).toLocaleString('en-US');
  return {
    rows: [
      { metric: `ChainVerifier over ${ENTRIES / 1000}k entries`, value: v, baseline: sha, unit: 'ms' },
      { metric: 'audit verify speed, share of SHA-256 alone', value: sha / v, baseline: 1, unit: 'x', budget: { min: 0.5 } },
      { metric: 'the same, all on one thread', value: sha / percentile(verifyHere, 50), baseline: 1, unit: 'x' },
      { metric: `signed bundle of ${ENTRIES / 1000}k entries (version 2)`, value: b, baseline: sha, unit: 'ms' },
      { metric: 'audit bundle speed, share of SHA-256 alone', value: sha / b, baseline: 1, unit: 'x', budget: { min: 0.25 } },
      { metric: `offline verify of that bundle`, value: offlineMs, baseline: sha, unit: 'ms' },
    ],
    notes: [
      `audit: ${ENTRIES} entries built with chainEntry in ${(buildMs / 1000).toFixed(1)} s (not timed), ${(bytes / 2 ** 20).toFixed(1)} MiB of canonical JSON; ` +
        `median of ${ROUNDS} rounds (SHA-256, verify, verify on one thread, recompute and the tree taken in turns); baseline is SHA-256 alone over those bytes (${perSecond(sha)} entries/s)`,
      `audit: ChainVerifier ${perSecond(v)} entries/s with the Merkle tree on ${threads === undefined ? 'this thread (one core: no threads lent)' : 'a thread beside the scan, as cairn serve builds it'}, ` +
        `${perSecond(percentile(verifyHere, 50))} entries/s all on one thread; bundle build (verify + root + the last entry's proof off the verifier's tree + Ed25519 over the tree head and entry hashes + the document of the stored entry texts) ${perSecond(b)} entries/s, ` +
        `${(Buffer.byteLength(jws) / 2 ** 20).toFixed(1)} MiB document; offline verification (one pass, cairn audit verify) ${perSecond(offlineMs)} entries/s`,
      `audit: verification hashes each entry's stored text, which is the entry (schema/021: fields are read from it, columns beside it are not shown), ` +
        `and checks it names its place (prev_hash, seq); recomputing canonical JSON instead ` +
        `(rows stored before 017) ${perSecond(percentile(recompute, 50))} entries/s; of verification on one thread, the Merkle tree alone (leaf + node hashes) takes ${percentile(merkleOnly, 50).toFixed(0)} ms`,
      `audit: bundle build split: verify + root + proof ${percentile(scanPhase, 50).toFixed(0)} ms; payload, signature and document ${percentile(signPhase, 50).toFixed(0)} ms; ` +
        `a version 1 bundle (the whole payload signed, ${(v1Bytes / 2 ** 20).toFixed(1)} MiB JWS) of the same entries, once: ${v1Ms.toFixed(0)} ms, ${(sha / v1Ms).toFixed(2)} of SHA-256`,
    ],
  };
}

const SERVER_ENTRIES = Number(process.env.CAIRN_BENCH_AUDIT_ENTRIES ?? 100_000);

/**
 * (e2) The stored chain through the server: `GET /v1/audit/verify` and a run's receipt over
 * 100,000 stored entries, reading the whole chain (the verified prefix dropped first) and resumed
 * from the prefix an earlier check recorded, beside reading the same canonical texts from
 * PostgreSQL and hashing them with SHA-256 alone.
 */
export async function auditServerBenchmark(client: BenchClient, sql: postgres.Sql): Promise<Section> {
  const seedStart = process.hrtime.bigint();
  await seedAuditEntries(sql, SERVER_ENTRIES);
  const seedMs = msSince(seedStart);
  const run = await submitTrue(client);
  await waitSucceeded(client, run.id, 20);
  const [{ n: size }] = await sql<{ n: number }[]>`SELECT seq::int AS n FROM audit_head`;

  const floor = await timedAsync(3, 0, async () => {
    for await (const rows of sql<{ canonical: string | null }[]>`SELECT canonical FROM audit_entries ORDER BY seq`.cursor(2000)) {
      for (const row of rows) if (row.canonical !== null) sha256(row.canonical);
    }
  });
  const forgetPrefix = () => sql`UPDATE audit_verified SET verified_at = NULL`;
  const verify = async () => {
    const body = expectStatus(await client.request<{ ok: boolean; count: number }>('GET', '/v1/audit/verify'), 200, 'GET /v1/audit/verify');
    if (!body.ok || body.count !== size) throw new Error(`the bench chain does not verify: ${JSON.stringify(body).slice(0, 300)}`);
  };
  const receipt = async () => expectStatus(await client.request('GET', `/v1/runs/${run.id}/receipt`), 200, 'GET /v1/runs/{id}/receipt');
  const whole = await timedAsync(3, 0, async () => {
    await forgetPrefix();
    await verify();
  });
  const resumed = await timedAsync(20, 0, verify);
  const receiptWhole = await timedAsync(3, 0, async () => {
    await forgetPrefix();
    await receipt();
  });
  const receiptResumed = await timedAsync(10, 0, receipt);
  const f = percentile(floor, 50);
  return {
    rows: [
      { metric: `GET /v1/audit/verify, ${size} stored entries, whole read`, value: percentile(whole, 50), baseline: f, unit: 'ms' },
      { metric: `GET /v1/audit/verify, resumed from the verified prefix`, value: percentile(resumed, 50), baseline: f, unit: 'ms' },
      { metric: `GET /v1/runs/{id}/receipt, whole read`, value: percentile(receiptWhole, 50), baseline: f, unit: 'ms' },
      { metric: `GET /v1/runs/{id}/receipt, resumed`, value: percentile(receiptResumed, 50), baseline: f, unit: 'ms' },
    ],
    notes: [
      `audit (stored): ${SERVER_ENTRIES} entries appended by one statement in ${(seedMs / 1000).toFixed(1)} s (CAIRN_BENCH_AUDIT_ENTRIES scales it); ` +
        `baseline is reading every entry's canonical text from PostgreSQL and SHA-256 over it (${Math.round(size / (f / 1000)).toLocaleString('en-US')} entries/s); ` +
        `whole-read verify ${Math.round(size / (percentile(whole, 50) / 1000)).toLocaleString('en-US')} entries/s, ${(f / percentile(whole, 50)).toFixed(2)} of that floor; ` +
        `resumed checks read only what was appended since the last check; a receipt keeps the prefix's leaf hashes in memory and still builds the Merkle tree over all of them for its proofs`,
    ],
  };
}
