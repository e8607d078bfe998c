import { SOAK } from '../support/soak';
import { cpuTimed } from '../support/cpu-time';
import { createHash, randomBytes } from 'node:crypto';
import {
  EMPTY_ROOT,
  MerkleError,
  consistencyProof,
  consistencyProofIndices,
  inclusionProof,
  inclusionProofIndices,
  leafHash,
  leafOfStoredHash,
  leafOfStoredHashBinary,
  leafOfHexHashBinary,
  nodeHash,
  nodeHashBinary,
  rootFromLeafHashes,
  subtreeHashes,
  verifyConsistency,
  verifyInclusion,
} from '../../core/audit/merkle';

// ---------------------------------------------------------------------------------------------
// A naive reference: RFC 9162 2.1 read literally (recursive MTH, PATH, PROOF/SUBPROOF), and
// verifiers that walk the same recursion top-down. Slow, obvious, and written apart from
// core/merkle.ts so the fast code's bit arithmetic is checked against the definitions.
// ---------------------------------------------------------------------------------------------

const sha256 = (...parts: Buffer[]): Buffer => createHash('sha256').update(Buffer.concat(parts)).digest();
const refLeaf = (data: Buffer): Buffer => sha256(Buffer.from([0]), data);
const refNode = (left: Buffer, right: Buffer): Buffer => sha256(Buffer.from([1]), left, right);

