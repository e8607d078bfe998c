import Router from '@koa/router';
import { requireRole } from '../middleware/auth';
import { buildOpenApiDocument } from '../openapi/document';
import { describeRoute, describedRoutes } from '../openapi/registry';

/**
 * The OpenAPI 3.1 document of this server's HTTP API (spec part A 4.14's neighbour in issue 27),
 * built once from the route descriptions beside each route. It asks for a token of any role, like
 * every other read: whoever may call the API may read its description; nothing in it is per
 * install or secret, and the same text is in docs/api.md.
 */
export function openApiRoutes(): Router {
  const router = new Router();
  let document: string | undefined;

  describeRoute({
    method: 'get',
    path: '/v1/openapi.json',
    summary: 'The OpenAPI 3.1 document of this API',
    description: 'Generated from the zod schemas the routes validate with; every served route is in it.',
    role: 'viewer',
    okExample: { openapi: '3.1.0', info: { title: 'Cairn API', version: '1' }, paths: {} },
  });
  router.get('/v1/openapi.json', (ctx) => {
    requireRole(ctx, 'viewer');
    document ??= JSON.stringify(buildOpenApiDocument(describedRoutes(), '1'));
    ctx.type = 'application/json';
    ctx.set('Cache-Control', 'private, max-age=300');
    ctx.body = document;
  });

  return router;
}
