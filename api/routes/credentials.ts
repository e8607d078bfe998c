import Router from '@koa/router';
import { z } from 'zod';
import { BUILT_IN_KINDS } from '../../core/credentials/credential-kinds';
import { notFound } from '../../core/errors';
import { readerOf } from '../../services/access/access';
import type { ServerContext } from '../../services/context';
import {
  createCredential,
  createType,
  credentialView,
  credentialViews,
  kindView,
  readableCredential,
  removeCredential,
  removeType,
  replaceCredential,
  replaceType,
  typeView,
  withholdCredentialSecrets,
} from '../../services/credentials';
import { getCredentialType, listCredentialPage, listCredentialTypePage } from '../../store/credentials';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, listEnvelope, pageQuery, configListQuery } from '../paging';
import { fitsBytes } from '../schemas/common';
import { credentialInput, credentialTypeInput } from '../schemas/credentials';
import { parseInput, queryObject } from '../validate';
import type { Context } from 'koa';
import { describeRoute } from '../openapi/registry';

/**
 * Credentials and custom credential types (spec part A 2.9, 4.9; part B 5.2, 5.3). Operators and
 * admins store credentials; the account that stores one manages it. Below admin, reading one needs
 * read on it, editing and deleting manage (services/access.ts); the list holds only what the
 * caller may read and `total` counts only that. Custom types are admin only. No read ever carries
 * a secret.
 */
/** The credential list's query: the configuration paging and a `kind` filter. */
const credentialListQuery = z.strictObject({
  ...pageQuery(1000, 1000),
  id: z.array(z.string().refine(fitsBytes(512), 'id must be at most 512 bytes')).optional(),
  kind: z.string({ message: 'kind must be a string' }).optional(),
});

export function credentialRoutes(server: ServerContext): Router {
  const router = new Router();
  const { sql } = server;

  /** A credential body, its secret fields withheld from the request's fingerprint before it is parsed. */
  const draftOf = async (ctx: Context) => {
    await withholdCredentialSecrets(sql, originOf(ctx), ctx.request.body);
    return parseInput(credentialInput, ctx.request.body);
  };

  describeRoute({ method: 'get', path: '/v1/credential-kinds', summary: 'List credential kinds', role: 'viewer' });
  router.get('/v1/credential-kinds', async (ctx) => {
    requireRole(ctx, 'viewer');
    ctx.body = { kinds: BUILT_IN_KINDS.map(kindView), count: BUILT_IN_KINDS.length };
  });

  describeRoute({ method: 'post', path: '/v1/credentials', summary: 'Create a credential', body: credentialInput, role: 'operator', ok: 201 });
  router.post('/v1/credentials', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const { credential, type } = await createCredential(server, caller, originOf(ctx), await draftOf(ctx));
    ctx.status = 201;
    ctx.set('Location', `/v1/credentials/${credential.id}`);
    ctx.body = credentialView(credential, type);
  });

  describeRoute({ method: 'get', path: '/v1/credentials', summary: 'List credentials', role: 'viewer', query: credentialListQuery });
  router.get('/v1/credentials', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(credentialListQuery, queryObject(ctx.query, ['id']));
    const { rows, total } = await listCredentialPage(sql, { limit: query.limit, offset: query.offset, ids: query.id, kind: query.kind }, readerOf(caller));
    ctx.body = listEnvelope('credentials', await credentialViews(sql, rows), total, query.offset);
  });

  describeRoute({ method: 'get', path: '/v1/credentials/:id', summary: 'Read a credential', role: 'viewer' });
  router.get('/v1/credentials/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const { credential, type } = await readableCredential(sql, caller, ctx.params.id);
    ctx.body = credentialView(credential, type);
  });

  describeRoute({ method: 'put', path: '/v1/credentials/:id', summary: 'Replace a credential', body: credentialInput, role: 'operator' });
  router.put('/v1/credentials/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const { credential, type } = await replaceCredential(server, caller, originOf(ctx), ctx.params.id, await draftOf(ctx));
    ctx.body = credentialView(credential, type);
  });

  describeRoute({ method: 'delete', path: '/v1/credentials/:id', summary: 'Delete a credential', role: 'operator', ok: 204 });
  router.delete('/v1/credentials/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    await removeCredential(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/v1/credential-types', summary: 'Create a credential type', role: 'admin', body: credentialTypeInput, ok: 201 });
  router.post('/v1/credential-types', async (ctx) => {
    const caller = requireRole(ctx, 'admin');
    const type = await createType(server, caller, originOf(ctx), parseInput(credentialTypeInput, ctx.request.body));
    ctx.status = 201;
    ctx.set('Location', `/v1/credential-types/${type.id}`);
    ctx.body = typeView(type);
  });

  describeRoute({ method: 'get', path: '/v1/credential-types', summary: 'List credential types', role: 'admin', query: configListQuery });
  router.get('/v1/credential-types', async (ctx) => {
    requireRole(ctx, 'admin');
    await answerConfigList(ctx, 'credential_types', (page) => listCredentialTypePage(sql, page), typeView);
  });

  describeRoute({ method: 'get', path: '/v1/credential-types/:id', summary: 'Read a credential type', role: 'admin' });
  router.get('/v1/credential-types/:id', async (ctx) => {
    requireRole(ctx, 'admin');
    const type = await getCredentialType(sql, ctx.params.id);
    if (!type) throw notFound(`credential type ${ctx.params.id}`);
    ctx.body = typeView(type);
  });

  describeRoute({ method: 'put', path: '/v1/credential-types/:id', summary: 'Replace a credential type', role: 'admin', body: credentialTypeInput });
  router.put('/v1/credential-types/:id', async (ctx) => {
    requireRole(ctx, 'admin');
    ctx.body = typeView(await replaceType(server, originOf(ctx), ctx.params.id, parseInput(credentialTypeInput, ctx.request.body)));
  });

  describeRoute({ method: 'delete', path: '/v1/credential-types/:id', summary: 'Delete a credential type', role: 'admin', ok: 204 });
  router.delete('/v1/credential-types/:id', async (ctx) => {
    requireRole(ctx, 'admin');
    await removeType(server, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  return router;
}
