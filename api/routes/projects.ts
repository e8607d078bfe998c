import Router from '@koa/router';
import type { Context } from 'koa';
import type { ServerContext } from '../../services/context';
import { readerOf } from '../../services/access/access';
import {
  createProject,
  listProjectFiles,
  projectView,
  readableProject,
  readProjectFile,
  removeProject,
  replaceProject,
  type ProjectDraft,
} from '../../services/projects';
import { listProjectPage } from '../../store/projects';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { answerConfigList, configListQuery } from '../paging';
import { browseQuery, projectInput } from '../schemas/projects';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * Git projects (spec part A 4.5). Operators and admins create them; the creator manages one.
 * Below admin, reading and browsing need read on it, editing and deleting manage; the list holds
 * only what the caller may read. Create and PUT answer at once with `status` `pending` or
 * `updating`: the clone or fetch goes on after the answer (services/projects.ts).
 */
export function projectRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/projects' });
  const { sql } = server;

  describeRoute({ method: 'post', path: '/v1/projects', summary: 'Create a git project', body: projectInput, bodyExample: { name: 'web', url: 'https://git.example.com/ops/web.git', branch: 'main' }, role: 'operator', ok: 201 });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const project = await createProject(server, caller, originOf(ctx), draftOf(ctx));
    ctx.status = 201;
    ctx.set('Location', `/v1/projects/${project.id}`);
    ctx.body = projectView(project);
  });

  describeRoute({ method: 'get', path: '/v1/projects', summary: 'List projects', role: 'viewer', query: configListQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    await answerConfigList(ctx, 'projects', (page) => listProjectPage(sql, page, readerOf(caller)), projectView);
  });

  describeRoute({ method: 'get', path: '/v1/projects/:id', summary: 'Read a project', role: 'viewer' });
  router.get('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    ctx.body = projectView(await readableProject(sql, caller, ctx.params.id));
  });

  describeRoute({ method: 'put', path: '/v1/projects/:id', summary: 'Replace a project', body: projectInput, role: 'operator' });
  router.put('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    ctx.body = projectView(await replaceProject(server, caller, originOf(ctx), ctx.params.id, draftOf(ctx)));
  });

  describeRoute({ method: 'delete', path: '/v1/projects/:id', summary: 'Delete a project', role: 'operator', ok: 204 });
  router.delete('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    await removeProject(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = 204;
  });

  describeRoute({ method: 'get', path: '/v1/projects/:id/files', summary: 'The files of a project', role: 'viewer', query: browseQuery });
  router.get('/:id/files', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(browseQuery, queryObject(ctx.query));
    const project = await readableProject(sql, caller, ctx.params.id);
    ctx.body = { project_id: project.id, commit: project.commit_sha, ...(await listProjectFiles(server, project, query.path)) };
  });

  describeRoute({ method: 'get', path: '/v1/projects/:id/file', summary: 'The file of a project', role: 'viewer', body: projectInput, query: browseQuery });
  router.get('/:id/file', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(browseQuery, queryObject(ctx.query));
    const project = await readableProject(sql, caller, ctx.params.id);
    ctx.body = await readProjectFile(server, project, query.path);
  });

  return router;
}

function draftOf(ctx: Context): ProjectDraft {
  const input = parseInput(projectInput, ctx.request.body);
  return { name: input.name, url: input.url, branch: input.branch ?? null, org_id: input.org_id ?? null, credential_id: input.credential_id ?? null, id: input.id };
}
