import Router from '@koa/router';
import { z } from 'zod';
import { forbidden } from '../../core/errors';
import { runView } from '../../core/runs/run-view';
import { readableRun } from '../../services/access/access';
import type { ServerContext } from '../../services/context';
import { decisionView } from '../../core/runs/decision-view';
import { correctDecision, decideRun, refuseAgentDecision, refuseAgentRecordChange, redactDecision, separationOfDuties } from '../../services/runs/decisions';
import { mayReadReasons } from '../../services/runs/evidence';
import { listDecisionRecords } from '../../store/decisions';
import { originOf } from '../middleware/audit-origin';
import { callerOf, requireRole } from '../middleware/auth';
import { parseInput } from '../validate';
import { describeRoute } from '../openapi/registry';

/** Approver reasons and correction texts hold at most 1,000 characters (spec part B 8). */
const MAX_REASON_CHARS = 1000;
const reasonText = (field: string) =>
  z.string({ message: `${field} must be a string` }).max(MAX_REASON_CHARS, `${field} must be at most ${MAX_REASON_CHARS} characters`);

const decisionBody = z.strictObject({
  reason: reasonText('reason').optional(),
  masked_reason: reasonText('masked_reason').optional(),
  state_digest: z.string({ message: 'state_digest must be a string' }).optional(),
  plan_digest: z.string({ message: 'plan_digest must be a string' }).max(100, 'plan_digest must be at most 100 characters').optional(),
});
const correctionBody = z.strictObject({
  text: reasonText('text').min(1, 'text must not be empty'),
  masked_text: reasonText('masked_text').optional(),
});
const redactionBody = z.strictObject({
  category: z.enum(['personal_data', 'secret', 'other'], { message: 'category must be personal_data, secret or other' }),
});

/** Approve, reject, and the decision records of held runs (spec part A 2.7, 3.1, 4.1). */
export function runDecisionRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/runs' });

  for (const decision of ['approve', 'reject'] as const) {
    describeRoute({ method: 'post', path: `/v1/runs/:id/${decision}`, summary: `Record a ${decision} decision on a run`, role: 'admin', body: decisionBody });
    router.post(`/:id/${decision}`, async (ctx) => {
      // An agent is refused first, whatever its role: it never decides (spec part B 5.2 item 6).
      refuseAgentDecision(callerOf(ctx));
      const caller = requireRole(ctx, 'admin');
      const input = parseInput(decisionBody, ctx.request.body);
      const { run, record } = await decideRun(server, caller, originOf(ctx), ctx.params.id, decision, input);
      ctx.body = { run: runView(run), decision: decisionView(record) };
    });
  }

  describeRoute({ method: 'get', path: '/v1/runs/:id/decisions', summary: 'The decisions of a run', role: 'viewer' });
  router.get('/:id/decisions', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const run = await readableRun(server.sql, caller, ctx.params.id);
    // The records carry the reasons, which go only to an admin and the run's own account.
    if (!mayReadReasons(caller, run)) {
      throw forbidden(`the decisions of run ${run.id} are for an admin or the account that asked for the run`);
    }
    const records = await listDecisionRecords(server.sql, run.id);
    ctx.body = {
      run_id: run.id,
      decisions: records.map((record) => decisionView(record)),
      count: records.length,
      total: records.length,
      separation_of_duties: separationOfDuties(run, records) ?? null,
    };
  });

  describeRoute({ method: 'post', path: '/v1/runs/:id/decisions/:decision/corrections', summary: 'Correct a decision record', role: 'admin', body: correctionBody, ok: 201 });
  router.post('/:id/decisions/:decision/corrections', async (ctx) => {
    // As with approvals, an agent is refused first, whatever its role.
    refuseAgentRecordChange(callerOf(ctx));
    const caller = requireRole(ctx, 'admin');
    const input = parseInput(correctionBody, ctx.request.body);
    const record = await correctDecision(server, caller, originOf(ctx), ctx.params.id, ctx.params.decision, input);
    ctx.status = 201;
    ctx.body = decisionView(record);
  });

  describeRoute({ method: 'post', path: '/v1/runs/:id/decisions/:record/redact', summary: 'Redact a decision record\'s reason', role: 'admin', body: redactionBody });
  router.post('/:id/decisions/:record/redact', async (ctx) => {
    // As with approvals, an agent is refused first, whatever its role.
    refuseAgentRecordChange(callerOf(ctx));
    const caller = requireRole(ctx, 'admin');
    const input = parseInput(redactionBody, ctx.request.body);
    const record = await redactDecision(server, caller, originOf(ctx), ctx.params.id, ctx.params.record, input.category);
    ctx.body = decisionView(record);
  });

  return router;
}
