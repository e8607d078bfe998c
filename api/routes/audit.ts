import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { entryOf, GENESIS_HASH } from '../../core/audit-chain';
import { BUNDLE_TYPE } from '../../core/audit-offline';
import { ApiError, badRequest } from '../../core/errors';
import { inclusionProof } from '../../core/merkle';
import { scanWholeChain, verifyInstall, type WholeChainReport } from '../../services/audit-verify';
import type { ServerContext } from '../../services/context';
import { sealDocument } from '../../services/install-identity';
import { listAuditEntries, type StoredAuditEntry } from '../../store/audit';
import { requireRole } from '../middleware/auth';
import { listEnvelope, pageQuery } from '../paging';
import { parseInput, queryObject } from '../validate';

const auditListQuery = z.strictObject({
  ...pageQuery(100, 1000),
  order: z.enum(['asc', 'desc'], { message: 'order must be asc or desc' }).default('desc'),
});

const bundleQuery = z.strictObject({
  after: z.coerce
    .number({ message: 'after must be a whole number (a chain seq)' })
    .int('after must be a whole number (a chain seq)')
    .min(0, 'after must not be negative')
    .default(0),
  limit: z.coerce
    .number({ message: 'limit must be a positive whole number (a count of entries)' })
    .int('limit must be a positive whole number (a count of entries)')
    .min(1, 'limit must be a positive whole number (a count of entries)')
    .optional(),
});

/**
 * The 409 a bundle or a receipt answers when the chain it would sign does not verify (spec part
 * B 7.4), with the coordinates `GET /v1/audit/verify` reports.
 */
export function chainRefusal(report: Exclude<WholeChainReport, { ok: true }>): ApiError {
  const what = report.reason === 'chain_break' ? `the audit chain breaks at position ${report.broke_at}` : 'the audit chain no longer satisfies its anchors';
  return new ApiError(409, `${what}; nothing is signed over it: ${report.detail}`, {
    reason: report.reason,
    broke_at: report.broke_at,
    broke_seq: report.broke_seq,
    count: report.count,
    anchor_problems: report.reason === 'anchor_unsatisfied' ? report.anchor_problems : [],
    detail: report.detail,
  });
}

/** The 409 for a chain that verifies but from which no document can be made (an empty chain). */
export function unbundlable(message: string): ApiError {
  return new ApiError(409, message, { reason: 'chain_unbundlable', broke_at: 0, broke_seq: 0, count: 0, anchor_problems: [] });
}

/** Answers a signed document: compact JWS, `application/jose`, the key named in `Service-Key-Id`. */
export function answerSigned(ctx: Context, server: ServerContext, jws: string): void {
  ctx.set('Service-Key-Id', server.identity.keyId);
  ctx.set('Cache-Control', 'no-store');
  ctx.type = 'application/jose';
  ctx.body = jws;
}

export const hex = (hashes: Buffer[]) => hashes.map((h) => h.toString('hex'));

export function auditRoutes(server: ServerContext): Router {
  const router = new Router();

  // Public (spec part A 1.1 rule 3): the key a relying party pins, through a channel of its own.
  router.get('/.well-known/seal.json', (ctx) => {
    ctx.body = sealDocument(server.identity);
  });

  router.get('/v1/audit', async (ctx) => {
    requireRole(ctx, 'admin');
    const query = parseInput(auditListQuery, queryObject(ctx.query));
    const { rows, total } = await listAuditEntries(server.sql, query);
    ctx.body = listEnvelope('entries', rows, total, query.offset);
  });

  router.get('/v1/audit/verify', async (ctx) => {
    requireRole(ctx, 'viewer');
    ctx.body = await verifyInstall(server);
  });

  router.get('/v1/audit/bundle', async (ctx) => {
    requireRole(ctx, 'admin');
    const query = parseInput(bundleQuery, queryObject(ctx.query));
    const { after, limit } = query;
    const window: StoredAuditEntry[] = [];
    let prevHash = GENESIS_HASH;
    // The whole chain and every anchor are checked before the window applies (spec part B 7.4).
    const { report, anchors, leaves } = await scanWholeChain(server, {
      leaves: true,
      onEntry(entry, position) {
        if (position === after) prevHash = entry.hash;
        else if (position > after && (limit === undefined || position <= after + limit)) window.push(entry);
      },
    });
    if (!report.ok) throw chainRefusal(report);
    if (report.count === 0) throw unbundlable('the audit chain is empty; there is nothing to bundle');
    if (after > report.count) throw badRequest(`after must be at most the chain's size, ${report.count}`, { field: 'after' });

    const last = window[window.length - 1];
    const jws = await server.identity.sign({
      type: BUNDLE_TYPE,
      install_id: server.identity.installId,
      key_id: server.identity.keyId,
      issued_at: new Date().toISOString(),
      size: report.count,
      head_hash: report.head_hash,
      merkle_root: report.merkle_root,
      anchors: anchors.map((anchor) => anchor.signed),
      window: { after, prev_hash: prevHash },
      entries: window.map(entryOf),
      last_inclusion: last ? hex(inclusionProof(last.seq - 1, report.count, leaves)) : [],
    });
    answerSigned(ctx, server, jws);
  });

  return router;
}
