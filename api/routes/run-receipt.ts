import Router from '@koa/router';
import { z } from 'zod';
import { signReceipt } from '../../services/audit/audit-documents';
import type { ServerContext } from '../../services/context';
import { requireRole } from '../middleware/auth';
import { parseInput, queryObject } from '../validate';
import { answerSigned } from './audit';
import { describeRoute } from '../openapi/registry';

const receiptQuery = z.strictObject({
  sparse: z.enum(['0', '1', 'true', 'false'], { message: 'sparse must be 1 or 0' }).transform((v) => v === '1' || v === 'true').default(false),
  from: z.coerce
    .number({ message: 'from must be a positive whole number (a chain size)' })
    .int('from must be a positive whole number (a chain size)')
    .min(1, 'from must be a positive whole number (a chain size)')
    .optional(),
});

/**
 * `GET /v1/runs/{id}/receipt` (spec part A 4.1, part B 5.2 item 7): a signed receipt of what the
 * run did (services/audit-documents.ts). `sparse=1` asks for the sparse form, which every caller
 * below admin gets anyway; `from=<size>` adds a consistency proof from that chain size.
 */
export function runReceiptRoutes(server: ServerContext): Router {
  const router = new Router();

  describeRoute({ method: 'get', path: '/v1/runs/:id/receipt', summary: 'The run\'s signed receipt', role: 'viewer', query: receiptQuery });
  router.get('/v1/runs/:id/receipt', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(receiptQuery, queryObject(ctx.query));
    answerSigned(ctx, server, await signReceipt(server, caller, ctx.params.id, query));
  });

  return router;
}
