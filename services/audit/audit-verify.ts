import { ChainVerifier, type AnchorProblem, type ChainCheckpoint, type AuditAnchor, type ChainBreak } from '../../core/audit/audit-chain';
import { ANCHOR_TYPE } from '../../core/audit/audit-offline';
import { leafOfStoredHash, leafOfStoredHashBinary } from '../../core/audit/merkle';
import { verifyDocument } from '../../core/audit/signing';
import type { Db } from '../../store/db';
import {
  auditHashesUpTo,
  chainHead,
  listAnchors,
  runsReleasedWithoutDecision,
  saveVerifiedPrefix,
  streamAuditEntries,
  verifiedPrefix,
  type StoredAnchor,
  type ChainRow,
} from '../../store/audit';
import type { ServerContext } from '../context';

/**
 * The server's check of the whole stored chain (spec part A 4.15, part B 7.4): every entry
 * recomputes and links, every stored anchor's signature holds with the install key and its signed
 * values are satisfied by the chain, and the chain reaches the head row appends keep. One streaming
 * pass; `GET /v1/audit/verify`, the bundle, receipts and the anchorer all go through it.
 */

/** Ways the stored chain fails something recorded over it, beyond the chain's own anchor checks. */
export type StoredAnchorProblem =
  | AnchorProblem
  /** The anchor's JWS does not verify with the install key, or is not an anchor of this install. */
  | { size: number; problem: 'bad_signature'; detail: string }
  /** The anchor row's size, head or root differ from what its signature covers. */
  | { size: number; problem: 'row_mismatch'; detail: string }
  /** The head row appends lock (audit_head) names an entry the chain does not hold. */
  | { size: number; problem: 'chain_head_mismatch'; detail: string };

export interface WholeChainIntact {
  ok: true;
  count: number;
  head_hash: string;
  merkle_root: string;
  /** Anchors checked (each signed, each satisfied). */
  anchors: number;
}

export interface WholeChainAnchorsUnsatisfied {
  ok: false;
  reason: 'anchor_unsatisfied';
  broke_at: 0;
  broke_seq: 0;
  count: number;
  anchor_problems: StoredAnchorProblem[];
  detail: string;
}

export type WholeChainReport = WholeChainIntact | ChainBreak | WholeChainAnchorsUnsatisfied;

export interface ScanOptions {
  /** Where to read; a transaction when the caller holds a lock in one. Default: the pool. */
  db?: Db;
  /** Keep every leaf hash, in order, for Merkle proofs over the chain just checked. */
  leaves?: boolean;
  /** Sees each entry as read (1-based position), e.g. to keep a window or a run's entries. */
  onEntry?: (entry: ChainRow, position: number) => void;
  /**
   * Check only what follows this verified prefix (the anchorer's rounds between whole scans);
   * anchors within the prefix are checked by signature only.
   */
  from?: ChainCheckpoint;
  /**
   * Resume from the prefix an earlier check recorded as verified (store/audit.ts verifiedPrefix),
   * when no entry was rewritten since and the last whole read is under {@link WHOLE_READ_EVERY_MS}
   * old; record how far this check got. `onEntry` then sees only the entries after the prefix
   * (`ScanResult.resumedFrom` says where it starts); `leaves` still covers the whole chain, from
   * the stored hashes of the prefix.
   */
  resumeVerified?: boolean;
}

/**
 * The longest a verified prefix stands without the whole chain being read again: a rewrite made
 * with the database's triggers disabled (which would not drop the prefix) is found within this.
 */
export const WHOLE_READ_EVERY_MS = 15 * 60 * 1000;

export interface ScanResult {
  report: WholeChainReport;
  /** The stored anchors whose signatures hold, by size. */
  anchors: StoredAnchor[];
  /** Leaf hashes of every entry read, when asked for. */
  leaves: Buffer[];
  /** The last entry's inclusion proof in the tree of the intact chain (read off the verifier's tree), when one was read. */
  lastInclusion?: Buffer[];
  /** Where the intact chain ends, to resume a later check from. */
  checkpoint?: ChainCheckpoint;
  /** Entries taken as verified without being read (`resumeVerified`), 0 after a whole read. */
  resumedFrom: number;
}

type Ctx = Pick<ServerContext, 'sql' | 'identity'>;

/** The report over the whole stored chain and every anchor. */
export async function checkWholeChain(ctx: Ctx): Promise<WholeChainReport> {
  return (await scanWholeChain(ctx)).report;
}

/**
 * Reads the anchors and the head row first, then streams the chain once: anchors are only ever
 * taken over committed entries and appends only add, so everything they name is in the stream.
 */
