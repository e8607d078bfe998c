import Router from '@koa/router';
import type { ServerContext } from '../../services/context';
import { createGrant, grantView, grantViewerOf, removeGrant } from '../../services/access/grants';
import { addMember, createGroup, groupView, membershipView, removeGroup, removeMember, visibleGroup } from '../../services/access/groups';
import { listGrants } from '../../store/access';
import { listGroups, listMembers, type GroupKind } from '../../store/groups';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery } from '../paging';
import { grantInput, groupInput, orgMemberInput, teamMemberInput } from '../schemas/access';
import { parseInput } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Teams, organizations, their members, and grants (spec part A 2.8, 4.11; part B 5.2 rules 3 to
 * 5, 8). An admin (a person) writes teams, organizations and memberships; anyone reads the teams
 * and organizations it belongs to and their members. Grants are written by an admin or by a
 * manager of their object (services/grants.ts). Every list is a configuration list (paged, or
 * by `id` values) holding only what the caller may see, `total` included.
 */
export function accessRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1' });
  const { sql } = server;

  for (const [kind, path, memberInput] of [
    ['team', 'teams', teamMemberInput],
    ['org', 'orgs', orgMemberInput],
  ] as const) {
    describeRoute({ method: 'post', path: `/v1/${path}`, summary: `Create one of ${path}`, role: 'admin', body: groupInput, ok: 201 });
    router.post(`/${path}`, async (ctx) => {
      const caller = requireRole(ctx, 'admin');
      const input = parseInput(groupInput, ctx.request.body);
      ctx.status = 201;
      ctx.body = groupView(await createGroup(sql, caller, originOf(ctx), kind, input.name));
    });

    describeRoute({ method: 'get', path: `/v1/${path}`, summary: `List ${path}`, role: 'viewer', query: configListQuery });
    router.get(`/${path}`, async (ctx) => {
      const caller = requireRole(ctx, 'viewer');
      const memberId = caller.account.role === 'admin' ? undefined : caller.account.id;
      await answerConfigList(ctx, path, (page) => listGroups(sql, kind as GroupKind, page, memberId), groupView);
    });

    describeRoute({ method: 'delete', path: `/v1/${path}/:id`, summary: `Delete one of ${path}`, role: 'admin', ok: 204 });
    router.delete(`/${path}/:id`, async (ctx) => {
      const caller = requireRole(ctx, 'admin');
      await removeGroup(sql, caller, originOf(ctx), kind, ctx.params.id);
      ctx.status = 204;
    });

    describeRoute({ method: 'post', path: `/v1/${path}/:id/members`, summary: `Add a member to one of ${path}`, role: 'admin', body: memberInput });
    router.post(`/${path}/:id/members`, async (ctx) => {
      const caller = requireRole(ctx, 'admin');
      const input = parseInput(memberInput, ctx.request.body);
      const { membership, status } = await addMember(sql, caller, originOf(ctx), kind, ctx.params.id, input);
      ctx.status = status;
      ctx.body = membershipView(membership);
    });

    describeRoute({ method: 'get', path: `/v1/${path}/:id/members`, summary: `List members of one of ${path}`, role: 'viewer', query: configListQuery });
    router.get(`/${path}/:id/members`, async (ctx) => {
      const caller = requireRole(ctx, 'viewer');
      const group = await visibleGroup(sql, caller, kind, ctx.params.id);
      await answerConfigList(ctx, 'members', (page) => listMembers(sql, kind as GroupKind, group.id, page), membershipView);
    });

    describeRoute({ method: 'delete', path: `/v1/${path}/:id/members/:userId`, summary: 'Remove a member', role: 'admin', ok: 204 });
    router.delete(`/${path}/:id/members/:userId`, async (ctx) => {
      const caller = requireRole(ctx, 'admin');
      await removeMember(sql, caller, originOf(ctx), kind, ctx.params.id, ctx.params.userId);
      ctx.status = 204;
    });
  }

  describeRoute({ method: 'post', path: '/v1/grants', summary: 'Create a grant', role: 'viewer', body: grantInput });
  router.post('/grants', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const input = parseInput(grantInput, ctx.request.body);
    const { grant, status } = await createGrant(sql, caller, originOf(ctx), input);
    ctx.status = status;
    ctx.body = grantView(grant);
  });

  describeRoute({ method: 'get', path: '/v1/grants', summary: 'List grants', role: 'viewer', query: configListQuery });
  router.get('/grants', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'grants', (page) => listGrants(sql, page, grantViewerOf(caller)), grantView);
  });

  describeRoute({ method: 'delete', path: '/v1/grants/:id', summary: 'Delete a grant', role: 'viewer', ok: 204 });
  router.delete('/grants/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await removeGrant(sql, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  return router;
}
