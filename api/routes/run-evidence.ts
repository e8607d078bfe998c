import Router from '@koa/router';
import { z } from 'zod';
import { renderEvidenceHtml } from '../../core/runs/evidence';
import type { ServerContext } from '../../services/context';
import { buildEvidence } from '../../services/runs/evidence';
import { requireRole } from '../middleware/auth';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

const shown = (value: unknown) => {
  const text = typeof value === 'string' ? value : String(value);
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
};

const evidenceQuery = z.strictObject({
  format: z.enum(['html', 'json'], { error: (issue) => `format must be html or json, not ${shown(issue.input)}` }).default('html'),
});

/** `GET /v1/runs/{id}/evidence`: the run's evidence dossier as a self-contained HTML document, or as JSON. */
export function runEvidenceRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/runs' });

  describeRoute({ method: 'get', path: '/v1/runs/:id/evidence', summary: 'The run\'s evidence', role: 'viewer', query: evidenceQuery });
  router.get('/:id/evidence', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(evidenceQuery, queryObject(ctx.query));
    const dossier = await buildEvidence(server, caller, ctx.params.id);
    // What a caller is shown depends on who asks: never from a shared cache.
    ctx.set('Cache-Control', 'private, no-store');
    if (query.format === 'json') {
      ctx.body = dossier;
      return;
    }
    ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    ctx.set('Content-Disposition', `inline; filename="${dossier.run.id}-evidence.html"`);
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = renderEvidenceHtml(dossier);
  });

  return router;
}