export async function scanWholeChain(ctx: Ctx, options: ScanOptions = {}): Promise<ScanResult> {
  const db = options.db ?? ctx.sql;
  const stored = await listAnchors(db);
  const head = await chainHead(db);
  const { valid, problems } = await checkAnchorSignatures(ctx, stored);

  let from = options.from;
  let generation: number | undefined;
  const leaves: Buffer[] = [];
  if (options.resumeVerified && from === undefined) {
    // Read before the chain: a rewrite committed after this read raises the generation, so this
    // check cannot record a prefix over it.
    const prefix = await verifiedPrefix(db);
    generation = prefix.generation;
    const fresh = prefix.verified_at !== null && Date.now() - prefix.verified_at.getTime() < WHOLE_READ_EVERY_MS;
    if (fresh && prefix.size > 0 && prefix.size <= head.seq && prefix.head_hash !== null && prefix.frontier !== null) {
      const resumed = { size: prefix.size, head_hash: prefix.head_hash, frontier: prefix.frontier };
      const prefixLeaves = options.leaves ? await leavesOfPrefix(ctx, db, prefix.generation, resumed) : undefined;
      if (prefixLeaves !== null) {
        from = resumed;
        if (prefixLeaves) leaves.push(...prefixLeaves);
      }
    }
  }
  const checkable = valid.filter(({ anchor }) => !from || anchor.size > from.size);
  const verifier = new ChainVerifier(checkable.map(({ anchor }) => anchor), from);
  let hashAtHead: string | undefined = from && head.seq === from.size ? from.head_hash : undefined;
  let position = from?.size ?? 0;
  const resumedFrom = position;
  for await (const entry of streamAuditEntries(db, undefined, position)) {
    position++;
    verifier.push(entry);
    if (position === head.seq) hashAtHead = entry.hash;
    if (options.leaves) leaves.push(leafOfStoredHash(entry.hash));
    options.onEntry?.(entry, position);
  }

  const base = verifier.report();
  if (!base.ok && base.reason === 'chain_break') return { report: base, anchors: [], leaves, resumedFrom };
  if (head.seq > 0 && hashAtHead !== head.hash) {
    problems.push({
      size: head.seq,
      problem: 'chain_head_mismatch',
      detail:
        hashAtHead === undefined
          ? `the chain head row records ${head.seq} entries, the chain holds ${position}`
          : `the chain head row records hash ${head.hash} for seq ${head.seq}, the entry there has ${hashAtHead}`,
    });
  }
  const all: StoredAnchorProblem[] = [...problems, ...(base.ok ? [] : base.anchor_problems)].sort((a, b) => a.size - b.size);
  if (all.length > 0) {
    return {
      report: { ok: false, reason: 'anchor_unsatisfied', broke_at: 0, broke_seq: 0, count: position, anchor_problems: all, detail: all.map(describeProblem).join('; ') },
      anchors: valid.map((v) => v.row),
      leaves,
      resumedFrom,
    };
  }
  const intact = base as Extract<typeof base, { ok: true }>;
  const checkpoint = verifier.checkpoint();
  if (generation !== undefined && checkpoint !== undefined) await saveVerifiedPrefix(db, generation, checkpoint, resumedFrom === 0);
  return {
    report: { ok: true, count: intact.count, head_hash: intact.head_hash, merkle_root: intact.merkle_root, anchors: valid.length },
    anchors: valid.map((v) => v.row),
    leaves,
    lastInclusion: verifier.lastInclusion(),
    checkpoint,
    resumedFrom,
  };
}

/**
 * The leaf hashes of a verified prefix, kept in this process between calls for each database pool
 * (32 bytes an entry, at most {@link LEAF_CACHE_ENTRIES} of them) while the prefix's generation stands: a prefix only
 * grows within a generation, so only the stored hashes past what is kept are read. Null when the
 * stored hashes do not end at the prefix's head (the caller then reads the whole chain).
 */
async function leavesOfPrefix(ctx: Ctx, db: Db, generation: number, prefix: { size: number; head_hash: string }): Promise<Buffer[] | null> {
  const cached = leafCache.get(ctx.sql);
  const kept = cached && cached.generation === generation && cached.size <= prefix.size ? cached : undefined;
  const from = kept?.size ?? 0;
  const hashes = await auditHashesUpTo(db, prefix.size, from);
  const last = hashes.length > 0 ? hashes[hashes.length - 1] : kept?.lastHash;
  if (from + hashes.length !== prefix.size || last !== prefix.head_hash) return null;
  const added = Buffer.alloc(hashes.length * 32);
  hashes.forEach((hash, i) => added.write(leafOfStoredHashBinary(hash), i * 32, 'latin1'));
  const all = kept ? Buffer.concat([kept.leaves, added]) : added;
  if (prefix.size <= LEAF_CACHE_ENTRIES) leafCache.set(ctx.sql, { generation, size: prefix.size, lastHash: prefix.head_hash, leaves: all });
  const leaves: Buffer[] = new Array(prefix.size);
  for (let i = 0; i < prefix.size; i++) leaves[i] = all.subarray(i * 32, i * 32 + 32);
  return leaves;
}

