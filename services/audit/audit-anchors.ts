import { ANCHOR_TYPE } from '../../core/audit/audit-offline';
import { ChainVerifier, type ChainCheckpoint } from '../../core/audit/audit-chain';
import { verifyDocument } from '../../core/audit/signing';
import { chainHead, insertAnchor, lastAnchoredSize, newestAnchor, wholeCheckedWithin } from '../../store/audit';
import type { Db } from '../../store/db';
import { LOCKS, tryTakeLock } from '../../store/locks';
import { reportCoordinates, scanWholeChain, type WholeChainReport } from './audit-verify';
import type { ServerContext } from '../context';

/**
 * Signed anchors over the audit chain: from time to time, and on a graceful stop, the chain is
 * checked and, when it is intact and longer than the last anchor, `{size, head_hash,
 * merkle_root}` is signed with the install key and stored. An anchor is what shows a tail cut off
 * cleanly or a chain rewritten and relinked (core/audit-chain.ts); it is only ever taken over a
 * chain that verifies, so it never vouches for tampering.
 *
 * Every server of an install runs this; a transaction-scoped advisory lock lets one anchor at a
 * time and the others skip that round. A round on an idle chain (no entries since the last
 * anchor) reads two rows and stops. Each anchor signs the chain's Merkle frontier too, so most
 * rounds check only the entries since the last anchor (resuming from its signed frontier) and
 * cost what the chain grew by, not its length. A round re-reads the whole chain when no anchor of
 * the install was taken after a whole check within WHOLE_CHECK_EVERY rounds' time, so tampering
 * anywhere still shows in the server log within that long, and a restarted, stopped or added
 * server adds no whole scans (on a long chain, a whole scan at every stop would slow every stop).
 */

/** Rounds between whole-chain checks: hourly at the default 60 s interval. */
export const WHOLE_CHECK_EVERY = 60;

export type AnchorOutcome =
  | { anchored: true; size: number; head_hash: string; merkle_root: string; signed: string; whole_check: boolean }
  | { anchored: false; why: 'locked' | 'empty' | 'unchanged' }
  | { anchored: false; why: 'chain_does_not_verify'; report: Exclude<WholeChainReport, { ok: true }> };

type Ctx = Pick<ServerContext, 'sql' | 'identity' | 'logger'>;

/**
 * One anchoring round; see the module comment. A broken chain is logged at error level, not
 * anchored. With `resume`, the round checks only what follows the last anchor when that anchor
 * carries a frontier signed by this install; otherwise, and by default, the whole chain. With
 * `wholeCheckEvery` (seconds) too, it resumes only while an anchor taken after a whole check is
 * younger than that.
 */
export async function takeAnchor(ctx: Ctx, options: { resume?: boolean; wholeCheckEvery?: number } = {}): Promise<AnchorOutcome> {
  return ctx.sql.begin(async (tx): Promise<AnchorOutcome> => {
    if (!(await tryTakeLock(tx, LOCKS.auditAnchor))) return { anchored: false, why: 'locked' };
    const head = await chainHead(tx);
    const last = await lastAnchoredSize(tx);
    if (head.seq === 0) return { anchored: false, why: 'empty' };
    if (head.seq <= last) return { anchored: false, why: 'unchanged' };

    const resume = options.resume && (options.wholeCheckEvery === undefined || (await wholeCheckedWithin(tx, options.wholeCheckEvery)));
    const from = resume ? await lastCheckpoint(ctx, tx) : undefined;
    const { report, checkpoint } = await scanWholeChain(ctx, { db: tx, from });
    if (!report.ok) {
      ctx.logger.error(reportCoordinates(report), 'the audit chain does not verify; no anchor taken');
      return { anchored: false, why: 'chain_does_not_verify', report };
    }
    if (report.count <= last) return { anchored: false, why: 'unchanged' };
    const signed = await ctx.identity.sign({
      type: ANCHOR_TYPE,
      install_id: ctx.identity.installId,
      size: report.count,
      head_hash: report.head_hash,
      merkle_root: report.merkle_root,
      frontier: checkpoint!.frontier,
      at: new Date().toISOString(),
    });
    const wholeCheck = from === undefined;
    await insertAnchor(tx, { size: report.count, head_hash: report.head_hash, merkle_root: report.merkle_root, signed, key_id: ctx.identity.keyId }, wholeCheck);
    ctx.logger.debug({ size: report.count, merkle_root: report.merkle_root, whole_check: wholeCheck }, 'audit anchor taken');
    return { anchored: true, size: report.count, head_hash: report.head_hash, merkle_root: report.merkle_root, signed, whole_check: wholeCheck };
  });
}

/** The newest anchor as a place to resume from, when its signature holds and it carries a frontier. */
async function lastCheckpoint(ctx: Ctx, db: Db): Promise<ChainCheckpoint | undefined> {
  const last = await newestAnchor(db);
  if (!last) return undefined;
  try {
    const { payload } = await verifyDocument(last.signed, ctx.identity.publicJwk);
    const { size, head_hash, frontier } = payload as Partial<ChainCheckpoint>;
    const checkpoint = { size, head_hash, frontier } as ChainCheckpoint;
    new ChainVerifier([], checkpoint); // throws on a malformed one
    return checkpoint;
  } catch {
    // A bad or older anchor: the whole scan reports whatever is wrong with it.
    return undefined;
  }
}

/**
 * Takes an anchor every `config.anchorInterval` seconds, one round at a time, and a last one on
 * `stop()` when the chain grew. Stop it after everything that appends entries has stopped and
 * before the database closes.
 */
export function startAnchoring(ctx: Ctx & Pick<ServerContext, 'config'>): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const wholeCheckEvery = WHOLE_CHECK_EVERY * ctx.config.anchorInterval;
  const round = () =>
    takeAnchor(ctx, { resume: true, wholeCheckEvery }).catch((err) => {
      ctx.logger.warn({ err: (err as Error).message }, 'audit anchoring round failed');
    });
  const timer = setInterval(() => {
    running = running.then(round);
  }, ctx.config.anchorInterval * 1000);
  timer.unref();
  return {
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await running;
      await round();
    },
  };
}
