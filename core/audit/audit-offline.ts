import { GENESIS_HASH, checkAnchors, entryHash, type AuditAnchor } from './audit-chain';
import { BUNDLE_TYPE, readBundleDocument, type BundleDocumentV2 } from './audit-bundle';
import { MerkleAccumulator, leafHash, verifyConsistency, verifyInclusion } from './merkle';
import { opensCommitment } from './reason-commitment';
import { SignatureError, documentKeyId, jwkThumbprint, verifyDocument } from './signing';
import { sha256Hex } from '../sha256';

/**
 * Offline verification of the audit documents the service signs (spec part A 4.15, 2.7 item 4):
 * an audit bundle (`GET /v1/audit/bundle`) and a run receipt (`GET /v1/runs/{id}/receipt`), each
 * a compact JWS over RFC 8785 canonical JSON, checked against a key pinned from the seal document
 * (`GET /.well-known/seal.json`) or given as a bare JWK. Needs no server and no database: what
 * `cairn audit verify` runs, and what a relying party can reimplement from docs/api.md.
 *
 * Every check runs even after one fails, so a report lists each failure with where it is
 * (`signature`, `entries[3] (seq 4)`, `anchors[0] (size 12)`, `decisions[1] (dec_...)`...).
 * Nothing here throws on bad input: a document read from disk may hold anything.
 */

/** `type` of each signed document. */
export const ANCHOR_TYPE = 'cairn.audit.anchor';
export { BUNDLE_TYPE };
export const RECEIPT_TYPE = 'cairn.run.receipt';

/**
 * Chain entries a sparse receipt leaves out (spec part A 4.1 receipt): the decisions and what
 * follows from them, and the run's outcome. What remains proves the run was submitted and what
 * was done to it, without its outcome or anyone's reasons.
 */
export const SPARSE_WITHHELD_KINDS: ReadonlySet<string> = new Set(['run.decision', 'run.correction', 'run.redaction', 'run.ended']);

export interface OfflineProblem {
  /** Where the failure is: `signature`, `key_id`, `payload`, `entries[2] (seq 3)`, `anchors[0] (size 5)`, ... */
  where: string;
  detail: string;
}

export interface OfflineReport {
  ok: boolean;
  kind: 'bundle' | 'receipt' | 'unknown';
  /** One line for each thing that was checked and held. */
  checked: string[];
  problems: OfflineProblem[];
  /** One line: what the document is and whether it holds. */
  summary: string;
}

const HEX64 = /^[0-9a-f]{64}$/;

/** The anchor, bundle or receipt payload fields a verifier reads; everything else is ignored. */
type Payload = Record<string, unknown>;

/** Collects checks and problems for one document. */
class Findings {
  readonly checked: string[] = [];
  readonly problems: OfflineProblem[] = [];
  ok(line: string): void {
    this.checked.push(line);
  }
  fail(where: string, detail: string): void {
    this.problems.push({ where, detail });
  }
}

/** A pinned key: the JWK a signature must verify with, and the install the seal names (if any). */
interface Pin {
  keys: Record<string, unknown>[];
  installId?: string;
}

/**
 * Verifies an audit bundle of either version (core/audit/audit-bundle.ts): signature and key id
 * against the pinned key; entries recompute and link from `window.prev_hash` (the genesis hash
 * when `after` is 0); for a full bundle the recomputed Merkle root and head hash equal the signed
 * ones; every anchor verifies and is satisfied by the entries it covers; `last_inclusion` proves
 * the last entry in the signed tree. Version 1 is a compact JWS holding the entries; version 2 a
 * JSON document whose signed part lists the entries' hashes, each entry beside it recomputing to
 * the signed hash at its place.
 */
export async function verifyBundle(document: unknown, sealOrJwk: unknown): Promise<OfflineReport> {
  return guarded('bundle', async (f) => {
    const text = typeof document === 'string' ? document.trim() : document;
    const v2 = typeof text === 'string' ? readBundleDocument(text) : undefined;
    if (v2) return checkBundleV2(v2, sealOrJwk, f);
    const opened = await openDocument(text, sealOrJwk, BUNDLE_TYPE, f);
    if (!opened) return;
    if (opened.payload.version !== undefined) {
      f.fail('payload.version', `a bundle that is a bare JWS is version 1, which has no version member; this one says ${describe(opened.payload.version)} (a version 2 signed part is verified inside its document)`);
    }
    await checkBundle(opened.payload, opened.payload.entries, opened.key, opened.pin, f);
  });
}

