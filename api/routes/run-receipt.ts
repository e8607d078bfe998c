import { decisionView } from '../../core/decision-view';
import Router from '@koa/router';
import { z } from 'zod';
import { RECEIPT_TYPE, SPARSE_WITHHELD_KINDS } from '../../core/audit-offline';
import { badRequest, notFound } from '../../core/errors';
import { consistencyProof, inclusionProof, rootFromLeafHashes, subtreeHashes } from '../../core/merkle';
import { runView } from '../../core/run-view';
import { scanWholeChain } from '../../services/audit-verify';
import type { ServerContext } from '../../services/context';
import type { StoredAuditEntry } from '../../store/audit';
import { listDecisionRecords } from '../../store/decisions';
import { getRun } from '../../store/runs';
import { requireRole } from '../middleware/auth';
import { parseInput, queryObject } from '../validate';
import { answerSigned, chainRefusal, hex, unbundlable } from './audit';
import { entryOf } from '../../core/audit-chain';

const receiptQuery = z.strictObject({
  sparse: z.enum(['0', '1', 'true', 'false'], { message: 'sparse must be 1 or 0' }).transform((v) => v === '1' || v === 'true').default(false),
  from: z.coerce
    .number({ message: 'from must be a positive whole number (a chain size)' })
    .int('from must be a positive whole number (a chain size)')
    .min(1, 'from must be a positive whole number (a chain size)')
    .optional(),
});

/**
 * `GET /v1/runs/{id}/receipt` (spec part A 4.1, part B 5.2 item 7): a signed receipt of what the
 * run did, each of its chain entries proved to belong to the whole chain. The full form (admin,
 * the default for one) adds the run's record and its decision records; the sparse form (`sparse=1`,
 * and always below admin) discloses only the entries that carry no outcome and no decision.
 * `from=<size>` adds a consistency proof that the chain only appended since that size.
 */
export function runReceiptRoutes(server: ServerContext): Router {
  const router = new Router();

  router.get('/v1/runs/:id/receipt', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(receiptQuery, queryObject(ctx.query));
    const run = await getRun(server.sql, ctx.params.id);
    if (!run) throw notFound(`run ${ctx.params.id}`);
    const form = caller.account.role === 'admin' && !query.sparse ? 'full' : 'sparse';

    // Read before the chain: a decision's record and its entry commit together, so every record
    // read here has its entry in the scan that follows.
    const decisions = form === 'full' ? await listDecisionRecords(server.sql, run.id) : [];
    const ofRun: StoredAuditEntry[] = [];
    const { report, leaves } = await scanWholeChain(server, {
      leaves: true,
      onEntry(entry) {
        if (entry.run_id === run.id) ofRun.push(entry);
      },
    });
    if (!report.ok) throw chainRefusal(report);
    if (report.count === 0) throw unbundlable('the audit chain is empty; there is nothing to prove');
    if (query.from !== undefined && query.from > report.count) {
      throw badRequest(`from must be at most the chain's size, ${report.count}`, { field: 'from' });
    }

    const disclosed = form === 'full' ? ofRun : ofRun.filter((entry) => !SPARSE_WITHHELD_KINDS.has(String(entry.body.kind)));
    const tree = subtreeHashes(leaves, report.count);
    const payload: Record<string, unknown> = {
      type: RECEIPT_TYPE,
      form,
      install_id: server.identity.installId,
      key_id: server.identity.keyId,
      issued_at: new Date().toISOString(),
      run_id: run.id,
      size: report.count,
      merkle_root: report.merkle_root,
      head_hash: report.head_hash,
      entries: disclosed.map((entry) => ({ entry: entryOf(entry), index: entry.seq - 1, proof: hex(inclusionProof(entry.seq - 1, report.count, tree)) })),
    };
    if (form === 'full') {
      payload.run = runView(run);
      payload.decisions = decisions.map((record) => decisionView(record));
    }
    if (query.from !== undefined) {
      payload.consistency = {
        from_size: query.from,
        from_root: rootFromLeafHashes(leaves.slice(0, query.from)).toString('hex'),
        proof: hex(consistencyProof(query.from, report.count, tree)),
      };
    }
    answerSigned(ctx, server, await server.identity.sign(payload));
  });

  return router;
}