function refK(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function refMTH(d: Buffer[]): Buffer {
  if (d.length === 0) return sha256();
  if (d.length === 1) return refLeaf(d[0]);
  const k = refK(d.length);
  return refNode(refMTH(d.slice(0, k)), refMTH(d.slice(k)));
}

function refPATH(m: number, d: Buffer[]): Buffer[] {
  if (d.length === 1) return [];
  const k = refK(d.length);
  if (m < k) return [...refPATH(m, d.slice(0, k)), refMTH(d.slice(k))];
  return [...refPATH(m - k, d.slice(k)), refMTH(d.slice(0, k))];
}

function refSUBPROOF(m: number, d: Buffer[], b: boolean): Buffer[] {
  if (m === d.length) return b ? [] : [refMTH(d)];
  const k = refK(d.length);
  if (m <= k) return [...refSUBPROOF(m, d.slice(0, k), b), refMTH(d.slice(k))];
  return [...refSUBPROOF(m - k, d.slice(k), false), refMTH(d.slice(0, k))];
}

const refPROOF = (m: number, d: Buffer[]): Buffer[] => (m === 0 ? [] : refSUBPROOF(m, d, true));

/** The root a PATH proves, undefined when the path does not fit the tree's shape. */
function refRootFromPath(index: number, size: number, leaf: Buffer, path: Buffer[]): Buffer | undefined {
  if (size === 1) return path.length === 0 ? leaf : undefined;
  if (path.length === 0) return undefined;
  const k = refK(size);
  const sibling = path[path.length - 1];
  const rest = path.slice(0, -1);
  if (index < k) {
    const left = refRootFromPath(index, k, leaf, rest);
    return left && refNode(left, sibling);
  }
  const right = refRootFromPath(index - k, size - k, leaf, rest);
  return right && refNode(sibling, right);
}

function refVerifyInclusion(leaf: Buffer, index: number, size: number, proof: Buffer[], root: Buffer): boolean {
  if (leaf.length !== 32 || root.length !== 32 || proof.some((p) => p.length !== 32)) return false;
  if (!Number.isInteger(index) || !Number.isInteger(size) || !(index >= 0 && index < size)) return false;
  const got = refRootFromPath(index, size, leaf, proof);
  return got !== undefined && got.equals(root);
}

/** The old and new roots a SUBPROOF proves, given the old root the verifier already holds. */
function refRootsFromSubproof(m: number, n: number, b: boolean, proof: Buffer[], oldRoot: Buffer): { old: Buffer; new: Buffer } | undefined {
  if (m === n) {
    if (b) return proof.length === 0 ? { old: oldRoot, new: oldRoot } : undefined;
    return proof.length === 1 ? { old: proof[0], new: proof[0] } : undefined;
  }
  if (proof.length === 0) return undefined;
  const k = refK(n);
  const last = proof[proof.length - 1];
  const rest = proof.slice(0, -1);
  if (m <= k) {
    const sub = refRootsFromSubproof(m, k, b, rest, oldRoot);
    return sub && { old: sub.old, new: refNode(sub.new, last) };
  }
  const sub = refRootsFromSubproof(m - k, n - k, false, rest, oldRoot);
  return sub && { old: refNode(last, sub.old), new: refNode(last, sub.new) };
}

function refVerifyConsistency(oldSize: number, newSize: number, oldRoot: Buffer, newRoot: Buffer, proof: Buffer[]): boolean {
  if (oldRoot.length !== 32 || newRoot.length !== 32 || proof.some((p) => p.length !== 32)) return false;
  if (!Number.isInteger(oldSize) || !Number.isInteger(newSize) || !(oldSize >= 0 && oldSize <= newSize)) return false;
  if (oldSize === 0) return proof.length === 0 && oldRoot.equals(sha256());
  const roots = refRootsFromSubproof(oldSize, newSize, true, proof, oldRoot);
  return roots !== undefined && roots.old.equals(oldRoot) && roots.new.equals(newRoot);
}

// ---------------------------------------------------------------------------------------------

const hex = (text: string): Buffer => Buffer.from(text, 'hex');
// Jest compares Buffers byte by byte and slowly; hex strings compare at once and print readably.
const hexes = (list: Buffer[]): string[] => list.map((b) => b.toString('hex'));
const MAX = 64;
const entries = Array.from({ length: MAX + 8 }, (_, i) => Buffer.from(`audit entry ${i}`));
const hashes = entries.map((entry) => leafHash(entry));
const roots = Array.from({ length: entries.length + 1 }, (_, size) => refMTH(entries.slice(0, size)));
const sizes = Array.from({ length: MAX }, (_, i) => i + 1);

function flipBit(bytes: Buffer, byte: number, bit: number): Buffer {
  const copy = Buffer.from(bytes);
  copy[byte] ^= 1 << bit;
  return copy;
}

describe('hashing', () => {
  test('the binary-string forms hash exactly as leafHash and nodeHash do', () => {
    const [a, b] = [randomBytes(32), randomBytes(32)];
    expect(leafOfStoredHash(a.toString('hex'))).toEqual(leafHash(a));
    expect(Buffer.from(leafOfStoredHashBinary(a.toString('hex')), 'latin1')).toEqual(leafHash(a));
    expect(Buffer.from(leafOfHexHashBinary(a.toString('hex')), 'latin1')).toEqual(leafHash(a));
    // A stored hash that is not 64 hex digits is a leaf of its text.
    expect(leafOfStoredHash('not a hash')).toEqual(leafHash(Buffer.from('not a hash', 'utf8')));
    expect(leafOfStoredHash(a.toString('hex').toUpperCase())).toEqual(leafHash(Buffer.from(a.toString('hex').toUpperCase(), 'utf8')));
    expect(Buffer.from(nodeHashBinary(a.toString('latin1'), b.toString('latin1')), 'latin1')).toEqual(nodeHash(a, b));
  });

  test('the empty tree has the SHA-256 of nothing as its root', () => {
    expect(rootFromLeafHashes([]).toString('hex')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(EMPTY_ROOT.toString('hex')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  test('a leaf and a node are hashed with different prefixes, so one cannot pass for the other', () => {
    const [a, b] = [hashes[0], hashes[1]];
    expect(leafHash(Buffer.concat([a, b])).equals(nodeHash(a, b))).toBe(false);
    expect(nodeHash(a, b).equals(refNode(a, b))).toBe(true);
    expect(leafHash(entries[0]).equals(refLeaf(entries[0]))).toBe(true);
  });

  test.each(sizes)('the root of %i leaves matches the recursive definition', (size) => {
    expect(rootFromLeafHashes(hashes.slice(0, size)).toString('hex')).toBe(roots[size].toString('hex'));
  });

  test('roots 100,000 leaves at the cost of hashing each node once', () => {
    const many = Array.from({ length: 100_000 }, (_, i) => leafHash(Buffer.from(`entry ${i}`)));
    const { value: root, ms } = cpuTimed(() => rootFromLeafHashes(many));
    expect(root).toHaveLength(32);
    // Against the floor measured here, on this machine: one SHA-256 per inner node (99,999 of
    // them), so a slow or busy machine moves both figures alike. A tree built by rehashing
    // subtrees costs many times the floor.
    const node = Buffer.alloc(65, 1);
    const { ms: floor } = cpuTimed(() => {
      for (let i = 1; i < many.length; i++) createHash('sha256').update(node).digest();
    });
    expect(ms).toBeLessThan(floor * 4 + 50);
    // The same answer as rooting the two halves at the RFC's split point (k = 65,536).
    expect(root.equals(nodeHash(rootFromLeafHashes(many.slice(0, 65_536)), rootFromLeafHashes(many.slice(65_536))))).toBe(true);
  });

  test('a subtree hash getter over 100,000 leaves answers 1,000 proofs quickly', () => {
    const many = Array.from({ length: 100_000 }, (_, i) => leafHash(Buffer.from(`entry ${i}`)));
    const { value: root, ms } = cpuTimed(() => {
      const getter = subtreeHashes(many);
      const top = getter(0, many.length);
      for (let i = 0; i < 1000; i++) {
        const index = (i * 99_991) % many.length;
        expect(verifyInclusion(many[index], index, many.length, inclusionProof(index, many.length, getter), top)).toBe(true);
      }
      return top;
    });
    // Rehashing the tree for each proof would take minutes; the levels are built once.
    expect(ms).toBeLessThan(5000);
    expect(root.equals(rootFromLeafHashes(many))).toBe(true);
  });
});

describe('known answers (certificate-transparency / transparency-dev test vectors)', () => {
  const leaves = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map(hex);
  const vectorHashes = leaves.map((leaf) => leafHash(leaf));
  const vectorRoots = [
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
    'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
    'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
    'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
    '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
    'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
    '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
  ];

  test.each(vectorRoots.map((root, size) => [size, root]))('the root of the first %i vector leaves is %s', (size, root) => {
    expect(rootFromLeafHashes(vectorHashes.slice(0, size as number)).toString('hex')).toBe(root);
  });

  test('leaf hashes match the published level-0 node hashes', () => {
    expect(vectorHashes.map((h) => h.toString('hex'))).toEqual([
      '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7',
      '07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      '4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658',
      'b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f',
      '46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1',
    ]);
  });

  const inclusionVectors: Array<[number, number, string[]]> = [
    [0, 8, [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ]],
    [5, 8, [
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ]],
    [2, 3, ['fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125']],
    [1, 5, [
      '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ]],
  ];

  test.each(inclusionVectors)('the inclusion proof of leaf %i in %i leaves is the published one', (index, size, proof) => {
    expect(inclusionProof(index, size, vectorHashes).map((h) => h.toString('hex'))).toEqual(proof);
    expect(verifyInclusion(vectorHashes[index], index, size, proof.map(hex), hex(vectorRoots[size]))).toBe(true);
  });

  const consistencyVectors: Array<[number, number, string[]]> = [
    [1, 1, []],
    [1, 8, [
      '96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7',
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      '6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4',
    ]],
    [6, 8, [
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ]],
    [2, 5, [
      '5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e',
      'bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b',
    ]],
    [6, 7, [
      '0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a',
      'b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f',
      'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
    ]],
  ];

  test.each(consistencyVectors)('the consistency proof from %i to %i leaves is the published one', (oldSize, newSize, proof) => {
    expect(consistencyProof(oldSize, newSize, vectorHashes).map((h) => h.toString('hex'))).toEqual(proof);
    expect(verifyConsistency(oldSize, newSize, hex(vectorRoots[oldSize]), hex(vectorRoots[newSize]), proof.map(hex))).toBe(true);
  });
});

describe('inclusion proofs match the RFC definition', () => {
  // One getter over every leaf: a subtree's hash does not depend on how big the tree around it is.
  const shared = subtreeHashes(hashes);

  test.each(sizes)('every leaf of a %i-leaf tree gets PATH(m, D[n]) and verifies', (size) => {
    for (let index = 0; index < size; index++) {
      const expected = refPATH(index, entries.slice(0, size));
      const plan = inclusionProofIndices(index, size);
      expect(hexes(plan.map(({ start, end }) => refMTH(entries.slice(start, end))))).toEqual(hexes(expected));
      expect(hexes(inclusionProof(index, size, hashes))).toEqual(hexes(expected));
      expect(hexes(inclusionProof(index, size, shared))).toEqual(hexes(expected));
      expect(verifyInclusion(hashes[index], index, size, expected, roots[size])).toBe(true);
      expect(refVerifyInclusion(hashes[index], index, size, expected, roots[size])).toBe(true);
    }
  });

  test('a plan covers the whole tree exactly once, also past 2^32 leaves', () => {
    for (const [index, size] of [[0, 1], [5, 6], [2 ** 32 + 3, 2 ** 33 + 1], [2 ** 40 - 1, 2 ** 40], [12345678901, 2 ** 52 + 17]]) {
      const ranges = [...inclusionProofIndices(index, size), { start: index, end: index + 1 }].sort((a, b) => a.start - b.start);
      expect(ranges[0].start).toBe(0);
      expect(ranges[ranges.length - 1].end).toBe(size);
      for (let i = 1; i < ranges.length; i++) expect(ranges[i].start).toBe(ranges[i - 1].end);
    }
  });

  test('verification agrees with the reference above 2^32 leaves, where bit operators would wrap', () => {
    for (const [index, size] of [[2 ** 32 + 3, 2 ** 33 + 1], [2 ** 32, 2 ** 32 + 1], [2 ** 45 + 2 ** 33 + 7, 2 ** 46 - 3]]) {
      const leaf = randomBytes(32);
      const proof = inclusionProofIndices(index, size).map(() => randomBytes(32));
      const root = refRootFromPath(index, size, leaf, proof)!;
      expect(verifyInclusion(leaf, index, size, proof, root)).toBe(true);
      expect(verifyInclusion(leaf, index, size, proof, flipBit(root, 0, 0))).toBe(false);
      expect(verifyInclusion(leaf, index + 1, size, proof, root)).toBe(false);
    }
  });
});

describe('consistency proofs match the RFC definition', () => {
  const shared = subtreeHashes(hashes);

  test.each(sizes)('every older size of a %i-leaf tree gets PROOF(m, D[n]) and verifies', (newSize) => {
    for (let oldSize = 0; oldSize <= newSize; oldSize++) {
      const expected = refPROOF(oldSize, entries.slice(0, newSize));
      const plan = consistencyProofIndices(oldSize, newSize);
      expect(hexes(plan.map(({ start, end }) => refMTH(entries.slice(start, end))))).toEqual(hexes(expected));
      expect(hexes(consistencyProof(oldSize, newSize, hashes))).toEqual(hexes(expected));
      expect(hexes(consistencyProof(oldSize, newSize, shared))).toEqual(hexes(expected));
      expect(verifyConsistency(oldSize, newSize, roots[oldSize], roots[newSize], expected)).toBe(true);
      expect(refVerifyConsistency(oldSize, newSize, roots[oldSize], roots[newSize], expected)).toBe(true);
    }
  });

  test('verification agrees with the reference above 2^32 leaves', () => {
    for (const [oldSize, newSize] of [[2 ** 32 + 3, 2 ** 33 + 1], [2 ** 32, 2 ** 34 + 5], [2 ** 45 + 7, 2 ** 46 - 3]]) {
      const oldRoot = randomBytes(32);
      const proof = consistencyProofIndices(oldSize, newSize).map(() => randomBytes(32));
      const proven = refRootsFromSubproof(oldSize, newSize, true, proof, oldRoot)!;
      expect(verifyConsistency(oldSize, newSize, proven.old, proven.new, proof)).toBe(true);
      expect(verifyConsistency(oldSize, newSize, proven.old, flipBit(proven.new, 31, 7), proof)).toBe(false);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Corrupted proofs. Every probe runs through both the fast verifier and the reference; the kinds
// in the "must fail" tables are rejected for every (index, size) up to 64 leaves.
// ---------------------------------------------------------------------------------------------

interface InclusionProbe {
  leaf: Buffer;
  index: number;
  size: number;
  proof: Buffer[];
  root: Buffer;
}

/**
 * The tree sizes whose every proof the corruption tests below tamper with, each tampering checked
 * against the reference: every size up to 17 (every shape of a tree up to four levels and one past
 * it), and the sizes around 32, 48 and 64. CAIRN_SOAK=1 tampers with every size up to 64.
 */
const corruptionSizes = SOAK ? sizes : sizes.filter((size) => size <= 17 || [31, 32, 33, 47, 48, 49, 63, 64].includes(size));

const inclusionCases: InclusionProbe[] = corruptionSizes.flatMap((size) =>
  Array.from({ length: size }, (_, index) => ({
    leaf: hashes[index],
    index,
    size,
    proof: refPATH(index, entries.slice(0, size)),
    root: roots[size],
  })),
);

const inclusionCorruptions: Array<[string, (c: InclusionProbe) => InclusionProbe[]]> = [
  ['a flipped bit in any proof node', (c) => c.proof.flatMap((node, i) => [0, 31].map((byte) => ({ ...c, proof: c.proof.map((n, j) => (j === i ? flipBit(node, byte, byte % 8) : n)) })))],
  ['a wrong index', (c) => [c.index - 1, c.index + 1, c.index ^ 2, c.size].filter((i) => i !== c.index && i >= 0).map((index) => ({ ...c, index }))],
  ['the hash of a different leaf', (c) => [{ ...c, leaf: hashes[c.index + 1] }]],
  ['a size of twice or half the tree', (c) => [c.size * 2, Math.floor(c.size / 2)].filter((size) => size !== c.size).map((size) => ({ ...c, size }))],
  ['a size of zero or a negative size', (c) => [{ ...c, size: 0 }, { ...c, size: -c.size }]],
  ['a proof one node short', (c) => (c.proof.length > 0 ? [{ ...c, proof: c.proof.slice(0, -1) }, { ...c, proof: c.proof.slice(1) }] : [])],
  ['a proof one node long', (c) => [{ ...c, proof: [...c.proof, c.root] }, { ...c, proof: [c.leaf, ...c.proof] }, { ...c, proof: [...c.proof, Buffer.alloc(32)] }]],
  ['a node replaced by another hash', (c) => c.proof.map((_, i) => ({ ...c, proof: c.proof.map((n, j) => (j === i ? hashes[MAX + 1] : n)) }))],
  ['two swapped nodes', (c) => c.proof.slice(1).map((_, i) => ({ ...c, proof: c.proof.map((n, j) => (j === i ? c.proof[i + 1] : j === i + 1 ? c.proof[i] : n)) }))],
  ['a wrong root', (c) => [{ ...c, root: flipBit(c.root, 0, 0) }, { ...c, root: roots[c.size + 1] }, { ...c, root: EMPTY_ROOT }]],
  ['a node or hash of the wrong length', (c) => [
    { ...c, leaf: c.leaf.subarray(0, 31) },
    { ...c, root: Buffer.concat([c.root, Buffer.alloc(1)]) },
    ...c.proof.map((_, i) => ({ ...c, proof: c.proof.map((n, j) => (j === i ? n.subarray(0, 31) : n)) })),
    { ...c, proof: [...c.proof, Buffer.alloc(0)] },
  ]],
  ['a non-integer index or size', (c) => [{ ...c, index: c.index + 0.5 }, { ...c, size: c.size + 0.5 }, { ...c, index: NaN }, { ...c, size: Infinity }]],
];

describe('corrupted inclusion proofs', () => {
  test.each(inclusionCorruptions)('%s does not verify', (_, corrupt) => {
    let probes = 0;
    const accepted: string[] = [];
    for (const c of inclusionCases) {
      for (const p of corrupt(c)) {
        probes++;
        const fast = verifyInclusion(p.leaf, p.index, p.size, p.proof, p.root);
        const ref = refVerifyInclusion(p.leaf, p.index, p.size, p.proof, p.root);
        if (fast || ref) accepted.push(`leaf ${c.index} of ${c.size} probed as ${p.index} of ${p.size}: fast ${fast}, reference ${ref}`);
      }
    }
    expect(accepted).toEqual([]);
    expect(probes).toBeGreaterThan(0);
  });

  test('any other size gives the same verdict as the reference: a size proves nothing unless signed with its root', () => {
    // A proof for size n can also fit a size with the same path shape; receipts bind size and root
    // under one signature for that reason. Here the fast verifier must agree with the reference on every one.
    let accepted = 0;
    const disagreements: string[] = [];
    for (const c of inclusionCases) {
      for (let size = 1; size <= MAX + 4; size++) {
        const fast = verifyInclusion(c.leaf, c.index, size, c.proof, c.root);
        if (fast !== refVerifyInclusion(c.leaf, c.index, size, c.proof, c.root)) disagreements.push(`leaf ${c.index} of ${c.size} as size ${size}`);
        if (fast && size !== c.size) accepted++;
      }
    }
    expect(disagreements).toEqual([]);
    expect(accepted).toBeGreaterThan(0);
  });

  test('malformed arguments return false instead of throwing', () => {
    const c = inclusionCases[10];
    const bad: unknown[][] = [
      [c.leaf, c.index, c.size, 'not a list', c.root],
      [c.leaf, c.index, c.size, [...c.proof.slice(0, -1), 'a string'], c.root],
      [c.leaf, c.index, c.size, null, c.root],
      ['leaf', c.index, c.size, c.proof, c.root],
      [c.leaf, c.index, c.size, c.proof, undefined],
      [c.leaf, '3', c.size, c.proof, c.root],
      [c.leaf, 0, Number.MAX_SAFE_INTEGER + 1, c.proof, c.root],
    ];
    for (const args of bad) {
      expect((verifyInclusion as (...a: unknown[]) => boolean)(...args)).toBe(false);
    }
    // A proof far longer than any tree is deep stops at the tree's depth.
    expect(verifyInclusion(c.leaf, 0, Number.MAX_SAFE_INTEGER, Array.from({ length: 200 }, () => c.root), c.root)).toBe(false);
  });
});

interface ConsistencyProbe {
  oldSize: number;
  newSize: number;
  oldRoot: Buffer;
  newRoot: Buffer;
  proof: Buffer[];
}

// Proper prefixes only: an empty proof (old size 0 or equal sizes) has no nodes to corrupt.
const consistencyCases: ConsistencyProbe[] = corruptionSizes.flatMap((newSize) =>
  Array.from({ length: newSize - 1 }, (_, i) => i + 1).map((oldSize) => ({
    oldSize,
    newSize,
    oldRoot: roots[oldSize],
    newRoot: roots[newSize],
    proof: refPROOF(oldSize, entries.slice(0, newSize)),
  })),
);

const consistencyCorruptions: Array<[string, (c: ConsistencyProbe) => ConsistencyProbe[]]> = [
  ['a flipped bit in any proof node', (c) => c.proof.flatMap((node, i) => [0, 31].map((byte) => ({ ...c, proof: c.proof.map((n, j) => (j === i ? flipBit(node, byte, 4) : n)) })))],
  ['a wrong old size', (c) => [c.oldSize - 1, c.oldSize + 1, c.oldSize ^ 2, c.newSize + 1].filter((s) => s !== c.oldSize && s >= 0).map((oldSize) => ({ ...c, oldSize }))],
  ['a new size of twice or half the tree', (c) => [c.newSize * 2, Math.floor(c.newSize / 2)].map((newSize) => ({ ...c, newSize }))],
  ['an empty proof', (c) => [{ ...c, proof: [] }]],
  ['a proof one node short', (c) => [{ ...c, proof: c.proof.slice(0, -1) }, { ...c, proof: c.proof.slice(1) }]],
  ['a proof one node long', (c) => [
    { ...c, proof: [...c.proof, c.oldRoot] },
    { ...c, proof: [...c.proof, c.newRoot] },
    { ...c, proof: [c.oldRoot, ...c.proof] },
    { ...c, proof: [c.newRoot, ...c.proof] },
    { ...c, proof: [c.proof[0], ...c.proof] },
  ]],
  ['two swapped nodes', (c) => c.proof.slice(1).map((_, i) => ({ ...c, proof: c.proof.map((n, j) => (j === i ? c.proof[i + 1] : j === i + 1 ? c.proof[i] : n)) }))],
  ['a wrong old root', (c) => [{ ...c, oldRoot: flipBit(c.oldRoot, 0, 0) }, { ...c, oldRoot: roots[c.oldSize - 1] }]],
  ['a wrong new root', (c) => [{ ...c, newRoot: flipBit(c.newRoot, 31, 7) }, { ...c, newRoot: roots[c.newSize + 1] }]],
  ['swapped roots', (c) => [{ ...c, oldRoot: c.newRoot, newRoot: c.oldRoot }]],
  ['a node or root of the wrong length', (c) => [
    { ...c, oldRoot: c.oldRoot.subarray(1) },
    { ...c, newRoot: Buffer.concat([c.newRoot, Buffer.alloc(1)]) },
    ...c.proof.map((_, i) => ({ ...c, proof: c.proof.map((n, j) => (j === i ? n.subarray(0, 31) : n)) })),
  ]],
];

describe('corrupted consistency proofs', () => {
  test.each(consistencyCorruptions)('%s does not verify', (_, corrupt) => {
    let probes = 0;
    const accepted: string[] = [];
    for (const c of consistencyCases) {
      for (const p of corrupt(c)) {
        probes++;
        const fast = verifyConsistency(p.oldSize, p.newSize, p.oldRoot, p.newRoot, p.proof);
        const ref = refVerifyConsistency(p.oldSize, p.newSize, p.oldRoot, p.newRoot, p.proof);
        if (fast || ref) accepted.push(`${c.oldSize} to ${c.newSize} probed as ${p.oldSize} to ${p.newSize}: fast ${fast}, reference ${ref}`);
      }
    }
    expect(accepted).toEqual([]);
    expect(probes).toBeGreaterThan(0);
  });

  test('any other new size gives the same verdict as the reference', () => {
    let accepted = 0;
    const disagreements: string[] = [];
    for (const c of consistencyCases) {
      for (let newSize = 0; newSize <= MAX + 4; newSize++) {
        const fast = verifyConsistency(c.oldSize, newSize, c.oldRoot, c.newRoot, c.proof);
        if (fast !== refVerifyConsistency(c.oldSize, newSize, c.oldRoot, c.newRoot, c.proof)) disagreements.push(`${c.oldSize} to ${c.newSize} as new size ${newSize}`);
        if (fast && newSize !== c.newSize) accepted++;
      }
    }
    expect(disagreements).toEqual([]);
    expect(accepted).toBeGreaterThan(0);
  });

  test('trees of equal size are consistent only with an empty proof and the same root', () => {
    expect(verifyConsistency(5, 5, roots[5], roots[5], [])).toBe(true);
    expect(verifyConsistency(5, 5, roots[5], roots[6], [])).toBe(false);
    expect(verifyConsistency(5, 5, roots[5], roots[5], [roots[5]])).toBe(false);
  });

  test('the empty tree is consistent with any tree, but only under its own root and an empty proof', () => {
    expect(verifyConsistency(0, 9, EMPTY_ROOT, roots[9], [])).toBe(true);
    expect(verifyConsistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])).toBe(true);
    expect(verifyConsistency(0, 9, roots[1], roots[9], [])).toBe(false);
    expect(verifyConsistency(0, 9, EMPTY_ROOT, roots[9], [EMPTY_ROOT])).toBe(false);
  });

  test('a shrinking tree or a malformed argument returns false instead of throwing', () => {
    const c = consistencyCases[20];
    expect(verifyConsistency(c.newSize, c.oldSize, c.newRoot, c.oldRoot, c.proof)).toBe(false);
    const bad: unknown[][] = [
      [c.oldSize, c.newSize, c.oldRoot, c.newRoot, 'not a list'],
      [c.oldSize, c.newSize, c.oldRoot, c.newRoot, [...c.proof, 7]],
      [c.oldSize, c.newSize, null, c.newRoot, c.proof],
      [-1, c.newSize, c.oldRoot, c.newRoot, c.proof],
      [c.oldSize, NaN, c.oldRoot, c.newRoot, c.proof],
      [c.oldSize + 0.5, c.newSize, c.oldRoot, c.newRoot, c.proof],
    ];
    for (const args of bad) {
      expect((verifyConsistency as (...a: unknown[]) => boolean)(...args)).toBe(false);
    }
    expect(verifyConsistency(3, Number.MAX_SAFE_INTEGER, roots[3], roots[9], Array.from({ length: 200 }, () => roots[3]))).toBe(false);
  });
});

describe('preconditions name the values that were wrong', () => {
  const thrown = (fn: () => unknown): MerkleError => {
    try {
      fn();
    } catch (error) {
      if (error instanceof MerkleError) return error;
      throw error;
    }
    throw new Error('expected a MerkleError');
  };

  test('an index at or past the size', () => {
    const error = thrown(() => inclusionProofIndices(7, 5));
    expect(error.message).toBe('index 7 is not below size 5');
    expect(error.details).toEqual({ index: 7, size: 5 });
    expect(() => inclusionProof(0, 0, [])).toThrow('index 0 is not below size 0');
  });

  test('a negative or fractional index or size', () => {
    expect(() => inclusionProofIndices(-1, 5)).toThrow('index -1 is not a safe non-negative integer');
    expect(() => inclusionProofIndices(1.5, 5)).toThrow('index 1.5 is not a safe non-negative integer');
    expect(() => inclusionProofIndices(0, 2 ** 53)).toThrow(`size ${2 ** 53} is not a safe non-negative integer`);
    expect(thrown(() => consistencyProofIndices(-2, 5)).details).toEqual({ oldSize: -2 });
    expect(thrown(() => consistencyProofIndices(2, NaN)).details).toEqual({ newSize: NaN });
  });

  test('an old size above the new size', () => {
    const error = thrown(() => consistencyProof(6, 5, hashes));
    expect(error.message).toBe('old size 6 is above new size 5');
    expect(error.details).toEqual({ oldSize: 6, newSize: 5 });
  });

  test('fewer leaf hashes than the size asked for', () => {
    const error = thrown(() => inclusionProof(2, 9, hashes.slice(0, 8)));
    expect(error.message).toBe('size 9 is above the 8 leaf hashes given');
    expect(error.details).toEqual({ size: 9, leafCount: 8 });
    expect(() => consistencyProof(3, 9, hashes.slice(0, 8))).toThrow('size 9 is above the 8 leaf hashes given');
  });

  test('a leaf hash that is not 32 bytes', () => {
    const broken = [...hashes.slice(0, 5)];
    broken[2] = broken[2].subarray(0, 31);
    const error = thrown(() => rootFromLeafHashes(broken));
    expect(error.message).toBe('leaf hash 2 is 31 bytes, not 32 bytes');
    expect(error.details).toEqual({ index: 2, length: 31 });
    expect(() => inclusionProof(0, 5, broken)).toThrow('leaf hash 2 is 31 bytes, not 32 bytes');
    // Only the leaves inside the requested tree are read, so a bad hash beyond it is not an error.
    expect(inclusionProof(0, 2, broken)).toEqual([hashes[1]]);
  });

  test('a child hash that is not 32 bytes', () => {
    expect(() => nodeHash(hashes[0], Buffer.alloc(20))).toThrow('the right child is 20 bytes, not a 32-byte hash');
  });

  test('a subtree hash getter that answers something other than a hash', () => {
    const error = thrown(() => inclusionProof(0, 4, () => Buffer.alloc(16)));
    expect(error.message).toBe('the subtree hash of leaves [1, 2) is 16 bytes, not 32 bytes');
    expect(error.details).toEqual({ start: 1, end: 2, length: 16 });
  });

  test('a range outside the tree asked of a subtree hash getter', () => {
    const getter = subtreeHashes(hashes, 10);
    expect(thrown(() => getter(4, 11)).details).toEqual({ start: 4, end: 11, size: 10 });
    expect(() => getter(3, 3)).toThrow('leaf range [3, 3) is not a non-empty range within size 10');
    expect(getter(4, 10).equals(refMTH(entries.slice(4, 10)))).toBe(true);
  });
});
