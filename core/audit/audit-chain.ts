import { CanonicalText, canonicalJson, sha256Hex } from './canonical';
import { MerkleAccumulator, leafOfStoredHashBinary } from './merkle';

/**
 * The tamper-evident audit chain (spec part A 4.15, part B 6.5 and 7.4). Every mutation appends an
 * entry whose `hash` is the hex SHA-256 of the RFC 8785 canonical JSON of all its other fields,
 * `prev_hash` included, so changing, removing, reordering or repeating any entry breaks every hash
 * after it. What the chain alone cannot show is a tail cut off cleanly, or a chain rewritten and
 * relinked from some entry on: anchors, `{size, head_hash, merkle_root}` recorded (and signed)
 * from time to time, catch both. The Merkle root is RFC 9162 over leaves
 * `leafHash(bytes of entry.hash)`, the tree receipts prove inclusion and consistency in.
 *
 * Builders (`chainEntry`, `entryHash`, `anchorOf`) check their preconditions first and throw an
 * `AuditChainError` naming the wrong values. Verifiers (`verifyChain`, `checkAnchors`,
 * `ChainVerifier`) never throw on an entry: rows read from a database may hold anything, and
 * anything wrong is reported as where the chain breaks. They stream: one pass, keeping only the
 * previous entry's seq and hash and a Merkle stack of at most log2(n) hashes.
 */

/** The `prev_hash` of the first entry. */
export const GENESIS_HASH = '0'.repeat(64);

