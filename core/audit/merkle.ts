import { sha256, sha256Binary } from '../sha256';

/**
 * The audit chain seen as a Merkle tree, hashed as RFC 9162 section 2.1 (the same tree hashing as
 * RFC 6962) over SHA-256. Three parts that never mix, so each can be tested on its own:
 *
 * - planning (`inclusionProofIndices`, `consistencyProofIndices`): pure arithmetic saying which
 *   subtrees a proof needs, as leaf ranges `[start, end)`; no hashing and no storage;
 * - building (`inclusionProof`, `consistencyProof`, `subtreeHashes`, `rootFromLeafHashes`): turns a
 *   plan into hashes, from a leaf-hash array or any source of subtree hashes (such as a store);
 * - verifying (`verifyInclusion`, `verifyConsistency`): the client algorithms of RFC 9162
 *   sections 2.1.3.2 and 2.1.4.2, which trust nothing they are given.
 *
 * Builders check their preconditions first and throw a `MerkleError` naming the wrong values.
 * Verifiers never throw: a receipt read from disk may hold anything, and anything malformed is
 * simply not proven (`false`).
 */

/** Bytes in every hash here: leaf hashes, node hashes, roots and proof nodes. */
export const HASH_SIZE = 32;


// Kept private so a caller writing into the exported copy cannot change what verification expects.
const emptyRoot = sha256(Buffer.alloc(0));

/** MTH({}) = SHA-256 of the empty string (RFC 9162 section 2.1.1). */
export const EMPTY_ROOT: Buffer = Buffer.from(emptyRoot);

/** A subtree of the tree as the half-open range of leaf indices it covers: `[start, end)`. */
export interface SubtreeRange {
  readonly start: number;
  readonly end: number;
}

/** Returns MTH(D[start:end]); one of these lets proofs be built from stored subtree hashes. */
export type SubtreeHashGetter = (start: number, end: number) => Buffer;

/** A precondition broken by the caller; `details` holds the values that were wrong. */
export class MerkleError extends Error {
  constructor(
    message: string,
    readonly details: Record<string, number>,
  ) {
    super(message);
    this.name = 'MerkleError';
  }
}

const LEAF_PREFIX = Buffer.from([0x00]);
// One reused input buffer for node hashes: hashing is synchronous, so nothing else can touch it mid-hash.
const nodeInput = Buffer.alloc(1 + 2 * HASH_SIZE);
nodeInput[0] = 0x01;

/** Leaf hash per RFC 9162 2.1.1: SHA-256(0x00 || data). The prefix keeps leaves and nodes apart. */
export function leafHash(data: Uint8Array): Buffer {
  if (!(data instanceof Uint8Array)) throw new MerkleError('leaf data must be bytes', {});
  return sha256(Buffer.concat([LEAF_PREFIX, data]));
}

/**
 * The leaf of an audit entry's stored hash: over its 32 bytes when it is 64 hex digits, else over
 * its UTF-8 text (a leaf no honest anchor covers, so a mangled hash still takes its place).
 */
export function leafOfStoredHash(hash: string): Buffer {
  return Buffer.from(leafOfStoredHashBinary(hash), 'latin1');
}

const HEX64 = /^[0-9a-f]{64}$/;
// Reused inputs for the binary forms below: hashing is synchronous, so nothing else touches them mid-hash.
const leafInput = Buffer.alloc(1 + HASH_SIZE);
const nodeInputBinary = Buffer.alloc(1 + 2 * HASH_SIZE);
nodeInputBinary[0] = 0x01;

/** {@link leafOfStoredHash} as a binary (latin1) string, for {@link nodeHashBinary}. */
export function leafOfStoredHashBinary(hash: string): string {
  if (!HEX64.test(hash)) return sha256Binary(Buffer.concat([LEAF_PREFIX, Buffer.from(hash, 'utf8')]));
  return leafOfHexHashBinary(hash);
}

