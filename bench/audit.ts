import { ChainVerifier, chainEntry, type AuditEntry } from '../core/audit-chain';
import { BUNDLE_TYPE, verifyBundle } from '../core/audit-offline';
import { canonicalJson } from '../core/canonical';
import { inclusionProof, leafHash } from '../core/merkle';
import { sha256 } from '../core/sha256';
import { generateSigningKey, signDocument } from '../core/signing';
import type { Section } from './report';
import { msSince, percentile } from './stats';

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

function timed(rounds: number, work: () => unknown): number[] {
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = process.hrtime.bigint();
    work();
    samples.push(msSince(start));
  }
  return samples;
}

async function timedAsync(rounds: number, work: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = process.hrtime.bigint();
    await work();
    samples.push(msSince(start));
  }
  return samples;
}

/**
 * (d) The audit chain in memory, no database: `ChainVerifier` over 100,000 entries, and building a
 * full signed bundle of them as `GET /v1/audit/bundle` does (verify, leaves and Merkle root, the
 * last entry's inclusion proof, canonical JSON, Ed25519 signature), each beside SHA-256 alone
 * over the same bytes: the canonical JSON of every entry, the floor any verification pays.
 */
export async function auditBenchmark(): Promise<Section> {
  const buildStart = process.hrtime.bigint();
  const entries = buildChain(ENTRIES);
  const hashed = entries.map(({ hash: _hash, ...rest }) => Buffer.from(canonicalJson(rest), 'utf8'));
  const bytes = hashed.reduce((total, b) => total + b.length, 0);
  const buildMs = msSince(buildStart);
  const key = await generateSigningKey();

  const shaOnly = timed(ROUNDS, () => {
    for (const b of hashed) sha256(b);
  });
  const verify = timed(ROUNDS, () => {
    const verifier = new ChainVerifier();
    for (const entry of entries) verifier.push(entry);
    const report = verifier.report();
    if (!report.ok || report.count !== ENTRIES) throw new Error(`the bench chain does not verify: ${JSON.stringify(report)}`);
  });

  let jws = '';
  const scanPhase: number[] = [];
  const signPhase: number[] = [];
  const bundle = await timedAsync(ROUNDS, async () => {
    const scanStart = process.hrtime.bigint();
    const verifier = new ChainVerifier();
    const leaves: Buffer[] = [];
    for (const entry of entries) {
      verifier.push(entry);
      leaves.push(leafHash(Buffer.from(entry.hash, 'hex')));
    }
    const report = verifier.report();
    if (!report.ok) throw new Error('the bench chain does not verify');
    const lastInclusion = inclusionProof(ENTRIES - 1, ENTRIES, leaves).map((h) => h.toString('hex'));
    scanPhase.push(msSince(scanStart));
    const signStart = process.hrtime.bigint();
    jws = await signDocument(
      {
        type: BUNDLE_TYPE,
        install_id: 'ins_bench',
        key_id: key.keyId,
        issued_at: new Date().toISOString(),
        size: report.count,
        head_hash: report.head_hash,
        merkle_root: report.merkle_root,
        anchors: [],
        window: { after: 0, prev_hash: '0'.repeat(64) },
        entries,
        last_inclusion: lastInclusion,
      },
      key.privateJwk,
      key.keyId,
    );
    signPhase.push(msSince(signStart));
  });
  // How much of signing is the canonical JSON of the whole payload, the rest being JWS encoding and Ed25519.
  const canonicalOnly = timed(ROUNDS, () => canonicalJson({ entries }));

  const offlineStart = process.hrtime.bigint();
  const offline = await verifyBundle(jws, key.publicJwk);
  const offlineMs = msSince(offlineStart);
  if (!offline.ok) throw new Error(`the bench bundle does not verify offline: ${JSON.stringify(offline.problems.slice(0, 3))}`);

  const sha = percentile(shaOnly, 50);
  const v = percentile(verify, 50);
  const b = percentile(bundle, 50);
  const perSecond = (ms: number) => Math.round(ENTRIES / (ms / 1000)).toLocaleString('en-US');
  return {
    rows: [
      { metric: `ChainVerifier over ${ENTRIES / 1000}k entries`, value: v, baseline: sha, unit: 'ms' },
      { metric: `signed bundle of ${ENTRIES / 1000}k entries`, value: b, baseline: sha, unit: 'ms' },
      { metric: `offline verify of that bundle`, value: offlineMs, baseline: sha, unit: 'ms' },
    ],
    notes: [
      `audit: ${ENTRIES} entries built with chainEntry in ${(buildMs / 1000).toFixed(1)} s (not timed), ${(bytes / 2 ** 20).toFixed(1)} MiB of canonical JSON; ` +
        `median of ${ROUNDS} rounds; baseline is SHA-256 alone over those bytes (${perSecond(sha)} entries/s)`,
      `audit: ChainVerifier ${perSecond(v)} entries/s; bundle build (verify + leaves + root + proof + canonical JSON + Ed25519) ${perSecond(b)} entries/s, ` +
        `${(Buffer.byteLength(jws) / 2 ** 20).toFixed(1)} MiB JWS; offline verification (one pass, cairn audit verify) ${perSecond(offlineMs)} entries/s`,
      `audit: bundle build split: verify + leaves + root + proof ${percentile(scanPhase, 50).toFixed(0)} ms; signDocument ${percentile(signPhase, 50).toFixed(0)} ms, ` +
        `of which canonical JSON of the whole payload ${percentile(canonicalOnly, 50).toFixed(0)} ms and JWS encoding + Ed25519 (node:crypto) the rest`,
    ],
  };
}