/** One chain entry, as stored. `seq` is 1-based and contiguous; hashes are lowercase hex SHA-256. */
export interface AuditEntry {
  seq: number;
  /** The entry id; a decision's id is its chain entry's id (spec part A 2.7 item 3). */
  id: string;
  /** RFC 3339 UTC with milliseconds, as `Date.prototype.toISOString` writes it. */
  at: string;
  actor: string;
  method: string;
  path: string;
  /** The request fingerprint; a decision's reason is withheld from it. */
  fingerprint: string;
  /** The HTTP status answered, or a word for mutations that are not requests. */
  outcome: number | string;
  body: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

/**
 * An entry as documents carry it (bundles, receipts, evidence): exactly the hashed fields and the
 * hash, whatever else a stored row has beside them.
 */
export function entryOf(row: AuditEntry): AuditEntry {
  const { seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash, hash } = row;
  return { seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash, hash };
}

/** An entry before its hash is known: what `entryHash` hashes. */
export type UnhashedAuditEntry = Omit<AuditEntry, 'hash'>;

/** What a caller supplies to `chainEntry`; seq, prev_hash and hash follow from the previous entry. */
export type AuditEntryFields = Omit<AuditEntry, 'seq' | 'at' | 'prev_hash' | 'hash'> & { at: string | Date };

/** The fields a hash covers, in no particular order (canonical JSON sorts them). */
export const HASHED_FIELDS = ['seq', 'id', 'at', 'actor', 'method', 'path', 'fingerprint', 'outcome', 'body', 'prev_hash'] as const;

/** A checkpoint over the first `size` entries; the store signs it. Hashes are lowercase hex. */
export interface AuditAnchor {
  size: number;
  head_hash: string;
  merkle_root: string;
}

/**
 * Where a verified prefix of the chain ends: its size, last hash and the Merkle frontier (the
 * roots of the perfect subtrees its size decomposes into, largest first, one per set bit of the
 * size). A verifier resumed from it checks only what follows, yet reaches the same head and root
 * as one that read the whole chain.
 */
export interface ChainCheckpoint {
  size: number;
  head_hash: string;
  frontier: string[];
}

/** One way the chain fails an anchor; `expected` is the anchor's value, `actual` the chain's. */
export type AnchorProblem =
  | { size: number; problem: 'missing_entries'; expected: number; actual: number }
  | { size: number; problem: 'head_mismatch' | 'root_mismatch'; expected: string; actual: string };

export interface ChainIntact {
  ok: true;
  count: number;
  /** The last entry's hash, or GENESIS_HASH for an empty chain. */
  head_hash: string;
  /** RFC 9162 root over every entry, hex; what an anchor or a bundle signs. */
  merkle_root: string;
}

/** The first entry that does not recompute (spec part B 7.4). */
export interface ChainBreak {
  ok: false;
  reason: 'chain_break';
  /** One-based position in the list given. */
  broke_at: number;
  /** That entry's seq, or 0 when it has no readable one (not a positive integer). */
  broke_seq: number;
  /** Every entry the list held, also those after the break. */
  count: number;
  detail: string;
}

/** Every entry recomputes but some anchor is not satisfied: how a missing tail or a rewrite shows. */
export interface AnchorsUnsatisfied {
  ok: false;
  reason: 'anchor_unsatisfied';
  /** Zero: no single entry is at fault, the anchor problems say what is. */
  broke_at: 0;
  broke_seq: 0;
  count: number;
  anchor_problems: AnchorProblem[];
  detail: string;
}

export type ChainReport = ChainIntact | ChainBreak;
export type AuditReport = ChainReport | AnchorsUnsatisfied;

/** A precondition broken by the caller; `details` holds the values that were wrong. */
export class AuditChainError extends Error {
  constructor(
    message: string,
    readonly details: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'AuditChainError';
  }
}

const HEX64 = /^[0-9a-f]{64}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * The hex SHA-256 of the canonical JSON of the entry's hashed fields. Properties beyond those
 * (a store's own columns, `hash` itself) are ignored, so a row can be passed as read.
 * Preconditions: every hashed field present with its type; `body` canonicalizable.
 */
export function entryHash(entry: UnhashedAuditEntry): string {
  const problem = typeof entry === 'object' && entry !== null ? shapeProblem(entry as unknown as Record<string, unknown>, false) : 'the entry is not an object';
  if (problem !== undefined) throw new AuditChainError(problem, { seq: (entry as Partial<AuditEntry> | null)?.seq });
  return hashOf(entry);
}

/**
 * The entry that follows `previous` (undefined for the first): seq one higher, prev_hash its hash,
 * and its own hash. `at` is normalized to `toISOString` form and `body` to what its canonical
 * JSON reads back as (Dates become strings, undefined properties go), so what the store writes is
 * exactly what was hashed and a timestamptz or JSON column reads back to the same hash.
 * `previous` is not recomputed: a tampered row must show up in verification, not stop the service
 * from recording anything more.
 * Preconditions: `previous` has a positive integer seq and a 64-hex hash; `at` is RFC 3339 or a
 * valid Date; `id` is non-empty; `body` is a plain object with a canonical JSON form.
 */
export function chainEntry(previous: AuditEntry | undefined, fields: AuditEntryFields): AuditEntry {
  if (previous !== undefined) {
    if (!isPositiveSafeInteger(previous.seq)) {
      throw new AuditChainError(`the previous entry's seq is ${describe(previous.seq)}, not a positive integer`, { seq: previous.seq });
    }
    if (typeof previous.hash !== 'string' || !HEX64.test(previous.hash)) {
      throw new AuditChainError(`the previous entry's hash is ${describe(previous.hash)}, not 64 lowercase hex characters`, {
        seq: previous.seq,
        hash: previous.hash,
      });
    }
  }
  const unhashed = normalize(fields, previous === undefined ? 1 : previous.seq + 1, previous === undefined ? GENESIS_HASH : previous.hash);
  return { ...unhashed, hash: hashOf(unhashed) };
}

/** The entry at `seq` after `prevHash`, checked and normalized as `chainEntry` documents, not yet hashed. */
function normalize(fields: AuditEntryFields, seq: number, prevHash: string): UnhashedAuditEntry {
  const unhashed: UnhashedAuditEntry = {
    seq,
    id: fields.id,
    at: normalizeTime(fields.at),
    actor: fields.actor,
    method: fields.method,
    path: fields.path,
    fingerprint: fields.fingerprint,
    outcome: fields.outcome,
    body: fields.body,
    prev_hash: prevHash,
  };
  const problem = shapeProblem(unhashed as unknown as Record<string, unknown>, false);
  if (problem !== undefined) throw new AuditChainError(problem, { seq: unhashed.seq });
  if (unhashed.id.length === 0) throw new AuditChainError('id must be a non-empty string', { seq: unhashed.seq });
  // Wrapped so a CanonicalJsonError names the path from the entry (`body.items[2]`).
  unhashed.body = (JSON.parse(canonicalJson({ body: unhashed.body })) as { body: Record<string, unknown> }).body;
  return unhashed;
}

/**
 * Checks a chain entry by entry as it is pushed, for callers that stream rows (an async cursor
 * pushes each row, then asks for the report). Remembers the first break and keeps counting after
 * it; checks each anchor when the chain reaches its size.
 */
export class ChainVerifier {
  private position = 0;
  private lastSeq = 0;
  private lastHash = GENESIS_HASH;
  private lastStoredHash = GENESIS_HASH;
  private broken: Omit<ChainBreak, 'count'> | undefined;
  private readonly anchors: AuditAnchor[];
  private nextAnchor = 0;
  private readonly problems: AnchorProblem[] = [];
  private tree = new MerkleAccumulator();
  /** Whether entries are checked for linking; not when only anchors are judged (see `checkAnchors`). */
  private checksLinks = true;

  /**
   * Precondition: every anchor has a positive integer size and 64-hex hashes. Anchors are checked
   * in order of size; equal sizes keep the order given.
   */
  constructor(anchors: readonly AuditAnchor[] = [], from?: ChainCheckpoint) {
    anchors.forEach(checkAnchorShape);
    this.anchors = anchors
      .map((anchor, index) => ({ anchor, index }))
      .sort((a, b) => a.anchor.size - b.anchor.size || a.index - b.index)
      .map(({ anchor }) => ({ size: anchor.size, head_hash: anchor.head_hash, merkle_root: anchor.merkle_root }));
    if (from !== undefined) {
      checkCheckpointShape(from);
      if (this.anchors.some((anchor) => anchor.size <= from.size)) {
        throw new AuditChainError(`an anchor at or before the checkpoint's size ${from.size} cannot be checked from it`, { size: from.size });
      }
      this.position = this.lastSeq = from.size;
      this.lastHash = this.lastStoredHash = from.head_hash;
      this.tree = MerkleAccumulator.resume(from.size, from.frontier);
    }
  }

  /**
   * A verifier that judges only the anchors: each entry takes its place in the tree by its stored
   * hash and is not checked for linking, which anchors do not depend on (a break changes no
   * anchor problem). It has no report of the entries (`report` refuses, `checkpoint` is
   * undefined): read `anchorProblems`.
   */
  static judgingAnchorsOnly(anchors: readonly AuditAnchor[]): ChainVerifier {
    const verifier = new ChainVerifier(anchors);
    verifier.checksLinks = false;
    return verifier;
  }

  /** Where the chain checked so far ends, to resume from later; undefined while it is empty or broken. */
  checkpoint(): ChainCheckpoint | undefined {
    if (!this.checksLinks || this.broken !== undefined || this.position === 0) return undefined;
    return { size: this.position, head_hash: this.lastHash, frontier: this.tree.frontier() };
  }

  /**
   * The inclusion proof of the last entry pushed in the tree of every entry pushed (its stored
   * hash as the leaf), read off the tree already built; undefined before the first push.
   */
  lastInclusion(): Buffer[] | undefined {
    return this.tree.lastPath();
  }

  /** Entries pushed so far. */
  get count(): number {
    return this.position;
  }

  /**
   * Checks the next entry. An entry may carry `canonical`, the text its hash was made over as a
   * store keeps it (`{ seq, hash, canonical }` is enough): that text is the entry, checked by its
   * bytes alone (see `check`). An entry without it is recomputed from its fields, which names
   * what is wrong.
   */
  push(entry: unknown): void {
    this.position++;
    const stored = storedHash(entry);
    let linked = false;
    if (this.checksLinks && this.broken === undefined) {
      const detail = this.check(entry);
      if (detail !== undefined) {
        this.broken = { ok: false, reason: 'chain_break', broke_at: this.position, broke_seq: readableSeq(entry), detail };
      } else {
        this.lastSeq = (entry as AuditEntry).seq;
        this.lastHash = stored;
        linked = true;
      }
    }
    this.lastStoredHash = stored;
    // Built from the hashes as stored, also past a break, so anchors are judged on what is there;
    // a hash that is not hex still makes a leaf (of its text), which no honest anchor covers. A
    // linked entry's hash equals the SHA-256 hex `check` computed, so its digits need no look.
    if (linked) this.tree.pushHexHash(stored);
    else this.tree.push(leafOfStoredHashBinary(stored));
    while (this.nextAnchor < this.anchors.length && this.anchors[this.nextAnchor].size === this.position) {
      this.checkAnchor(this.anchors[this.nextAnchor++]);
    }
  }

  /** Anchor problems so far, plus `missing_entries` for every anchor beyond the entries pushed. */
  anchorProblems(): AnchorProblem[] {
    const missing: AnchorProblem[] = this.anchors.slice(this.nextAnchor).map((anchor) => ({
      size: anchor.size,
      problem: 'missing_entries' as const,
      expected: anchor.size,
      actual: this.position,
    }));
    return [...this.problems, ...missing];
  }

  /** The first break, else any anchor problems, else the intact chain's head and root. */
  report(): AuditReport {
    if (!this.checksLinks) throw new AuditChainError('a verifier judging anchors only did not check the entries: read anchorProblems', {});
    if (this.broken !== undefined) return { ...this.broken, count: this.position };
    const anchorProblems = this.anchorProblems();
    if (anchorProblems.length > 0) {
      return {
        ok: false,
        reason: 'anchor_unsatisfied',
        broke_at: 0,
        broke_seq: 0,
        count: this.position,
        anchor_problems: anchorProblems,
        detail: anchorProblems.map(describeProblem).join('; '),
      };
    }
    return { ok: true, count: this.position, head_hash: this.lastHash, merkle_root: this.tree.root().toString('hex') };
  }

  /** Why the entry at the current position does not continue the chain, or undefined when it does. */
  private check(entry: unknown): string | undefined {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return `the entry is ${describe(entry)}, not an object`;
    const record = entry as Record<string, unknown>;
    const expectedSeq = this.lastSeq + 1;
    if (!isPositiveSafeInteger(record.seq)) return `seq is ${describe(record.seq)}, not a positive integer; expected ${expectedSeq}`;
    if (record.seq !== expectedSeq) {
      return this.position === 1
        ? `seq is ${record.seq}, expected 1 for the first entry`
        : `seq is ${record.seq}, expected ${expectedSeq}, one more than the previous entry's ${this.lastSeq}`;
    }
    // A stored entry that carries the text its hash covers is that text: it continues the chain
    // when it ends by naming this place (the previous hash and this seq) and hashes to its hash.
    // Its other fields are read from the text by the store, never beside it, so nothing is
    // compared and nothing parsed: verification is hashing the bytes as they are kept.
    const canonical = record.canonical;
    if (typeof canonical === 'string') {
      if (!canonical.endsWith(chainLinkSuffix(this.lastHash, expectedSeq))) {
        const whose = this.position === 1 ? 'the genesis hash' : "the previous entry's hash";
        return `the stored text does not end with prev_hash ${whose} ${this.lastHash} and seq ${expectedSeq}`;
      }
      const hashed = sha256Hex(canonical);
      return hashed === record.hash ? undefined : `hash is ${describe(record.hash)} but the stored text hashes to ${hashed}`;
    }
    if (record.prev_hash !== this.lastHash) {
      const whose = this.position === 1 ? 'the genesis hash' : "the previous entry's hash";
      return `prev_hash is ${describe(record.prev_hash)}, expected ${whose} ${this.lastHash}`;
    }
    const problem = shapeProblem(record, true);
    if (problem !== undefined) return problem;
    let recomputed: string;
    try {
      recomputed = hashOf(record as unknown as UnhashedAuditEntry);
    } catch (error) {
      return `the entry has no canonical form: ${(error as Error).message}`;
    }
    if (recomputed !== record.hash) return `hash is ${record.hash as string} but the entry recomputes to ${recomputed}`;
    return undefined;
  }

  private checkAnchor(anchor: AuditAnchor): void {
    if (anchor.head_hash !== this.lastStoredHash) {
      this.problems.push({ size: anchor.size, problem: 'head_mismatch', expected: anchor.head_hash, actual: this.lastStoredHash });
    }
    const root = this.tree.root().toString('hex');
    if (anchor.merkle_root !== root) {
      this.problems.push({ size: anchor.size, problem: 'root_mismatch', expected: anchor.merkle_root, actual: root });
    }
  }
}

/**
 * The first break in the chain, or its count, head hash and Merkle root. With anchors, a chain
 * that recomputes but fails one reports `anchor_unsatisfied`; a break always comes first.
 * Consumes the whole iterable (to count it) holding one entry at a time.
 */
export function verifyChain(entries: Iterable<unknown>): ChainReport;
export function verifyChain(entries: Iterable<unknown>, anchors: readonly AuditAnchor[]): AuditReport;
export function verifyChain(entries: Iterable<unknown>, anchors: readonly AuditAnchor[] = []): AuditReport {
  const verifier = new ChainVerifier(anchors);
  for (const entry of entries) verifier.push(entry);
  return verifier.report();
}

/**
 * Every way the chain fails the anchors, judged on the hashes as stored, whether or not the
 * entries recompute (that is `verifyChain`'s question). Empty when all are satisfied.
 * Precondition: as `ChainVerifier`'s constructor.
 */
export function checkAnchors(entries: Iterable<unknown>, anchors: readonly AuditAnchor[]): AnchorProblem[] {
  if (anchors.length === 0) return [];
  const verifier = ChainVerifier.judgingAnchorsOnly(anchors);
  for (const entry of entries) verifier.push(entry);
  return verifier.anchorProblems();
}

/**
 * The anchor over the first `size` entries (all of them when omitted). Reads no further than
 * `size`. An anchor vouches for what it covers, so a chain that does not verify up to `size` is
 * refused rather than anchored.
 * Preconditions: `size` is a positive integer; the chain has at least that many entries, at least
 * one, and they verify.
 */
export function anchorOf(entries: Iterable<unknown>, size?: number): AuditAnchor {
  if (size !== undefined && !isPositiveSafeInteger(size)) {
    throw new AuditChainError(`anchor size ${describe(size)} is not a positive integer`, { size });
  }
  const verifier = new ChainVerifier();
  for (const entry of entries) {
    verifier.push(entry);
    if (verifier.count === size) break;
  }
  const report = verifier.report();
  if (!report.ok) {
    const { broke_at, broke_seq, detail } = report;
    throw new AuditChainError(`will not anchor a chain that breaks at position ${broke_at}: ${detail}`, { broke_at, broke_seq });
  }
  if (report.count === 0) throw new AuditChainError('will not anchor an empty chain', { size: 0 });
  if (size !== undefined && report.count < size) {
    throw new AuditChainError(`the chain has ${report.count} entries, fewer than the anchor size ${size}`, { size, count: report.count });
  }
  return { size: report.count, head_hash: report.head_hash, merkle_root: report.merkle_root };
}

/**
 * An entry's canonical JSON split where the chain links it: everything but `prev_hash` and `seq`
 * (which sort last among the hashed fields), and the closing part that names them. The store
 * appends an entry in one statement by hashing `prefix + chainLinkSuffix(previous hash, seq)`
 * in PostgreSQL under the head row's lock; `entryHash` of the stored entry is the same hash.
 * Precondition: `fields` as `chainEntry` normalizes them (an ISO `at`, a canonical-JSON `body`).
 */
export function entryCanonicalPrefix(fields: Omit<UnhashedAuditEntry, 'seq' | 'prev_hash'>): string {
  const { id, at, actor, method, path, fingerprint, outcome, body } = fields;
  const whole = canonicalJson({ id, at, actor, method, path, fingerprint, outcome, body });
  return whole.slice(0, -1);
}

/** The hashed fields that sort after `hash`, in order: where a bundle entry's text takes it. */
const FIELDS_AFTER_HASH = ['id', 'method', 'outcome', 'path', 'prev_hash', 'seq'];

/**
 * A stored entry with its `hash`, in canonical JSON, as a bundle carries it: made from the text
 * the hash covers by inserting `"hash"` where it sorts (after `fingerprint`, before `id`), rather
 * than by parsing and serializing the entry again. The place is the last `,"id":"` of the text,
 * taken only once what follows it is, byte for byte, the canonical JSON of exactly the fields
 * that sort after `hash`. A row without the text is its fields ({@link entryOf}); a text that is
 * not the one its hash covers is never carried.
 */
export function entryForBundle(row: { hash: string; canonical?: string | null } & Partial<AuditEntry>): AuditEntry | CanonicalText {
  const { canonical, hash } = row;
  if (typeof canonical !== 'string') return entryOf(row as AuditEntry);
  if (sha256Hex(canonical) !== hash) throw new AuditChainError('an entry\'s stored text is not the text its hash covers', { seq: row.seq ?? 0 });
  const at = canonical.lastIndexOf(',"id":"') + 1;
  if (at > 0 && tailIsCanonical(canonical.slice(at))) {
    return new CanonicalText(`${canonical.slice(0, at)}"hash":"${hash}",${canonical.slice(at)}`);
  }
  const entry = entryFromStoredText(canonical, hash);
  if (!entry) throw new AuditChainError('an entry\'s stored text is not an entry', { seq: row.seq ?? 0 });
  return entryOf(entry);
}

/** Whether `tail` (`"id":…}`) is the canonical JSON of exactly {@link FIELDS_AFTER_HASH}, once made an object. */
function tailIsCanonical(tail: string): boolean {
  const text = `{${tail}`;
  const parsed = parseJsonObject(text);
  if (!parsed) return false;
  const keys = Object.keys(parsed);
  return keys.length === FIELDS_AFTER_HASH.length && keys.every((key, i) => key === FIELDS_AFTER_HASH[i]) && canonicalJson(parsed) === text;
}

/** The end of an entry's canonical JSON after {@link entryCanonicalPrefix}. */
export function chainLinkSuffix(prevHash: string, seq: number): string {
  return `,"prev_hash":"${prevHash}","seq":${seq}}`;
}

/**
 * The fields of an entry as the chain hashes them, checked and normalized, before its place in
 * the chain (seq and prev_hash) is known.
 */
export function normalizedEntryFields(fields: AuditEntryFields): Omit<UnhashedAuditEntry, 'seq' | 'prev_hash'> {
  // Placed provisionally first in the chain only so the checks read as they do for chainEntry.
  const { seq: _seq, prev_hash: _prev, ...rest } = normalize(fields, 1, GENESIS_HASH);
  return rest;
}

function hashOf(entry: UnhashedAuditEntry): string {
  // Picked by name: extra properties on a row never reach the hash.
  const { seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash } = entry;
  return sha256Hex(canonicalJson({ seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash }));
}

/** The first field of a wrong type, as a sentence; `withHash` also asks for a 64-hex `hash`. */
function shapeProblem(entry: Record<string, unknown>, withHash: boolean): string | undefined {
  if (!isPositiveSafeInteger(entry.seq)) return `seq is ${describe(entry.seq)}, not a positive integer`;
  for (const field of ['id', 'at', 'actor', 'method', 'path', 'fingerprint'] as const) {
    if (typeof entry[field] !== 'string') return `${field} is ${describe(entry[field])}, not a string`;
  }
  const outcome = entry.outcome;
  if (!(typeof outcome === 'string' || (typeof outcome === 'number' && Number.isFinite(outcome)))) {
    return `outcome is ${describe(outcome)}, not a string or a finite number`;
  }
  const body = entry.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return `body is ${describe(body)}, not an object`;
  for (const field of withHash ? (['prev_hash', 'hash'] as const) : (['prev_hash'] as const)) {
    const value = entry[field];
    if (typeof value !== 'string' || !HEX64.test(value)) return `${field} is ${describe(value)}, not 64 lowercase hex characters`;
  }
  return undefined;
}

function normalizeTime(at: string | Date): string {
  if (at instanceof Date) {
    if (Number.isNaN(at.getTime())) throw new AuditChainError('at is an invalid Date', { at: String(at) });
    return at.toISOString();
  }
  const time = typeof at === 'string' && RFC3339.test(at) ? new Date(at) : undefined;
  if (time === undefined || Number.isNaN(time.getTime())) {
    throw new AuditChainError(`at is ${describe(at)}, not an RFC 3339 time`, { at });
  }
  return time.toISOString();
}

function checkAnchorShape(anchor: AuditAnchor, index: number): void {
  if (typeof anchor !== 'object' || anchor === null) {
    throw new AuditChainError(`anchor ${index} is ${describe(anchor)}, not an object`, { index });
  }
  if (!isPositiveSafeInteger(anchor.size)) {
    throw new AuditChainError(`anchor ${index} has size ${describe(anchor.size)}, not a positive integer`, { index, size: anchor.size });
  }
  for (const field of ['head_hash', 'merkle_root'] as const) {
    if (typeof anchor[field] !== 'string' || !HEX64.test(anchor[field])) {
      throw new AuditChainError(`anchor ${index} has ${field} ${describe(anchor[field])}, not 64 lowercase hex characters`, {
        index,
        size: anchor.size,
        [field]: anchor[field],
      });
    }
  }
}

function checkCheckpointShape(from: ChainCheckpoint): void {
  if (typeof from !== 'object' || from === null || !isPositiveSafeInteger(from.size)) {
    throw new AuditChainError(`a checkpoint needs a positive integer size, not ${describe(from?.size)}`, {});
  }
  if (typeof from.head_hash !== 'string' || !HEX64.test(from.head_hash)) {
    throw new AuditChainError(`the checkpoint's head_hash is ${describe(from.head_hash)}, not 64 lowercase hex characters`, { size: from.size });
  }
  const expected = from.size.toString(2).split('').filter((bit) => bit === '1').length;
  if (!Array.isArray(from.frontier) || from.frontier.length !== expected || !from.frontier.every((h) => typeof h === 'string' && HEX64.test(h))) {
    throw new AuditChainError(`a checkpoint of size ${from.size} needs a frontier of ${expected} 64-hex hashes`, { size: from.size });
  }
}

/**
 * The entry a store keeps as the text its hash covers: the hashed fields read from that text, and
 * the hash beside them. Whatever else the row holds (columns written beside the text) is not the
 * entry. Undefined when the text is not a JSON object, which verification reports as a break.
 */
export function entryFromStoredText(canonical: string, hash: string): AuditEntry | undefined {
  const parsed = parseJsonObject(canonical);
  if (!parsed) return undefined;
  const { seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash } = parsed as unknown as AuditEntry;
  return { seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash, hash };
}

/** The JSON object `text` holds, or undefined when it holds something else or is not JSON. */
function parseJsonObject(text: string): Record<string, unknown> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
}

function storedHash(entry: unknown): string {
  const hash = typeof entry === 'object' && entry !== null ? (entry as { hash?: unknown }).hash : undefined;
  return typeof hash === 'string' ? hash : '';
}

function readableSeq(entry: unknown): number {
  const seq = typeof entry === 'object' && entry !== null ? (entry as { seq?: unknown }).seq : undefined;
  return isPositiveSafeInteger(seq) ? seq : 0;
}

function isPositiveSafeInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1;
}

function describeProblem(problem: AnchorProblem): string {
  if (problem.problem === 'missing_entries') {
    return `the anchor of size ${problem.size} needs ${problem.expected} entries, the chain has ${problem.actual}`;
  }
  const what = problem.problem === 'head_mismatch' ? 'head hash' : 'Merkle root';
  return `the anchor of size ${problem.size} has ${what} ${problem.expected}, the chain's is ${problem.actual}`;
}

/** A value as an error shows it: strings quoted (long ones summarized), others by kind. */
function describe(value: unknown): string {
  if (typeof value === 'string') return value.length > 100 ? `a ${value.length}-character string` : JSON.stringify(value);
  if (typeof value === 'number' || value === undefined || value === null) return String(value);
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