/**
 * {@link leafOfStoredHashBinary} of a hash already known to be 64 lowercase hex digits, such as
 * one just found equal to a SHA-256 computed here, without looking at its digits again (that
 * look is a fifth of a leaf's cost).
 */
export function leafOfHexHashBinary(hash: string): string {
  leafInput.write(hash, 1, 'hex');
  return sha256Binary(leafInput);
}

/**
 * {@link nodeHash} over binary (latin1) strings of 32 characters, for trees built in bulk (the
 * audit chain's accumulator): no Buffer is made per node. Precondition: both are 32-character
 * latin1 strings.
 */
export function nodeHashBinary(left: string, right: string): string {
  nodeInputBinary.write(left, 1, 'latin1');
  nodeInputBinary.write(right, 1 + HASH_SIZE, 'latin1');
  return sha256Binary(nodeInputBinary);
}

/** Interior node hash per RFC 9162 2.1.1: SHA-256(0x01 || left || right); both children are 32-byte hashes. */
export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  checkHash(left, 'left child');
  checkHash(right, 'right child');
  return hashChildren(left, right);
}

// The hot path: every caller has already checked that both children are 32 bytes.
function hashChildren(left: Uint8Array, right: Uint8Array): Buffer {
  nodeInput.set(left, 1);
  nodeInput.set(right, 1 + HASH_SIZE);
  return sha256(nodeInput);
}

/**
 * MTH(D[n]) (RFC 9162 2.1.1) from the leaf hashes, in one pass with a stack of at most log2(n)
 * perfect subtrees, so 100,000 leaves cost 99,999 node hashes and no recursion.
 * Precondition: every element is a 32-byte hash.
 */
export function rootFromLeafHashes(leafHashes: readonly Uint8Array[]): Buffer {
  checkLeafHashes(leafHashes, leafHashes.length);
  return rootOfPrefix(leafHashes, leafHashes.length);
}

function rootOfPrefix(leafHashes: readonly Uint8Array[], size: number): Buffer {
  if (size === 0) return Buffer.from(emptyRoot);
  // stack[i] is a perfect subtree; sizes strictly decrease from bottom to top, like the bits of i.
  const stack: Uint8Array[] = [];
  for (let i = 0; i < size; i++) {
    let hash = leafHashes[i];
    // Each trailing one bit of i is a same-sized left sibling now complete: merge with it.
    for (let j = i; (j & 1) === 1; j >>>= 1) hash = hashChildren(stack.pop()!, hash);
    stack.push(hash);
  }
  // MTH splits at the largest power of two below n, so the leftover subtrees fold from the right.
  let root = stack.pop()!;
  while (stack.length > 0) root = hashChildren(stack.pop()!, root);
  // A copy for the one-leaf tree, so the caller never holds an alias of its own leaf.
  return Buffer.from(root);
}

/**
 * Every subtree hash of the first `size` leaves, computed once (about `size` node hashes), then
 * served in O(log n) hashes per proof range. Build one of these when a tree answers many proofs.
 * Preconditions: `size` is an integer in 0..leafHashes.length; those leaf hashes are 32 bytes each.
 * The getter's precondition: 0 <= start < end <= size.
 */
export function subtreeHashes(leafHashes: readonly Uint8Array[], size: number = leafHashes.length): SubtreeHashGetter {
  checkSize(size, 'size');
  if (size > leafHashes.length) {
    throw new MerkleError(`size ${size} is above the ${leafHashes.length} leaf hashes given`, {
      size,
      leafCount: leafHashes.length,
    });
  }
  checkLeafHashes(leafHashes, size);
  // levels[h][i] = MTH of the perfect subtree of 2^h leaves starting at leaf i * 2^h, as binary
  // (latin1) strings: a tree of a million leaves makes a million node hashes, and a Buffer each
  // would cost more than hashing them.
  const levels: string[][] = [leafHashes.slice(0, size).map((leaf) => Buffer.from(leaf.buffer, leaf.byteOffset, leaf.byteLength).toString('latin1'))];
  for (let below = levels[0]; below.length > 1; ) {
    const level: string[] = new Array(below.length >>> 1);
    for (let i = 0; i < level.length; i++) level[i] = nodeHashBinary(below[2 * i], below[2 * i + 1]);
    levels.push(level);
    below = level;
  }

  const hashRange = (start: number, end: number): string => {
    const count = end - start;
    if (isPowerOfTwo(count) && start % count === 0) return levels[Math.log2(count)][start / count];
    // Ranges from the RFC's recursion start on a multiple of k, so the left part is a lookup.
    const k = largestPowerOfTwoBelow(count);
    return nodeHashBinary(hashRange(start, start + k), hashRange(start + k, end));
  };

  return (start: number, end: number): Buffer => {
    checkRange(start, end, size);
    return Buffer.from(hashRange(start, end), 'latin1');
  };
}

