import Router from '@koa/router';
import type { ServerContext } from '../../services/context';
import { decodeJsonBytes } from '../../core/json-scan';
import { planImport, readsJson, requireImportFormat, runImport } from '../../services/imports';
import { parseJsonText } from '../middleware/body';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { importQuery } from '../schemas/imports';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/**
 * `POST /v1/import/{format}` (spec part A 4.14; part B 8): an admin's import of another system's
 * export. A preview by default (`apply=true` writes); the answer lists what is (or would be)
 * created and what is skipped, and why (services/imports.ts). Admin only: an import creates
 * credentials and notification targets, which only an admin may create.
 */
export function importRoutes(server: ServerContext): Router {
  const router = new Router();

  describeRoute({ method: 'post', path: '/v1/import/:format', summary: 'Import another system\'s export (preview unless apply=true)', errors: [413, 422], role: 'admin', query: importQuery });
  router.post('/v1/import/:format', async (ctx) => {
    const caller = requireRole(ctx, 'admin');
    const query = parseInput(importQuery, queryObject(ctx.query));
    requireImportFormat(ctx.params.format);
    // The body's bytes (api/middleware/body.ts): read as JSON now that the format is one read as
    // JSON; a format read from files (text or a zip archive) reads them itself.
    const bytes = ctx.request.rawBody ?? Buffer.alloc(0);
    const body = readsJson(ctx.params.format) ? parseJsonText(decodeJsonBytes(bytes)) : bytes;
    const plan = await planImport(ctx.params.format, body, { name: query.name, inventory: query.inventory });
    const apply = query.apply === 'true';
    const report = await runImport(server, caller, originOf(ctx), plan, apply);
    ctx.status = apply && report.counts.created > 0 ? 201 : 200;
    ctx.body = report;
  });

  return router;
}
