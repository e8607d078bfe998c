import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ChainVerifier, anchorOf, chainEntry, type AuditEntry } from '../../core/audit/audit-chain';
import { MerkleAccumulator, leafHash, offloadSubtrees, rootFromLeafHashes, type SubtreeHasher } from '../../core/audit/merkle';
import { CHUNK_LEAVES, merkleThreads, type MerkleThreads } from '../../services/audit/merkle-threads';

const C = CHUNK_LEAVES;
const storedHash = (i: number): Buffer => createHash('sha256').update(`entry ${i}`).digest();

let threads: MerkleThreads;
beforeAll(() => {
  threads = merkleThreads(1)!;
});
afterAll(() => threads.close());

/** Pushes leaves `from` to `to` as a verifier would: most as stored hashes, every 997th as a leaf already made. */
function pushRange(tree: MerkleAccumulator, from: number, to: number): void {
  for (let i = from; i < to; i++) {
    if (i % 997 === 5) tree.push(leafHash(storedHash(i)).toString('latin1'));
    else tree.pushHexHash(storedHash(i).toString('hex'));
  }
}

function treeState(tree: MerkleAccumulator) {
  return { root: tree.root().toString('hex'), frontier: tree.frontier(), lastPath: tree.lastPath()?.map((hash) => hash.toString('hex')) };
}

describe('an accumulator with threads lent', () => {
  test.each([0, 1, C - 1, C, C + 1, 2 * C, 2 * C + 1, 3 * C + 5])('gives the root, frontier and last path of %i leaves that one hashing them all here gives', (size) => {
    const here = new MerkleAccumulator(undefined);
    const lent = new MerkleAccumulator(threads);
    pushRange(here, 0, size);
    pushRange(lent, 0, size);
    expect(treeState(lent)).toEqual(treeState(here));
    expect(lent.root()).toEqual(rootFromLeafHashes(Array.from({ length: size }, (_, i) => leafHash(storedHash(i)))));
  });

  test('read mid-chunk, it folds what it holds and goes on handing off chunks from the next edge', () => {
    const here = new MerkleAccumulator(undefined);
    const lent = new MerkleAccumulator(threads);
    for (const [from, to] of [
      [0, C + 3],
      [C + 3, 3 * C + 1],
      [3 * C + 1, 5 * C],
      [5 * C, 6 * C + 9],
    ]) {
      pushRange(here, from, to);
      pushRange(lent, from, to);
      expect(treeState(lent)).toEqual(treeState(here));
    }
  });

  test('resumed off a chunk edge, it hashes here up to the edge and hands off whole chunks after', () => {
    const start = new MerkleAccumulator(undefined);
    pushRange(start, 0, 1000);
    const previous = offloadSubtrees(threads);
    const resumed = MerkleAccumulator.resume(1000, start.frontier());
    offloadSubtrees(previous);
    const here = MerkleAccumulator.resume(1000, start.frontier());
    pushRange(resumed, 1000, 4 * C + 2);
    pushRange(here, 1000, 4 * C + 2);
    // The resumed accumulator knows no leaf before the checkpoint, so neither has a path for the last one but from the frontier.
    expect(treeState(resumed)).toEqual(treeState(here));
  });
});

test('a chunk is hashed on the thread: its root is in while this thread only sleeps', async () => {
  const chunk = threads.chunk();
  for (let i = 0; i < C; i++) storedHash(i).copy(chunk.values, i * 32);
  const pending = chunk.submit();
  for (let waited = 0; !pending.done && waited < 10_000; waited += 20) await sleep(20);
  expect(pending.done).toBe(true);
  expect(Buffer.from(pending.root()!, 'latin1')).toEqual(rootFromLeafHashes(Array.from({ length: C }, (_, i) => leafHash(storedHash(i)))));
});