/**
 * Plans PATH(index, D[size]) of RFC 9162 2.1.3.1: the subtrees whose hashes make the inclusion
 * proof, in proof order (the leaf's sibling first, the root's child last).
 * Preconditions: `size` is a safe integer >= 1 and `index` an integer below it.
 */
export function inclusionProofIndices(index: number, size: number): SubtreeRange[] {
  checkSize(size, 'size');
  checkIndex(index, size);
  const ranges: SubtreeRange[] = [];
  let start = 0;
  let end = size;
  while (end - start > 1) {
    const mid = start + largestPowerOfTwoBelow(end - start);
    if (index < mid) {
      ranges.push({ start: mid, end });
      end = mid;
    } else {
      ranges.push({ start, end: mid });
      start = mid;
    }
  }
  // Walked from the root down; the proof lists nodes from the leaf up.
  return ranges.reverse();
}

/**
 * Plans PROOF(oldSize, D[newSize]) of RFC 9162 2.1.4.1 (SUBPROOF with b = true), in proof order.
 * Empty when `oldSize` is 0 or equals `newSize`: such trees are consistent by definition.
 * Preconditions: both are safe integers and 0 <= oldSize <= newSize.
 */
export function consistencyProofIndices(oldSize: number, newSize: number): SubtreeRange[] {
  checkSize(oldSize, 'old size');
  checkSize(newSize, 'new size');
  if (oldSize > newSize) {
    throw new MerkleError(`old size ${oldSize} is above new size ${newSize}`, { oldSize, newSize });
  }
  if (oldSize === 0 || oldSize === newSize) return [];
  const appended: SubtreeRange[] = [];
  let start = 0;
  let end = newSize;
  let m = oldSize; // the old tree's leaves inside [start, end)
  let oldTreeIsWholeSubtree = true; // the RFC's b: the old root is a node the verifier already holds
  while (m !== end - start) {
    const k = largestPowerOfTwoBelow(end - start);
    if (m <= k) {
      appended.push({ start: start + k, end });
      end = start + k;
    } else {
      appended.push({ start, end: start + k });
      start += k;
      m -= k;
      oldTreeIsWholeSubtree = false;
    }
  }
  // SUBPROOF(m, D[m], false) = {MTH(D[m])}: the deepest node comes first, then the rest bottom-up.
  const head: SubtreeRange[] = oldTreeIsWholeSubtree ? [] : [{ start, end }];
  return head.concat(appended.reverse());
}

/**
 * The inclusion proof (audit path) for leaf `index` in the tree of the first `size` leaves.
 * `source` is either the leaf hashes (at least `size` of them) or a getter of subtree hashes;
 * pass a `subtreeHashes(...)` getter when answering many proofs over one tree.
 * Preconditions: those of `inclusionProofIndices`, plus those of the source.
 */
export function inclusionProof(index: number, size: number, source: readonly Uint8Array[] | SubtreeHashGetter): Buffer[] {
  const plan = inclusionProofIndices(index, size);
  return fillPlan(plan, sourceGetter(source, size));
}

/**
 * The consistency proof between the tree of the first `oldSize` leaves and that of the first
 * `newSize` leaves, from the leaf hashes (at least `newSize` of them) or a subtree hash getter.
 * Preconditions: those of `consistencyProofIndices`, plus those of the source.
 */
