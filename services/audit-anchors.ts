import { ANCHOR_TYPE } from '../core/audit-offline';
import { chainHead, insertAnchor } from '../store/audit';
import { reportCoordinates, scanWholeChain, type WholeChainReport } from './audit-verify';
import type { ServerContext } from './context';

/**
 * Signed anchors over the audit chain: from time to time, and on a graceful stop, the chain is
 * checked whole and, when it is intact and longer than the last anchor, `{size, head_hash,
 * merkle_root}` is signed with the install key and stored. An anchor is what shows a tail cut off
 * cleanly or a chain rewritten and relinked (core/audit-chain.ts); it is only ever taken over a
 * chain that verifies, so it never vouches for tampering.
 *
 * Every server of an install runs this; a transaction-scoped advisory lock lets one anchor at a
 * time and the others skip that round. Each round re-reads the whole chain: simple, and it also
 * means tampering anywhere shows in the server log within one interval. A round on an idle chain
 * (no entries since the last anchor) reads two rows and stops.
 */

/** The advisory lock key, two int4s: "cair" in ASCII, and 1 for the anchorer. */
const LOCK_CLASS = 0x63616972;
const LOCK_ID = 1;

export type AnchorOutcome =
  | { anchored: true; size: number; head_hash: string; merkle_root: string; signed: string }
  | { anchored: false; why: 'locked' | 'empty' | 'unchanged' }
  | { anchored: false; why: 'chain_does_not_verify'; report: Exclude<WholeChainReport, { ok: true }> };

type Ctx = Pick<ServerContext, 'sql' | 'identity' | 'logger'>;

/** One anchoring round; see the module comment. A broken chain is logged at error level, not anchored. */
export async function takeAnchor(ctx: Ctx): Promise<AnchorOutcome> {
  return ctx.sql.begin(async (tx): Promise<AnchorOutcome> => {
    const [{ locked }] = await tx<{ locked: boolean }[]>`SELECT pg_try_advisory_xact_lock(${LOCK_CLASS}::int, ${LOCK_ID}::int) AS locked`;
    if (!locked) return { anchored: false, why: 'locked' };
    const head = await chainHead(tx);
    const [{ last }] = await tx<{ last: number }[]>`SELECT coalesce(max(size), 0)::bigint AS last FROM audit_anchors`;
    if (head.seq === 0) return { anchored: false, why: 'empty' };
    if (head.seq <= last) return { anchored: false, why: 'unchanged' };

    const { report } = await scanWholeChain(ctx, { db: tx });
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
      at: new Date().toISOString(),
    });
    await insertAnchor(tx, { size: report.count, head_hash: report.head_hash, merkle_root: report.merkle_root, signed, key_id: ctx.identity.keyId });
    ctx.logger.debug({ size: report.count, merkle_root: report.merkle_root }, 'audit anchor taken');
    return { anchored: true, size: report.count, head_hash: report.head_hash, merkle_root: report.merkle_root, signed };
  });
}

/**
 * Takes an anchor every `config.anchorInterval` seconds, one round at a time, and a last one on
 * `stop()` when the chain grew. Stop it after everything that appends entries has stopped and
 * before the database closes.
 */
export function startAnchoring(ctx: Ctx & Pick<ServerContext, 'config'>): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const round = () =>
    takeAnchor(ctx).catch((err) => {
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
