import Router from '@koa/router';
import { approvalBranches } from '../../core/runs/approval-branches';
import type { StepDefinition } from '../../core/runs/workflow-graph';
import { readerOf } from '../../services/access/access';
import type { ServerContext } from '../../services/context';
import { listWaitingApprovalSteps } from '../../store/runs';
import { requireRole } from '../middleware/auth';
import { listEnvelope } from '../paging';
import { describeRoute } from '../openapi/registry';

/**
 * `GET /v1/approvals`: workflow approval steps waiting for a decision (spec part A 4.2). Viewer;
 * below admin, only the steps of runs the caller may read.
 */
export function approvalRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/approvals' });
  describeRoute({ method: 'get', path: '/v1/approvals', summary: 'List pending approvals', role: 'viewer' });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const waiting = await listWaitingApprovalSteps(server.sql, readerOf(caller));
    const approvals = waiting.map((step) => {
      const graph = (step.parent_graph ?? []) as StepDefinition[];
      const definition = graph.find((s) => s.name === step.step_name);
      return {
        id: step.id,
        workflow_run_id: step.parent_run_id,
        template_id: step.template_id,
        step: step.step_name,
        description: definition?.description ?? null,
        waited_behind: definition?.depends_on ?? [],
        ...approvalBranches(graph, { name: step.step_name!, if_denied: definition?.if_denied }),
        since: step.held_since?.toISOString() ?? null,
        expires_at: step.hold?.expires_at ?? null,
        state_digest: step.state_digest,
        approve: `POST /v1/runs/${step.id}/approve`,
        reject: `POST /v1/runs/${step.id}/reject`,
      };
    });
    ctx.body = listEnvelope('approvals', approvals, approvals.length, 0);
  });
  return router;
}