export function consistencyProof(
  oldSize: number,
  newSize: number,
  source: readonly Uint8Array[] | SubtreeHashGetter,
): Buffer[] {
  const plan = consistencyProofIndices(oldSize, newSize);
  if (plan.length === 0) return [];
  return fillPlan(plan, sourceGetter(source, newSize));
}

function sourceGetter(source: readonly Uint8Array[] | SubtreeHashGetter, size: number): SubtreeHashGetter {
  return typeof source === 'function' ? source : subtreeHashes(source, size);
}

function fillPlan(plan: readonly SubtreeRange[], getHash: SubtreeHashGetter): Buffer[] {
  return plan.map(({ start, end }) => {
    const hash = getHash(start, end);
    // A getter backed by storage could return anything; a short node would make a proof that never verifies.
    if (!(hash instanceof Uint8Array) || hash.length !== HASH_SIZE) {
      throw new MerkleError(
        `the subtree hash of leaves [${start}, ${end}) is ${describeBytes(hash)}, not ${HASH_SIZE} bytes`,
        { start, end, length: hash instanceof Uint8Array ? hash.length : -1 },
      );
    }
    return Buffer.from(hash);
  });
}

/**
 * RFC 9162 2.1.3.2: true when `proof` shows the leaf with hash `leafHashValue` at `index` in the
 * tree of `size` leaves whose root is `root`. False, never an exception, for anything malformed:
 * non-integer or out-of-range numbers, hashes that are not 32 bytes, a proof of the wrong length.
 */
