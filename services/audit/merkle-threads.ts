import os from 'node:os';
import { Worker } from 'node:worker_threads';
import { HASH_SIZE, offloadSubtrees, type PendingSubtree, type SubtreeChunk, type SubtreeHasher } from '../../core/audit/merkle';

/** Leaves a chunk holds: 128 KiB of hashes, and at most that many leaves hashed on the caller's thread when the tree is read. */
export const CHUNK_LEAVES = 4096;

/**
 * How long a chunk's root is waited for before the caller hashes the chunk itself: a thread that
 * died without a word (killed, out of memory) must not hang a verification.
 */
const WAIT_LIMIT_MS = 10_000;

// A chunk's state word: the root is written after it only once it leaves PENDING.
const PENDING = 0;
const DONE = 1;
const FAILED = 2;

/**
 * The threads' code, as source: a thread starts without the TypeScript loader the rest of Cairn
 * runs under, so it is plain JavaScript needing only node:crypto. It makes MTH of a perfect
 * subtree as core/audit/merkle.ts does (RFC 9162 2.1.1): a leaf SHA-256(0x00 || value) unless
 * given as a leaf, a node SHA-256(0x01 || left || right), both as binary strings.
 */
const THREAD_SOURCE = `
const { parentPort } = require('node:worker_threads');
const crypto = require('node:crypto');
const digest = typeof crypto.hash === 'function'
  ? (data) => crypto.hash('sha256', data, 'binary')
  : (data) => crypto.createHash('sha256').update(data).digest('binary');
const leafInput = Buffer.alloc(1 + ${HASH_SIZE});
const nodeInput = Buffer.alloc(1 + 2 * ${HASH_SIZE});
nodeInput[0] = 0x01;
parentPort.on('message', ({ values, isLeaf, result, count }) => {
  const state = new Int32Array(result, 0, 1);
  try {
    const bytes = Buffer.from(values);
    const leafFlags = new Uint8Array(isLeaf);
    const stack = [];
    for (let i = 0; i < count; i++) {
      const at = i * ${HASH_SIZE};
      let hash;
      if (leafFlags[i] === 1) {
        hash = bytes.toString('latin1', at, at + ${HASH_SIZE});
      } else {
        bytes.copy(leafInput, 1, at, at + ${HASH_SIZE});
        hash = digest(leafInput);
      }
      for (let j = i; (j & 1) === 1; j >>>= 1) {
        nodeInput.write(stack.pop(), 1, 'latin1');
        nodeInput.write(hash, 1 + ${HASH_SIZE}, 'latin1');
        hash = digest(nodeInput);
      }
      stack.push(hash);
    }
    if (stack.length !== 1) throw new Error('a chunk of ' + count + ' leaves is not a perfect subtree');
    Buffer.from(result, 4, ${HASH_SIZE}).write(stack[0], 'latin1');
    Atomics.store(state, 0, ${DONE});
  } catch {
    Atomics.store(state, 0, ${FAILED});
  }
  Atomics.notify(state, 0);
  parentPort.postMessage(null);
});
`;

/** A pool of hashing threads; `close` ends them, after which every chunk is hashed by its caller. */
export interface MerkleThreads extends SubtreeHasher {
  close(): Promise<void>;
}

let lent = false;

/**
 * Lends this process's audit Merkle trees a pool of threads (`merkleThreads`), once however often
 * it is called: the server and the offline verifier call it as they start.
 */
export function lendMerkleThreads(): void {
  if (lent) return;
  lent = true;
  offloadSubtrees(merkleThreads());
}

interface Thread {
  readonly worker: Worker;
  /** State words of the chunks sent to it and not yet answered, oldest first: failed at once if it exits. */
  readonly open: Int32Array[];
  /**
   * Set when a wait for one of its chunks ran out, cleared when it next answers: while set, it is
   * sent nothing and its chunks are not waited for, so a thread gone quiet costs one wait, not one
   * a chunk.
   */
  stalled: boolean;
}

/**
 * Threads that hash whole chunks of audit Merkle trees, for `offloadSubtrees`: verifying a long
 * chain then hashes its entries on the caller's thread and builds the tree on these, at once. They
 * start at the first chunk handed off, never hold the process open, and each chunk's root is
 * handed back through shared memory, so the tree is read synchronously, as before. A chunk whose
 * thread failed is hashed by the caller, so the roots never depend on the threads.
 *
 * Undefined on a machine with one core, where a thread would only take turns with the caller.
 * `waitLimitMs` is how long a chunk's root is waited for before its caller hashes it.
 */
export function merkleThreads(threads: number = os.availableParallelism() - 1, waitLimitMs: number = WAIT_LIMIT_MS): MerkleThreads | undefined {
  if (threads < 1) return undefined;
  const pool: Thread[] = [];
  let started = false;
  let closed = false;
  let next = 0;

  // Threads that exit are not replaced: with none left every chunk is hashed by its caller.
  const start = () => {
    started = true;
    for (let i = 0; i < threads; i++) {
      let worker: Worker;
      try {
        worker = new Worker(THREAD_SOURCE, { eval: true });
      } catch {
        return;
      }
      const thread: Thread = { worker, open: [], stalled: false };
      // It answers its chunks in the order sent, each with a message once its state word is set.
      worker.on('message', () => {
        thread.open.shift();
        thread.stalled = false;
      });
      worker.on('error', () => undefined); // the exit below follows and says all there is
      worker.once('exit', () => {
        const at = pool.indexOf(thread);
        if (at >= 0) pool.splice(at, 1);
        for (const state of thread.open) {
          Atomics.compareExchange(state, 0, PENDING, FAILED);
          Atomics.notify(state, 0);
        }
      });
      // Last: a message listener added after it would hold the process open again.
      worker.unref();
      pool.push(thread);
    }
  };

  const submit = (values: SharedArrayBuffer, isLeaf: SharedArrayBuffer): PendingSubtree => {
    if (!started && !closed) start();
    const result = new SharedArrayBuffer(4 + HASH_SIZE);
    const state = new Int32Array(result, 0, 1);
    const ready = pool.filter((candidate) => !candidate.stalled);
    const thread = ready[next++ % Math.max(ready.length, 1)];
    if (thread === undefined) state[0] = FAILED;
    else {
      thread.open.push(state);
      thread.worker.postMessage({ values, isLeaf, result, count: CHUNK_LEAVES });
    }
    return {
      get done() {
        return Atomics.load(state, 0) !== PENDING;
      },
      root() {
        const deadline = Date.now() + (thread?.stalled ? 0 : waitLimitMs);
        for (let now = Date.now(); Atomics.load(state, 0) === PENDING && now < deadline; now = Date.now()) {
          Atomics.wait(state, 0, PENDING, deadline - now);
        }
        if (thread !== undefined && Atomics.load(state, 0) === PENDING) thread.stalled = true;
        return Atomics.load(state, 0) === DONE ? Buffer.from(result, 4, HASH_SIZE).toString('latin1') : undefined;
      },
    };
  };

  return {
    chunkLeaves: CHUNK_LEAVES,
    async close() {
      closed = true;
      await Promise.all(pool.map(({ worker }) => worker.terminate()));
    },
    chunk(): SubtreeChunk {
      const values = new SharedArrayBuffer(CHUNK_LEAVES * HASH_SIZE);
      const isLeaf = new SharedArrayBuffer(CHUNK_LEAVES);
      return { values: Buffer.from(values), isLeaf: new Uint8Array(isLeaf), submit: () => submit(values, isLeaf) };
    },
  };
}