/**
 * Version 2: the document's shape and its signed part, then every bundle check over the entries
 * carried, each given the hash the signed `entry_hashes` holds at its place (a version 2 entry
 * carries none of its own): so each must recompute to the signed hash, link to the one before it,
 * and the signed hashes make the Merkle root.
 */
async function checkBundleV2(doc: BundleDocumentV2, sealOrJwk: unknown, f: Findings): Promise<void> {
  if (doc.type !== BUNDLE_TYPE) f.fail('document.type', `type is ${describe(doc.type)}, expected ${JSON.stringify(BUNDLE_TYPE)}`);
  if (doc.version !== 2) f.fail('document.version', `version is ${describe(doc.version)}, expected 2 (a version 1 bundle is a bare compact JWS)`);
  const opened = await openDocument(doc.signed, sealOrJwk, BUNDLE_TYPE, f);
  if (!opened) return;
  const p = opened.payload;
  if (p.version !== 2) f.fail('payload.version', `the signed part's version is ${describe(p.version)}, the document's is 2`);
  if (!Array.isArray(doc.entries)) {
    f.fail('document.entries', 'entries is missing or not a list');
    return;
  }
  if (!Array.isArray(p.entry_hashes)) {
    f.fail('payload.entry_hashes', 'entry_hashes is missing or not a list');
    return;
  }
  const carried = doc.entries as unknown[];
  const hashes = p.entry_hashes as unknown[];
  if (hashes.length !== carried.length) f.fail('payload.entry_hashes', `the signed part lists ${hashes.length} entry hashes, the document carries ${carried.length} entries`);
  const after = isRecord(p.window) ? (nonNegativeInteger(p.window.after) ?? 0) : 0;
  // An entry whose text in the document hashes to its signed hash is the text the chain hashed:
  // its fields are read from those bytes, so recomputing its canonical form would find the same.
  const texts = doc.entryTexts?.length === carried.length ? doc.entryTexts : undefined;
  const hashedAsCarried = new Set<number>();
  const entries = carried.map((entry, i) => {
    if (!isRecord(entry)) return entry;
    if ('hash' in entry) f.fail(`entries[${i}] (seq ${after + i + 1})`, 'a version 2 entry carries no hash: its hash is the signed entry_hashes at its place');
    else if (texts !== undefined && typeof hashes[i] === 'string' && sha256Hex(texts[i]) === hashes[i]) hashedAsCarried.add(i);
    return { ...entry, hash: hashes[i] };
  });
  if (hashes.length === carried.length) f.ok(`entry hashes: the ${carried.length} entries carried are held to the ${hashes.length} signed hashes, in order`);
  await checkBundle(p, entries, opened.key, opened.pin, f, hashedAsCarried);
}

/**
 * Verifies a run receipt: signature and key id against the pinned key; each entry recomputes and
 * its inclusion proof holds against the signed Merkle root; every decision reason that comes with
 * its random value opens the commitment in its chain entry; the consistency proof, if present.
 */
export async function verifyReceipt(jws: unknown, sealOrJwk: unknown): Promise<OfflineReport> {
  return guarded('receipt', async (f) => {
    const opened = await openDocument(jws, sealOrJwk, RECEIPT_TYPE, f);
    if (opened) checkReceipt(opened.payload, f);
  });
}

/**
 * A bundle or a receipt, told apart by the `type` its payload claims. A document whose payload
 * cannot be read is still checked for its signature, so a damaged file says what is damaged.
 */
export async function verifyAuditDocument(jws: unknown, sealOrJwk: unknown): Promise<OfflineReport> {
  // A version 2 bundle is a JSON document; everything else Cairn signs is a bare compact JWS.
  if (typeof jws === 'string' && jws.trim().startsWith('{')) return verifyBundle(jws, sealOrJwk);
  const type = typeof jws === 'string' ? decodePayload(jws.trim())?.type : undefined;
  if (type === BUNDLE_TYPE) return verifyBundle(jws, sealOrJwk);
  if (type === RECEIPT_TYPE) return verifyReceipt(jws, sealOrJwk);
  return guarded('unknown', async (f) => {
    const opened = await openDocument(jws, sealOrJwk, undefined, f);
    if (opened) f.fail('payload.type', `type is ${describe(type)}, neither ${BUNDLE_TYPE} nor ${RECEIPT_TYPE}`);
  });
}