test('chunks whose threads have ended are hashed by the caller, to the same root', async () => {
  const ending = merkleThreads(1)!;
  const lent = new MerkleAccumulator(ending);
  const here = new MerkleAccumulator(undefined);
  pushRange(lent, 0, 2 * C + 7); // two chunks handed off, one of them maybe still on the thread
  await ending.close();
  pushRange(lent, 2 * C + 7, 4 * C + 1); // handed off to no thread
  pushRange(here, 0, 4 * C + 1);
  expect(treeState(lent)).toEqual(treeState(here));
});

test('chunks not back in time are hashed by the caller, and a thread that kept one waiting is sent nothing until it answers: the same roots', async () => {
  const impatient = merkleThreads(1, 0)!;
  // Made beforehand, so the pushes outrun the thread and the oldest chunk is read before it is in.
  const hashes = Array.from({ length: 40 * C + 1 }, (_, i) => storedHash(i).toString('hex'));
  try {
    const lent = new MerkleAccumulator(impatient);
    const here = new MerkleAccumulator(undefined);
    for (const [from, to] of [
      [0, 20 * C + 3],
      [20 * C + 3, 40 * C + 1],
    ]) {
      for (let i = from; i < to; i++) lent.pushHexHash(hashes[i]);
      for (let i = from; i < to; i++) here.pushHexHash(hashes[i]);
      expect(treeState(lent)).toEqual(treeState(here));
      await sleep(50); // the thread's answers are heard, and it is sent chunks again
    }
  } finally {
    await impatient.close();
  }
});

describe('the chain verifier with threads lent', () => {
  const chain: AuditEntry[] = [];
  for (let i = 0; i < 3 * C + 17; i++) {
    chain.push(chainEntry(chain.at(-1), { id: `aud_${i}`, at: new Date(Date.UTC(2026, 0, 1) + i * 1000), actor: 'admin', method: 'POST', path: '/v1/runs', fingerprint: '', outcome: 201, body: { kind: 'run.submitted', n: i } }));
  }
  const verified = (entries: readonly unknown[], anchors = [anchorOf(chain, C + 100), anchorOf(chain, 2 * C + 1)]) => {
    const verifier = new ChainVerifier(anchors);
    for (const entry of entries) verifier.push(entry);
    return { report: verifier.report(), checkpoint: verifier.checkpoint(), lastInclusion: verifier.lastInclusion()?.map((hash) => hash.toString('hex')) };
  };
  const lendingThreads = <T>(work: () => T): T => {
    const previous = offloadSubtrees(threads as SubtreeHasher);
    try {
      return work();
    } finally {
      offloadSubtrees(previous);
    }
  };

  test('reports an intact chain, its anchors inside chunks, as it does hashing here', () => {
    const here = verified(chain);
    expect(here.report).toMatchObject({ ok: true, count: chain.length });
    expect(lendingThreads(() => verified(chain))).toEqual(here);
  });

  test('reports a rewritten entry and the anchors it fails as it does hashing here', () => {
    const rewritten = chain.map((entry, i) => (i === C + 50 ? { ...entry, hash: entry.hash.toUpperCase() } : entry));
    const here = verified(rewritten, [anchorOf(chain, 2 * C + 1)]);
    expect(here.report).toMatchObject({ ok: false, reason: 'chain_break', broke_at: C + 51 });
    expect(lendingThreads(() => verified(rewritten, [anchorOf(chain, 2 * C + 1)]))).toEqual(here);
    const anchorsOnly = (lend: boolean) => {
      const work = () => {
        const verifier = ChainVerifier.judgingAnchorsOnly([anchorOf(chain, 2 * C + 1)]);
        for (const entry of rewritten) verifier.push(entry);
        return verifier.anchorProblems();
      };
      return lend ? lendingThreads(work) : work();
    };
    expect(anchorsOnly(false)).toEqual([expect.objectContaining({ size: 2 * C + 1, problem: 'root_mismatch' })]);
    expect(anchorsOnly(true)).toEqual(anchorsOnly(false));
  });
});