export function verifyInclusion(
  leafHashValue: Uint8Array,
  index: number,
  size: number,
  proof: readonly Uint8Array[],
  root: Uint8Array,
): boolean {
  if (!isHash(leafHashValue) || !isHash(root) || !isHashList(proof)) return false;
  if (!Number.isSafeInteger(index) || !Number.isSafeInteger(size) || index < 0 || index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r: Buffer = Buffer.from(leafHashValue);
  for (const p of proof) {
    if (sn === 0) return false; // more nodes than the tree is deep
    if (isOdd(fn) || fn === sn) {
      r = hashChildren(p, r);
      // Climb past the levels where this node is a lone right edge, promoted unchanged.
      while (!isOdd(fn) && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      r = hashChildren(r, p);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && r.equals(root);
}

/**
 * RFC 9162 2.1.4.2: true when `proof` shows the tree of `oldSize` leaves with root `oldRoot` is a
 * prefix of the tree of `newSize` leaves with root `newRoot`. Equal sizes need an empty proof and
 * equal roots; old size 0 needs an empty proof and `oldRoot` equal to `EMPTY_ROOT`. False, never
 * an exception, for anything malformed.
 */
export function verifyConsistency(
  oldSize: number,
  newSize: number,
  oldRoot: Uint8Array,
  newRoot: Uint8Array,
  proof: readonly Uint8Array[],
): boolean {
  if (!isHash(oldRoot) || !isHash(newRoot) || !isHashList(proof)) return false;
  if (!Number.isSafeInteger(oldSize) || !Number.isSafeInteger(newSize) || oldSize < 0 || oldSize > newSize) return false;
  if (oldSize === 0) return proof.length === 0 && emptyRoot.equals(oldRoot);
  if (oldSize === newSize) return proof.length === 0 && Buffer.from(oldRoot).equals(newRoot);
  if (proof.length === 0) return false;

  // When the old tree is a perfect subtree its root is the proof's implicit first node.
  const path = isPowerOfTwo(oldSize) ? [oldRoot, ...proof] : proof;
  let fn = oldSize - 1;
  let sn = newSize - 1;
  while (isOdd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr: Buffer = Buffer.from(path[0]);
  let sr: Buffer = Buffer.from(path[0]);
  for (let i = 1; i < path.length; i++) {
    const c = path[i];
    if (sn === 0) return false; // more nodes than the new tree is deep
    if (isOdd(fn) || fn === sn) {
      fr = hashChildren(c, fr);
      sr = hashChildren(c, sr);
      while (!isOdd(fn) && fn !== 0) {
        fn = half(fn);
        sn = half(sn);
      }
    } else {
      sr = hashChildren(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && fr.equals(oldRoot) && sr.equals(newRoot);
}

/**
 * Somewhere else to hash whole chunks of a tree, such as another thread, so that a long chain's
 * tree is built beside its verification instead of between its entries. Core code starts no
 * threads: a process's entry point lends accumulators one (`offloadSubtrees`).
 */
export interface SubtreeHasher {
  /** Leaves in a chunk: a power of two, so that each chunk is a perfect subtree. */
  readonly chunkLeaves: number;
  /** A new, empty chunk to fill. */
  chunk(): SubtreeChunk;
}

/** One chunk's leaves, filled in order and then handed off whole. */
export interface SubtreeChunk {
  /**
   * 32 bytes a leaf: a stored hash's bytes, whose leaf is still to be made (SHA-256(0x00 || bytes)),
   * or, where `isLeaf` holds 1, the leaf hash itself.
   */
  readonly values: Buffer;
  readonly isLeaf: Uint8Array;
  /** Hands off the full chunk (`chunkLeaves` leaves); it must not be written after. */
  submit(): PendingSubtree;
}

/** A chunk's root on its way. */
export interface PendingSubtree {
  /** True once `root` answers without waiting. */
  readonly done: boolean;
  /**
   * MTH of the chunk's leaves as a 32-character binary (latin1) string, waiting for it if need be;
   * undefined when it cannot be had, and the accumulator then hashes the chunk itself.
   */
  root(): string | undefined;
}

let lentHasher: SubtreeHasher | undefined;

/**
 * Lends every accumulator made after this call a hasher for whole chunks, or none (undefined):
 * everything is then hashed where it is pushed. A process's entry point calls it once; it returns
 * the hasher lent before, for a caller that lends one for a while.
 */
export function offloadSubtrees(hasher: SubtreeHasher | undefined): SubtreeHasher | undefined {
  const before = lentHasher;
  lentHasher = hasher;
  return before;
}

// Chunks handed off and not yet folded in, at most; past it a push waits for the oldest.
const MAX_HANDED_OFF = 16;

/**
 * RFC 9162 roots of a growing list of leaves: a stack of perfect subtrees whose sizes are the
 * bits of the count, so each leaf costs one hash plus a merge per trailing one bit, and a root at
 * any size folds the stack from the right (MTH splits at the largest power of two below n).
 *
 * With a hasher lent (`offloadSubtrees`), leaves from a chunk's edge on are gathered into chunks
 * and each full chunk is hashed elsewhere and folded in as one perfect subtree. A chunk is handed
 * off only once the next leaf arrives, and reading the tree (root, frontier, last path) folds the
 * chunk being filled leaf by leaf, so the last leaf's path is always known. The roots are the same
 * either way; a chunk whose root cannot be had is hashed here.
 */
export class MerkleAccumulator {
  // Subtree roots as 32-character latin1 strings: a Buffer per node costs more than its hash.
  private stack: string[] = [];
  // Leaves folded into the stack; chunks handed off or being filled are not counted yet.
  private leaves = 0;
  // The subtree roots the last push merged with, smallest first: with the stack below the new
  // top, the siblings of the last leaf (see lastPath). Undefined until a leaf is pushed.
  private merged: string[] | undefined;
  private readonly handedOff: { chunk: SubtreeChunk; pending: PendingSubtree }[] = [];
  private filling: SubtreeChunk | undefined;
  private filled = 0;

  constructor(private readonly hasher: SubtreeHasher | undefined = lentHasher) {}

  /** The accumulator after `size` leaves whose perfect subtrees have these roots (hex, largest first). */
  static resume(size: number, frontier: readonly string[]): MerkleAccumulator {
    const resumed = new MerkleAccumulator();
    resumed.stack = frontier.map((hash) => Buffer.from(hash, 'hex').toString('latin1'));
    resumed.leaves = size;
    return resumed;
  }

  frontier(): string[] {
    this.foldAll();
    return this.stack.map((hash) => Buffer.from(hash, 'latin1').toString('hex'));
  }

  /** Adds the next leaf, a binary (latin1) string as {@link leafOfStoredHashBinary} makes. */
  push(leaf: string): void {
    const chunk = this.chunkForNextLeaf();
    if (chunk === undefined) return this.foldLeaf(leaf);
    chunk.values.write(leaf, this.filled * HASH_SIZE, 'latin1');
    chunk.isLeaf[this.filled++] = 1;
  }

  /**
   * Adds the leaf of a stored hash already known to be 64 lowercase hex digits, as
   * {@link leafOfHexHashBinary} makes it; with a hasher lent, the leaf is made where its chunk is hashed.
   */
  pushHexHash(hash: string): void {
    const chunk = this.chunkForNextLeaf();
    if (chunk === undefined) return this.foldLeaf(leafOfHexHashBinary(hash));
    chunk.values.write(hash, this.filled * HASH_SIZE, 'hex');
    chunk.isLeaf[this.filled++] = 0;
  }

  /**
   * The RFC 9162 inclusion proof of the last leaf pushed in the tree of every leaf pushed, without
   * the leaves: its path is the roots of the perfect subtrees of the leaves before it, smallest
   * first, which is the frontier before the push (what it merged with, then the stack below).
   * Undefined when no leaf was pushed since the accumulator was made or resumed.
   */
  lastPath(): Buffer[] | undefined {
    this.foldAll();
    if (this.merged === undefined) return undefined;
    const below = this.stack.slice(0, -1).reverse();
    return [...this.merged, ...below].map((hash) => Buffer.from(hash, 'latin1'));
  }

  root(): Buffer {
    this.foldAll();
    if (this.stack.length === 0) return Buffer.from(EMPTY_ROOT);
    let root = this.stack[this.stack.length - 1];
    for (let i = this.stack.length - 2; i >= 0; i--) root = nodeHashBinary(this.stack[i], root);
    return Buffer.from(root, 'latin1');
  }

  /** The chunk the next leaf goes into, handing off the full one first; undefined when it is folded here. */
  private chunkForNextLeaf(): SubtreeChunk | undefined {
    const hasher = this.hasher;
    if (hasher === undefined) return undefined;
    if (this.filling === undefined) {
      // A chunk is a perfect subtree only when it starts on a multiple of its size.
      if (this.leaves % hasher.chunkLeaves !== 0) return undefined;
    } else if (this.filled === hasher.chunkLeaves) {
      this.handedOff.push({ chunk: this.filling, pending: this.filling.submit() });
      this.foldHandedOff(MAX_HANDED_OFF);
    } else {
      return this.filling;
    }
    this.filling = hasher.chunk();
    this.filled = 0;
    return this.filling;
  }

  /** Folds in the chunks handed off whose roots are in, oldest first, and more until at most `keep` are left. */
  private foldHandedOff(keep: number): void {
    const size = this.hasher!.chunkLeaves;
    while (this.handedOff.length > 0 && (this.handedOff.length > keep || this.handedOff[0].pending.done)) {
      const { chunk, pending } = this.handedOff.shift()!;
      const root = pending.root();
      if (root === undefined) this.foldChunk(chunk, size);
      else this.foldSubtree(root, size);
    }
  }

  /** Everything pushed, folded into the stack, the chunk being filled leaf by leaf. */
  private foldAll(): void {
    if (this.hasher === undefined) return;
    this.foldHandedOff(0);
    if (this.filling !== undefined) this.foldChunk(this.filling, this.filled);
    this.filling = undefined;
  }

  private foldChunk(chunk: SubtreeChunk, count: number): void {
    for (let i = 0; i < count; i++) {
      const value = chunk.values.subarray(i * HASH_SIZE, (i + 1) * HASH_SIZE);
      if (chunk.isLeaf[i] === 1) {
        this.foldLeaf(value.toString('latin1'));
      } else {
        leafInput.set(value, 1);
        this.foldLeaf(sha256Binary(leafInput));
      }
    }
  }

  /** Folds in one leaf, keeping what it merged with for {@link lastPath}. */
  private foldLeaf(leaf: string): void {
    const merged = (this.merged ??= []);
    merged.length = 0;
    this.foldSubtree(leaf, 1, merged);
  }

  /**
   * Folds in a perfect subtree of `size` leaves, `size` a power of two dividing the leaves so far:
   * each trailing one bit of the count in units of `size` is a same-sized left sibling now
   * complete, merged with it (and, when given, recorded in `merged`, smallest first).
   */
  private foldSubtree(root: string, size: number, merged?: string[]): void {
    let hash = root;
    for (let bits = this.leaves / size; bits % 2 === 1; bits = Math.floor(bits / 2)) {
      const left = this.stack.pop()!;
      merged?.push(left);
      hash = nodeHashBinary(left, hash);
    }
    this.stack.push(hash);
    this.leaves += size;
  }
}

// Arithmetic rather than bit operators: sizes may pass 2^32, where JavaScript's bit operators wrap.
function isOdd(n: number): boolean {
  return n % 2 === 1;
}

function half(n: number): number {
  return Math.floor(n / 2);
}

function isPowerOfTwo(n: number): boolean {
  return n > 0 && largestPowerOfTwoAtMost(n) === n;
}

function largestPowerOfTwoAtMost(n: number): number {
  let k = 1;
  while (k * 2 <= n) k *= 2;
  return k;
}

/** The RFC's k: the largest power of two strictly below n, for n >= 2. */
function largestPowerOfTwoBelow(n: number): number {
  return largestPowerOfTwoAtMost(n - 1);
}

function isHash(value: unknown): value is Uint8Array {
  return value instanceof Uint8Array && value.length === HASH_SIZE;
}

function isHashList(value: unknown): value is readonly Uint8Array[] {
  return Array.isArray(value) && value.every(isHash);
}

function describeBytes(value: unknown): string {
  return value instanceof Uint8Array ? `${value.length} bytes` : `a ${typeof value}`;
}

function checkHash(value: unknown, what: string): void {
  if (!isHash(value)) {
    throw new MerkleError(`the ${what} is ${describeBytes(value)}, not a ${HASH_SIZE}-byte hash`, {
      length: value instanceof Uint8Array ? value.length : -1,
    });
  }
}

function checkLeafHashes(leafHashes: readonly Uint8Array[], count: number): void {
  if (!Array.isArray(leafHashes)) throw new MerkleError('leaf hashes must be an array', {});
  for (let i = 0; i < count; i++) {
    if (!isHash(leafHashes[i])) {
      throw new MerkleError(`leaf hash ${i} is ${describeBytes(leafHashes[i])}, not ${HASH_SIZE} bytes`, {
        index: i,
        length: leafHashes[i] instanceof Uint8Array ? leafHashes[i].length : -1,
      });
    }
  }
}

function checkSize(size: number, what: string): void {
  if (!Number.isSafeInteger(size) || size < 0) {
    throw new MerkleError(`${what} ${size} is not a safe non-negative integer`, { [camel(what)]: size });
  }
}

function checkIndex(index: number, size: number): void {
  if (!Number.isSafeInteger(index) || index < 0) {
    throw new MerkleError(`index ${index} is not a safe non-negative integer`, { index, size });
  }
  if (index >= size) throw new MerkleError(`index ${index} is not below size ${size}`, { index, size });
}

function checkRange(start: number, end: number, size: number): void {
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || start >= end || end > size) {
    throw new MerkleError(`leaf range [${start}, ${end}) is not a non-empty range within size ${size}`, {
      start,
      end,
      size,
    });
  }
}

function camel(words: string): string {
  return words.replace(/ (\w)/g, (_, letter: string) => letter.toUpperCase());
}