/** At most this many leaf hashes (32 MiB) are kept between calls. */
const LEAF_CACHE_ENTRIES = 1_000_000;
// Per database pool: a process holding several installs (tests, the benchmark) keeps each apart.
const leafCache = new WeakMap<object, { generation: number; size: number; lastHash: string; leaves: Buffer }>();

/**
 * Each anchor's JWS must verify with the install key and sign exactly the row's values; the
 * signed values are what the chain is then held to, so editing a row cannot move an anchor.
 */
async function checkAnchorSignatures(ctx: Ctx, stored: StoredAnchor[]) {
  const valid: { anchor: AuditAnchor; row: StoredAnchor }[] = [];
  const problems: StoredAnchorProblem[] = [];
  for (const row of stored) {
    let payload: Record<string, unknown>;
    try {
      payload = (await verifyDocument(row.signed, ctx.identity.publicJwk)).payload;
    } catch (error) {
      problems.push({ size: row.size, problem: 'bad_signature', detail: `the anchor of size ${row.size} is not signed by this install's key: ${(error as Error).message}` });
      continue;
    }
    if (payload.type !== ANCHOR_TYPE || payload.install_id !== ctx.identity.installId) {
      problems.push({ size: row.size, problem: 'bad_signature', detail: `the anchor of size ${row.size} is not an audit anchor of install ${ctx.identity.installId}` });
      continue;
    }
    const signed = { size: payload.size, head_hash: payload.head_hash, merkle_root: payload.merkle_root };
    const wellFormed =
      typeof signed.size === 'number' &&
      Number.isSafeInteger(signed.size) &&
      signed.size >= 1 &&
      typeof signed.head_hash === 'string' &&
      /^[0-9a-f]{64}$/.test(signed.head_hash) &&
      typeof signed.merkle_root === 'string' &&
      /^[0-9a-f]{64}$/.test(signed.merkle_root);
    if (!wellFormed) {
      problems.push({ size: row.size, problem: 'bad_signature', detail: `the anchor of size ${row.size} signs no well-formed size, head and root` });
      continue;
    }
    if (signed.size !== row.size || signed.head_hash !== row.head_hash || signed.merkle_root !== row.merkle_root) {
      problems.push({
        size: row.size,
        problem: 'row_mismatch',
        detail: `the anchor row of size ${row.size} does not hold what its signature covers (size ${signed.size as number}, head ${signed.head_hash as string}, root ${signed.merkle_root as string})`,
      });
    }
    valid.push({ anchor: signed as AuditAnchor, row });
  }
  return { valid, problems };
}

function describeProblem(problem: StoredAnchorProblem): string {
  switch (problem.problem) {
    case 'missing_entries':
      return `the anchor of size ${problem.size} needs ${problem.expected} entries, the chain has ${problem.actual}`;
    case 'head_mismatch':
      return `the anchor of size ${problem.size} has head hash ${problem.expected}, the chain's is ${problem.actual}`;
    case 'root_mismatch':
      return `the anchor of size ${problem.size} has Merkle root ${problem.expected}, the chain's is ${problem.actual}`;
    default:
      return problem.detail;
  }
}

/** Log fields for a report that is not intact: where it broke, never entry contents. */
export function reportCoordinates(report: Exclude<WholeChainReport, WholeChainIntact>) {
  return {
    reason: report.reason,
    broke_at: report.broke_at,
    broke_seq: report.broke_seq,
    count: report.count,
    ...(report.reason === 'anchor_unsatisfied' ? { anchor_problems: report.anchor_problems } : {}),
    detail: report.detail,
  };
}

/** At most this many runs in unexplained states are named in one report. */
const UNEXPLAINED_LIMIT = 100;

/**
 * `GET /v1/audit/verify`: the whole chain, and the runs whose state the chain does not explain (held
 * at submission, no decision recorded, yet released). A hand in the database can move a run row;
 * it cannot make the chain record the decision that move needed.
 */
export async function verifyInstall(ctx: Ctx) {
  const [{ report }, unexplained] = await Promise.all([
    scanWholeChain(ctx, { resumeVerified: true }),
    runsReleasedWithoutDecision(ctx.sql, UNEXPLAINED_LIMIT),
  ]);
  const unexplainedRuns = unexplained.map((run) => ({ run_id: run.id, status: run.status, why: 'submitted held, and no decision is recorded' }));
  if (!report.ok || unexplainedRuns.length === 0) return { ...report, unexplained_runs: unexplainedRuns };
  return {
    ...report,
    ok: false as const,
    reason: 'run_state_unexplained' as const,
    detail: `${unexplainedRuns.length === UNEXPLAINED_LIMIT ? 'at least ' : ''}${unexplainedRuns.length} run(s) left their hold with no decision recorded on the chain`,
    unexplained_runs: unexplainedRuns,
  };
}
