import Router from '@koa/router';
import { DomainError } from '../../core/errors';

/** The federation discovery documents (spec part A 1.1, part B 5.4), public like the seal document. */
const FEDERATION_DOCUMENTS = ['/.well-known/openid-configuration', '/.well-known/jwks.json'] as const;

/**
 * The service issues federated identity tokens only with `--federation-issuer` set; until then
 * (and this release has no such setting) both documents answer 404 (spec part B 7.1).
 */
export function federationRoutes(): Router {
  const router = new Router();
  for (const path of FEDERATION_DOCUMENTS) {
    router.get(path, () => {
      throw new DomainError('not_found', 'federation is not configured: --federation-issuer is not set');
    });
  }
  return router;
}
