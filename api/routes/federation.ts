import Router from '@koa/router';
import type { Context } from 'koa';
import { FEDERATION_ALGORITHM } from '../../core/federation/keys';
import type { ServerContext } from '../../services/context';
import { federationNotConfigured, listKeyViews, publishedKeySet, rotateKeys, rotateKeysInEmergency } from '../../services/federation/keys';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { listEnvelope } from '../paging';
import { describeRoute } from '../openapi/registry';

/** The public discovery documents' paths (spec part A 1.1 rule 4); the key set's is the discovery document's `jwks_uri`. */
const DISCOVERY_PATH = '/.well-known/openid-configuration';
const JWKS_PATH = '/.well-known/jwks.json';

/** Every claim a run identity token carries (core/federation/run-token.ts). */
const CLAIMS = ['iss', 'sub', 'aud', 'iat', 'nbf', 'exp', 'jti', 'run_id', 'run_attempt', 'template_id', 'project_id', 'requested_by', 'actor_kind', 'queue', 'credential_id'];

/**
 * Cairn as an OpenID issuer for runs (spec part A 1.1, 2.14, 4.10; part B 5.4): the public
 * discovery document and key set a cloud reads to verify a run's identity token, and the admin's
 * key list and rotations. Everything answers 404 until --federation-issuer is set.
 */
export function federationRoutes(server: ServerContext): Router {
  const router = new Router();
  const issuer = server.config.federationIssuer;
  const configured = (): string => {
    if (!issuer) throw federationNotConfigured();
    return issuer;
  };
  // Relying parties cache these; a minute keeps an emergency rotation's removal from waiting long on ours.
  const publicDocument = (ctx: Context, body: object) => {
    ctx.set('Cache-Control', 'public, max-age=60');
    ctx.body = body;
  };

  describeRoute({ method: 'get', path: DISCOVERY_PATH, summary: 'Federation: OpenID discovery document (public)', errors: [404] });
  router.get(DISCOVERY_PATH, (ctx) => {
    const iss = configured();
    publicDocument(ctx, {
      issuer: iss,
      jwks_uri: `${iss}${JWKS_PATH}`,
      response_types_supported: ['id_token'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: [FEDERATION_ALGORITHM],
      scopes_supported: ['openid'],
      claims_supported: CLAIMS,
    });
  });

  describeRoute({ method: 'get', path: JWKS_PATH, summary: 'Federation: the published key set (public)', errors: [404] });
  router.get(JWKS_PATH, async (ctx) => {
    configured();
    publicDocument(ctx, await publishedKeySet(server.sql));
  });

  describeRoute({ method: 'get', path: '/v1/federation/keys', summary: 'Federation: list signing keys', role: 'admin' });
  router.get('/v1/federation/keys', async (ctx) => {
    requireRole(ctx, 'admin');
    configured();
    const keys = await listKeyViews(server.sql);
    ctx.body = listEnvelope('keys', keys, keys.length, 0);
  });

  // A normal rotation and an emergency one answer alike: the keys as they stand after it.
  for (const [path, rotate] of [
    ['/v1/federation/keys/rotate', rotateKeys],
    ['/v1/federation/keys/rotate/emergency', rotateKeysInEmergency],
  ] as const) {
    describeRoute({ method: 'post', path: path, summary: path.endsWith('emergency') ? 'Federation: rotate signing keys in an emergency (old key withdrawn at once)' : 'Federation: rotate signing keys', role: 'admin', ok: 201 });
    router.post(path, async (ctx) => {
      requireRole(ctx, 'admin');
      configured();
      const keys = await rotate(server, originOf(ctx));
      ctx.status = 201;
      ctx.body = listEnvelope('keys', keys, keys.length, 0);
    });
  }

  return router;
}
