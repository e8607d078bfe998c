import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { signBundle } from '../../services/audit/audit-documents';
import { BUNDLE_VERSIONS, DEFAULT_BUNDLE_VERSION, type BundleVersion } from '../../core/audit/audit-bundle';
import { changeRegister } from '../../services/audit/register';
import { verifyInstall } from '../../services/audit/audit-verify';
import type { ServerContext } from '../../services/context';
import { sealDocument } from '../../services/audit/install-identity';
import { listAuditEntries } from '../../store/audit';
import { requireRole } from '../middleware/auth';
import { listEnvelope, pageQuery } from '../paging';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

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
  version: z.coerce
    .number({ message: 'version must be 1 or 2 (the bundle format)' })
    .refine((v): v is BundleVersion => (BUNDLE_VERSIONS as readonly number[]).includes(v), 'version must be 1 or 2 (the bundle format)')
    .default(DEFAULT_BUNDLE_VERSION),
});

const registerQuery = z.strictObject({
  from: z.string({ message: 'from must be a date or an RFC 3339 timestamp' }).optional(),
  to: z.string({ message: 'to must be a date or an RFC 3339 timestamp' }).optional(),
});

/** Answers a signed document: compact JWS, `application/jose`, the key named in `Service-Key-Id`. */
export function answerSigned(ctx: Context, server: ServerContext, jws: string): void {
  ctx.set('Service-Key-Id', server.identity.keyId);
  ctx.set('Cache-Control', 'no-store');
  ctx.type = 'application/jose';
  ctx.body = jws;
}

export function auditRoutes(server: ServerContext): Router {
  const router = new Router();

  // Public (spec part A 1.1 rule 3): the key a relying party pins, through a channel of its own.
  describeRoute({ method: 'get', path: '/.well-known/seal.json', summary: 'The audit seal: the public key that verifies audit signatures (public)' });
  router.get('/.well-known/seal.json', (ctx) => {
    ctx.body = sealDocument(server.identity);
  });

  describeRoute({ method: 'get', path: '/v1/audit', summary: 'List audit entries', role: 'admin', query: auditListQuery });
  router.get('/v1/audit', async (ctx) => {
    requireRole(ctx, 'admin');
    const query = parseInput(auditListQuery, queryObject(ctx.query));
    const { rows, total } = await listAuditEntries(server.sql, query);
    ctx.body = listEnvelope('entries', rows, total, query.offset);
  });

  // The period change register (spec part A 4.15): self-contained HTML, admin, Team tier.
  describeRoute({ method: 'get', path: '/v1/audit/register', summary: 'The change register: a self-contained HTML report', role: 'admin', query: registerQuery });
  router.get('/v1/audit/register', async (ctx) => {
    const caller = requireRole(ctx, 'admin');
    const query = parseInput(registerQuery, queryObject(ctx.query));
    const { html, from, to } = await changeRegister(server, caller, query);
    const day = (at: Date) => at.toISOString().slice(0, 10);
    ctx.set('Cache-Control', 'no-store');
    // Nothing in it loads anything: its styles are inline and it holds no script.
    ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    ctx.set('Content-Disposition', `inline; filename="change-register-${day(from)}-${day(to)}.html"`);
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = html;
  });

  describeRoute({ method: 'get', path: '/v1/audit/verify', summary: 'Verify the audit chain', role: 'viewer' });
  router.get('/v1/audit/verify', async (ctx) => {
    requireRole(ctx, 'viewer');
    ctx.body = await verifyInstall(server);
  });

  describeRoute({ method: 'get', path: '/v1/audit/bundle', summary: 'An audit evidence bundle for offline verification', role: 'admin', query: bundleQuery });
  router.get('/v1/audit/bundle', async (ctx) => {
    requireRole(ctx, 'admin');
    const query = parseInput(bundleQuery, queryObject(ctx.query));
    const bundle = await signBundle(server, { ...query, version: query.version as BundleVersion });
    answerSigned(ctx, server, bundle.document);
    // Version 2 is a JSON document carrying its signed part (docs/api.md).
    if (bundle.version === 2) ctx.type = 'application/json';
  });

  return router;
}