async function guarded(kind: OfflineReport['kind'], work: (f: Findings) => Promise<void>): Promise<OfflineReport> {
  const f = new Findings();
  try {
    await work(f);
  } catch (error) {
    // A bug or a value no check anticipated; still a report, never an exception.
    f.fail('document', `verification stopped: ${(error as Error)?.message ?? String(error)}`);
  }
  const ok = f.problems.length === 0;
  const summary = ok
    ? `${kind} verified: ${f.checked.length} checks hold`
    : `${kind === 'unknown' ? 'the document' : kind} does NOT verify: ${f.problems.length} problem${f.problems.length === 1 ? '' : 's'}`;
  return { ok, kind, checked: f.checked, problems: f.problems, summary };
}

// ---------------------------------------------------------------------------------------------
// The signed document and its key

function decodePayload(jws: string): Payload | undefined {
  const parts = jws.split('.');
  if (parts.length !== 3 || !/^[A-Za-z0-9_-]+$/.test(parts[1])) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8'));
    return isRecord(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function readPin(sealOrJwk: unknown, f: Findings): Pin | undefined {
  if (!isRecord(sealOrJwk)) {
    f.fail('seal', 'the seal is not a JSON object (a seal document or an Ed25519 JWK)');
    return undefined;
  }
  if (Array.isArray(sealOrJwk.keys)) {
    const keys = sealOrJwk.keys.filter(isRecord);
    if (keys.length === 0) {
      f.fail('seal', 'the seal document lists no keys');
      return undefined;
    }
    return { keys, installId: typeof sealOrJwk.install_id === 'string' ? sealOrJwk.install_id : undefined };
  }
  if (typeof sealOrJwk.kty === 'string') return { keys: [sealOrJwk] };
  f.fail('seal', 'the seal is neither a seal document (with keys) nor a JWK (with kty)');
  return undefined;
}

/** The pinned key the document names by its kid, or a problem saying whose key it is. */
async function choosePinnedKey(jws: string, pin: Pin, f: Findings): Promise<Record<string, unknown> | undefined> {
  const kid = documentKeyId(jws);
  const pinned: string[] = [];
  for (const key of pin.keys) {
    let thumbprint: string;
    try {
      thumbprint = await jwkThumbprint(key);
    } catch (error) {
      f.fail('seal', `a pinned key is not usable: ${(error as Error).message}`);
      continue;
    }
    pinned.push(thumbprint);
    if (thumbprint === kid) return key;
  }
  if (pinned.length > 0) {
    f.fail(
      'key_id',
      kid === undefined
        ? 'the document names no signing key (kid)'
        : `the document is signed by key ${kid}, not by the pinned key ${pinned.join(', ')}: it is another install's, or the seal is not this install's`,
    );
  }
  return undefined;
}

interface Opened {
  payload: Payload;
  /** The pinned key the signature verified with; undefined when it did not. */
  key?: Record<string, unknown>;
  pin?: Pin;
}

/**
 * Checks the signature and returns the payload, also when the signature fails (so a tampered
 * document still shows what else is wrong in it). Undefined when there is no payload to read.
 */
async function openDocument(jws: unknown, sealOrJwk: unknown, type: string | undefined, f: Findings): Promise<Opened | undefined> {
  if (typeof jws !== 'string') {
    f.fail('document', 'the document is not text (a compact JWS)');
    return undefined;
  }
  const text = jws.trim();
  const pin = readPin(sealOrJwk, f);
  let key = pin ? await choosePinnedKey(text, pin, f) : undefined;
  let verified = false;
  if (key) {
    try {
      await verifyDocument(text, key);
      verified = true;
      f.ok(`signature: EdDSA over the canonical payload verifies with the pinned key ${documentKeyId(text)}`);
    } catch (error) {
      const reason = error instanceof SignatureError ? error.reason : 'signature';
      const where = reason === 'payload' ? 'payload' : reason === 'key' ? 'seal' : reason === 'key_id' ? 'key_id' : 'signature';
      f.fail(where, (error as Error).message);
      key = undefined;
    }
  }
  const payload = decodePayload(text);
  if (!payload) {
    f.fail('payload', 'the payload is not base64url of a JSON object');
    return undefined;
  }
  if (type !== undefined && payload.type !== type) f.fail('payload.type', `type is ${describe(payload.type)}, expected ${JSON.stringify(type)}`);
  const kid = documentKeyId(text);
  if (payload.key_id !== kid) f.fail('payload.key_id', `key_id is ${describe(payload.key_id)} but the signature header names ${describe(kid)}`);
  if (pin?.installId !== undefined) {
    if (payload.install_id === pin.installId) f.ok(`install: ${pin.installId}, as the seal names`);
    else f.fail('payload.install_id', `install_id is ${describe(payload.install_id)}, the seal's install is ${pin.installId}`);
  }
  return { payload, key: verified ? key : undefined, pin };
}

/** The signed tree a bundle or receipt speaks of: its size, Merkle root and head hash, each checked for shape. */
function treeHead(p: Payload, f: Findings) {
  const size = positiveInteger(p.size);
  const root = hexHash(p.merkle_root);
  const head = typeof p.head_hash === 'string' && HEX64.test(p.head_hash) ? p.head_hash : undefined;
  if (size === undefined) f.fail('payload.size', `size is ${describe(p.size)}, not a positive integer`);
  if (!root) f.fail('payload.merkle_root', `merkle_root is ${describe(p.merkle_root)}, not 64 lowercase hex characters`);
  if (!head) f.fail('payload.head_hash', `head_hash is ${describe(p.head_hash)}, not 64 lowercase hex characters`);
  return { size, root, head };
}

// ---------------------------------------------------------------------------------------------
// Bundle

async function checkBundle(
  p: Payload,
  carried: unknown,
  key: Record<string, unknown> | undefined,
  pin: Pin | undefined,
  f: Findings,
  hashedAsCarried: ReadonlySet<number> = new Set(),
): Promise<void> {
  const { size, root, head } = treeHead(p, f);

  const window = isRecord(p.window) ? p.window : undefined;
  const after = window ? nonNegativeInteger(window.after) : undefined;
  const prevHash = window && typeof window.prev_hash === 'string' && HEX64.test(window.prev_hash) ? window.prev_hash : undefined;
  if (!window) f.fail('payload.window', 'window is missing or not an object');
  else {
    if (after === undefined) f.fail('window.after', `after is ${describe(window.after)}, not a whole number`);
    if (!prevHash) f.fail('window.prev_hash', `prev_hash is ${describe(window.prev_hash)}, not 64 lowercase hex characters`);
  }
  if (!Array.isArray(carried)) {
    f.fail('payload.entries', 'entries is missing or not a list');
    return;
  }
  const entries = carried as unknown[];
  if (after === undefined || prevHash === undefined) return;
  if (after === 0 && prevHash !== GENESIS_HASH) f.fail('window.prev_hash', `the window starts at the chain's start, so prev_hash must be the genesis hash, not ${prevHash}`);
  if (size !== undefined && after + entries.length > size) {
    f.fail('payload.size', `the window holds entries up to seq ${after + entries.length}, beyond the signed size ${size}`);
  }

  // Entries recompute and link, each judged on its own so every bad one is named.
  const linked = checkLinks(entries, after, prevHash, f, hashedAsCarried);
  const last = entries.length > 0 && isRecord(entries[entries.length - 1]) ? (entries[entries.length - 1] as Record<string, unknown>) : undefined;
  const full = after === 0 && size !== undefined && entries.length === size;

  if (full && root && head) {
    const recomputed = rootOfHexHashes(entries);
    if (recomputed === undefined) f.fail('payload.merkle_root', 'the root cannot be recomputed: an entry has no 64-hex hash');
    else if (recomputed === p.merkle_root) f.ok(`merkle root: recomputed over all ${size} entries, equals the signed ${recomputed}`);
    else f.fail('payload.merkle_root', `the signed root is ${p.merkle_root as string}, the entries recompute to ${recomputed}`);
  }
  if (size !== undefined && head) {
    if (entries.length > 0 && after + entries.length === size) {
      if (last?.hash === head) f.ok(`head hash: the last entry (seq ${size}) is the signed head ${head}`);
      else f.fail('payload.head_hash', `the signed head is ${head}, the last entry's hash is ${describe(last?.hash)}`);
    } else if (entries.length === 0 && after === size) {
      if (prevHash === head) f.ok(`head hash: the window starts at the head ${head}`);
      else f.fail('payload.head_hash', `the window starts after seq ${after}, the head, but prev_hash ${prevHash} is not the head hash ${head}`);
    }
  }

  // The last entry is in the signed tree; through the hash links, so is every entry before it.
  if (!Array.isArray(p.last_inclusion)) f.fail('payload.last_inclusion', 'last_inclusion is missing or not a list');
  else if (entries.length === 0) {
    if (p.last_inclusion.length !== 0) f.fail('payload.last_inclusion', 'the window is empty but last_inclusion is not');
  } else if (size !== undefined && root) {
    const proof = hexList(p.last_inclusion);
    const leaf = leafFor(last);
    const index = after + entries.length - 1;
    if (proof && leaf && verifyInclusion(leaf, index, size, proof, root)) {
      f.ok(`last_inclusion: entry seq ${index + 1} is proven in the tree of size ${size} with root ${p.merkle_root as string}`);
    } else {
      f.fail('payload.last_inclusion', `the proof does not show entry seq ${index + 1} in the tree of size ${size} with the signed root`);
    }
  }
  if (linked) {
    f.ok(
      entries.length === 0
        ? `entries: none after seq ${after}`
        : `entries: ${entries.length} (seq ${after + 1}..${after + entries.length}) recompute and link from ${after === 0 ? 'the genesis hash' : `prev_hash ${prevHash}`}`,
    );
  }

  await checkBundleAnchors(p, key, pin, { size, root, head, after, prevHash, entries, full }, f);
}

/**
 * Per-entry recomputation and linkage from `prevHash`; true when every entry holds. Entries at the
 * indexes in `hashedAsCarried` were hashed as carried and found to be their hash's text, so only
 * their links are checked.
 */
function checkLinks(entries: unknown[], after: number, prevHash: string, f: Findings, hashedAsCarried: ReadonlySet<number>): boolean {
  let expectedPrev = prevHash;
  let allGood = true;
  entries.forEach((entry, i) => {
    const seq = after + i + 1;
    const where = `entries[${i}] (seq ${seq})`;
    if (!isRecord(entry)) {
      f.fail(where, `the entry is ${describe(entry)}, not an object`);
      allGood = false;
      expectedPrev = '';
      return;
    }
    const problem = entryProblem(entry, seq, expectedPrev, hashedAsCarried.has(i));
    if (problem) {
      f.fail(where, problem);
      allGood = false;
    }
    // The next link is judged against the hash as given, so each altered entry is named once.
    expectedPrev = typeof entry.hash === 'string' ? entry.hash : '';
  });
  return allGood;
}

/** Why the entry is not the chain entry `seq` following `expectedPrev` (undefined: it is). */
function entryProblem(entry: Record<string, unknown>, seq: number | undefined, expectedPrev: string | undefined, hashedAsCarried = false): string | undefined {
  if (seq !== undefined && entry.seq !== seq) return `seq is ${describe(entry.seq)}, expected ${seq}`;
  if (expectedPrev !== undefined && entry.prev_hash !== expectedPrev) {
    return `prev_hash is ${describe(entry.prev_hash)}, expected ${expectedPrev === GENESIS_HASH ? 'the genesis hash' : 'the previous hash'} ${expectedPrev || '(unknown)'}`;
  }
  if (hashedAsCarried) return undefined;
  let recomputed: string;
  try {
    recomputed = entryHash(entry as never);
  } catch (error) {
    return `the entry cannot be hashed: ${(error as Error).message}`;
  }
  if (recomputed !== entry.hash) return `hash is ${describe(entry.hash)} but the entry recomputes to ${recomputed}`;
  return undefined;
}

interface BundleFacts {
  size?: number;
  root?: Buffer;
  head?: string;
  after: number;
  prevHash: string;
  entries: unknown[];
  full: boolean;
}

async function checkBundleAnchors(p: Payload, key: Record<string, unknown> | undefined, pin: Pin | undefined, b: BundleFacts, f: Findings): Promise<void> {
  if (!Array.isArray(p.anchors)) {
    f.fail('payload.anchors', 'anchors is missing or not a list');
    return;
  }
  const valid: { anchor: AuditAnchor; where: string }[] = [];
  for (const [i, jws] of (p.anchors as unknown[]).entries()) {
    let where = `anchors[${i}]`;
    const payload = typeof jws === 'string' ? decodePayload(jws) : undefined;
    if (!payload) {
      f.fail(where, 'not a compact JWS with a JSON payload');
      continue;
    }
    const size = positiveInteger(payload.size);
    if (size !== undefined) where += ` (size ${size})`;
    // Anchors are checked with the same pinned key the bundle verified with (or would have).
    const anchorKey = key ?? (pin ? await pinnedKeyFor(jws as string, pin) : undefined);
    if (!anchorKey) {
      f.fail(where, `signed by key ${documentKeyId(jws as string) ?? '(none)'}, which the seal does not pin`);
      continue;
    }
    try {
      await verifyDocument(jws as string, anchorKey);
    } catch (error) {
      f.fail(where, `the anchor's signature does not hold: ${(error as Error).message}`);
      continue;
    }
    if (payload.type !== ANCHOR_TYPE) {
      f.fail(where, `type is ${describe(payload.type)}, not ${ANCHOR_TYPE}`);
      continue;
    }
    if (payload.install_id !== p.install_id) {
      f.fail(where, `the anchor is of install ${describe(payload.install_id)}, the bundle's is ${describe(p.install_id)}`);
      continue;
    }
    const head = typeof payload.head_hash === 'string' && HEX64.test(payload.head_hash) ? payload.head_hash : undefined;
    const root = typeof payload.merkle_root === 'string' && HEX64.test(payload.merkle_root) ? payload.merkle_root : undefined;
    if (size === undefined || !head || !root) {
      f.fail(where, 'the anchor has no positive size or no 64-hex head_hash and merkle_root');
      continue;
    }
    if (b.size !== undefined && size > b.size) {
      f.fail(where, `the anchor covers ${size} entries, more than the bundle's chain of ${b.size}: the chain lost its tail`);
      continue;
    }
    valid.push({ anchor: { size, head_hash: head, merkle_root: root }, where });
  }

  let checkedCount = 0;
  let outside = 0;
  if (b.full) {
    // Every anchor is judged against the chain it covers: head and Merkle root at its size.
    const problems = checkAnchors(b.entries, valid.map((v) => v.anchor));
    for (const problem of problems) {
      const where = valid.find((v) => v.anchor.size === problem.size)?.where ?? `anchors (size ${problem.size})`;
      f.fail(where, anchorProblemText(problem));
    }
    checkedCount = valid.filter((v) => !problems.some((problem) => problem.size === v.anchor.size)).length;
  } else {
    for (const { anchor, where } of valid) {
      let held = true;
      let judged = false;
      const last = b.after + b.entries.length;
      if (anchor.size === b.after) {
        judged = true;
        if (b.prevHash !== anchor.head_hash) {
          f.fail(where, `the anchor's head is ${anchor.head_hash}, the window's prev_hash is ${b.prevHash}`);
          held = false;
        }
      } else if (anchor.size > b.after && anchor.size <= last) {
        judged = true;
        const entry = b.entries[anchor.size - b.after - 1];
        const hash = isRecord(entry) ? entry.hash : undefined;
        if (hash !== anchor.head_hash) {
          f.fail(where, `the anchor's head is ${anchor.head_hash}, entry seq ${anchor.size} has hash ${describe(hash)}`);
          held = false;
        }
      }
      if (anchor.size === b.size) {
        judged = true;
        if (anchor.merkle_root !== (b.root ? b.root.toString('hex') : undefined) || anchor.head_hash !== b.head) {
          f.fail(where, 'the anchor covers the whole chain but its head or root is not the bundle\'s');
          held = false;
        }
      }
      if (!judged) outside++;
      else if (held) checkedCount++;
    }
  }
  const total = (p.anchors as unknown[]).length;
  if (total === 0) f.ok('anchors: none recorded');
  else if (checkedCount > 0 || outside > 0) {
    f.ok(
      `anchors: ${valid.length} of ${total} verify with the pinned key; ${checkedCount} satisfied by the entries` +
        (outside > 0 ? `, ${outside} cover entries outside the window and are checked by signature only` : ''),
    );
  }
}

async function pinnedKeyFor(jws: string, pin: Pin): Promise<Record<string, unknown> | undefined> {
  const kid = documentKeyId(jws);
  for (const key of pin.keys) {
    try {
      if ((await jwkThumbprint(key)) === kid) return key;
    } catch {
      // an unusable pinned key was already reported
    }
  }
  return undefined;
}

function anchorProblemText(problem: ReturnType<typeof checkAnchors>[number]): string {
  if (problem.problem === 'missing_entries') return `the anchor needs ${problem.expected} entries, the bundle holds ${problem.actual}`;
  const what = problem.problem === 'head_mismatch' ? 'head hash' : 'Merkle root';
  return `the anchor's ${what} is ${problem.expected}, the entries give ${problem.actual}`;
}

// ---------------------------------------------------------------------------------------------
// Receipt

function checkReceipt(p: Payload, f: Findings): void {
  const { size, root, head } = treeHead(p, f);
  if (typeof p.run_id !== 'string' || p.run_id === '') f.fail('payload.run_id', `run_id is ${describe(p.run_id)}, not a run id`);
  if (p.form !== 'full' && p.form !== 'sparse') f.fail('payload.form', `form is ${describe(p.form)}, not full or sparse`);
  if (!Array.isArray(p.entries)) {
    f.fail('payload.entries', 'entries is missing or not a list');
    return;
  }

  const byId = new Map<string, Record<string, unknown>>();
  const entries: Record<string, unknown>[] = [];
  let proven = 0;
  (p.entries as unknown[]).forEach((item, i) => {
    const entry = isRecord(item) && isRecord(item.entry) ? item.entry : undefined;
    const where = `entries[${i}]` + (entry && positiveInteger(entry.seq) !== undefined ? ` (seq ${entry.seq as number})` : '');
    if (!isRecord(item) || !entry) {
      f.fail(where, 'not an object with entry, index and proof');
      return;
    }
    let good = true;
    const problem = entryProblem(entry, undefined, undefined);
    if (problem) {
      f.fail(where, problem);
      good = false;
    }
    const seq = positiveInteger(entry.seq);
    if (seq === undefined || item.index !== seq - 1) {
      f.fail(where, `index is ${describe(item.index)}, but the leaf of seq ${describe(entry.seq)} is at ${seq === undefined ? '(none)' : seq - 1}`);
      good = false;
    }
    if (typeof entry.body === 'object' && entry.body !== null && typeof (entry.body as Record<string, unknown>).run_id === 'string') {
      const about = (entry.body as Record<string, unknown>).run_id;
      if (about !== p.run_id) {
        f.fail(where, `the entry is about run ${describe(about)}, not ${describe(p.run_id)}`);
        good = false;
      }
    }
    const proof = Array.isArray(item.proof) ? hexList(item.proof) : undefined;
    const leaf = leafFor(entry);
    if (size !== undefined && root && seq !== undefined) {
      if (!proof || !leaf || !verifyInclusion(leaf, seq - 1, size, proof, root)) {
        f.fail(where, `the inclusion proof does not show the entry at leaf ${seq - 1} of the tree of size ${size} with the signed root`);
        good = false;
      } else if (seq === size && entry.hash !== head) {
        f.fail(where, `the entry is the last of the chain but its hash is not the signed head ${describe(head)}`);
        good = false;
      }
    }
    if (good) proven++;
    if (typeof entry.id === 'string') byId.set(entry.id, entry);
    entries.push(entry);
  });
  if (proven > 0 && proven === (p.entries as unknown[]).length) {
    f.ok(`entries: ${proven} recompute and are proven in the tree of size ${size} with root ${p.merkle_root as string}`);
  } else if ((p.entries as unknown[]).length === 0) {
    f.ok('entries: none disclosed');
  }

  if (p.run !== undefined) {
    if (!isRecord(p.run) || p.run.id !== p.run_id) f.fail('payload.run', `the run record is not run ${describe(p.run_id)}`);
  }
  if (p.decisions !== undefined) checkDecisions(p.decisions, entries, byId, f);

  if (p.consistency !== undefined) {
    const c = isRecord(p.consistency) ? p.consistency : {};
    const fromSize = nonNegativeInteger(c.from_size);
    const fromRoot = hexHash(c.from_root);
    const proof = Array.isArray(c.proof) ? hexList(c.proof) : undefined;
    if (fromSize !== undefined && fromRoot && proof && size !== undefined && root && verifyConsistency(fromSize, size, fromRoot, root, proof)) {
      f.ok(`consistency: the tree of size ${fromSize} (root ${c.from_root as string}) is a prefix of the signed tree of size ${size}`);
    } else {
      f.fail('consistency', `the proof does not show the tree of size ${describe(c.from_size)} with root ${describe(c.from_root)} is a prefix of the signed tree`);
    }
  }
}

/** The chain entry committing to a decision record: its id is the record's (spec part A 2.7 item 3). */
function entryOfDecision(record: Record<string, unknown>, entries: Record<string, unknown>[], byId: Map<string, Record<string, unknown>>) {
  const id = record.id as string;
  const direct = byId.get(id);
  if (direct) return direct;
  return entries.find((entry) => {
    const body = isRecord(entry.body) ? entry.body : {};
    return record.kind === 'correction' ? body.correction_id === id : body.decision_id === id && body.kind !== 'run.correction' && body.kind !== 'run.redaction';
  });
}

function checkDecisions(decisions: unknown, entries: Record<string, unknown>[], byId: Map<string, Record<string, unknown>>, f: Findings): void {
  if (!Array.isArray(decisions)) {
    f.fail('payload.decisions', 'decisions is not a list');
    return;
  }
  let opened = 0;
  let redacted = 0;
  decisions.forEach((record, i) => {
    if (!isRecord(record) || typeof record.id !== 'string') {
      f.fail(`decisions[${i}]`, 'not a decision record with an id');
      return;
    }
    const where = `decisions[${i}] (${record.id})`;
    const entry = entryOfDecision(record, entries, byId);
    const body = entry && isRecord(entry.body) ? entry.body : undefined;
    if (typeof record.reason !== 'string' || typeof record.random !== 'string') {
      if (record.reason === null || record.reason === undefined) redacted++;
      return;
    }
    if (!entry || !body) {
      f.fail(where, 'no chain entry in the receipt commits to this decision, so its reason cannot be checked');
      return;
    }
    if (record.commitment !== undefined && record.commitment !== null && record.commitment !== body.commitment) {
      f.fail(where, `the record's commitment ${describe(record.commitment)} is not the one in chain entry seq ${describe(entry.seq)} (${describe(body.commitment)})`);
      return;
    }
    if (opensCommitment(body.commitment, { event: record.id, random: record.random, reason: record.reason })) opened++;
    else f.fail(where, `the reason and random value do not open the commitment ${describe(body.commitment)} in chain entry seq ${describe(entry.seq)}`);
  });
  if (decisions.length > 0 && opened + redacted > 0) {
    f.ok(`decisions: ${opened} reason${opened === 1 ? '' : 's'} open their commitments` + (redacted > 0 ? `; ${redacted} without reason (none given or redacted)` : ''));
  }
}

// ---------------------------------------------------------------------------------------------

/**
 * The Merkle root (hex) over the entries' hashes, each a leaf of its 32 bytes; undefined when one
 * is not 64 lowercase hex digits. Built as the chain's verifier builds it (binary strings, one
 * pass), the same root `rootFromLeafHashes` gives over the leaves.
 */
function rootOfHexHashes(entries: unknown[]): string | undefined {
  const tree = new MerkleAccumulator();
  for (const entry of entries) {
    const hash = hexHashOf(entry);
    if (hash === undefined) return undefined;
    tree.pushHexHash(hash);
  }
  return tree.root().toString('hex');
}

/** The entry's hash when it is 64 lowercase hex digits, the form a leaf is made of. */
function hexHashOf(entry: unknown): string | undefined {
  const hash = isRecord(entry) ? entry.hash : undefined;
  return typeof hash === 'string' && HEX64.test(hash) ? hash : undefined;
}

function leafFor(entry: unknown): Buffer | undefined {
  const hash = hexHashOf(entry);
  return hash === undefined ? undefined : leafHash(Buffer.from(hash, 'hex'));
}

function hexHash(value: unknown): Buffer | undefined {
  return typeof value === 'string' && HEX64.test(value) ? Buffer.from(value, 'hex') : undefined;
}

function hexList(values: unknown[]): Buffer[] | undefined {
  const out: Buffer[] = [];
  for (const value of values) {
    const hash = hexHash(value);
    if (!hash) return undefined;
    out.push(hash);
  }
  return out;
}

function positiveInteger(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 ? value : undefined;
}

function nonNegativeInteger(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (typeof value === 'string') return value.length > 100 ? `a ${value.length}-character string` : JSON.stringify(value);
  if (typeof value === 'number' || value === undefined || value === null) return String(value);
  return Array.isArray(value) ? 'a list' : `a ${typeof value}`;
}
