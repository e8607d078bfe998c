import Router from '@koa/router';
import { z } from 'zod';
import { DomainError } from '../../core/errors';
import { runView } from '../../core/runs/run-view';
import { askFleet, draftScript, DRAFT_LANGUAGES, explainRun, proposalHold, proposeRun } from '../../services/ai/advice';
import type { ServerContext } from '../../services/context';
import { submitRun } from '../../services/runs/runs';
import type { RunExplanation } from '../../store/ai';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { noFields } from '../schemas/common';
import { parseInput } from '../validate';
import { runRequestOf, runSubmission } from './runs';
import { describeRoute } from '../openapi/registry';

/** Advisory AI (spec part A 1, 4.1, 4.2; docs/ai.md). Every route answers 503 naming --ai-provider while AI is off. */

const text = (field: string, max: number) =>
  z.string({ message: `${field} must be a string` }).trim().min(1, `${field} must not be empty`).max(max, `${field} must be at most ${max} characters`);

const draftInput = z.strictObject({
  language: z.enum(DRAFT_LANGUAGES, { message: `language must be one of ${DRAFT_LANGUAGES.join(', ')}` }),
  description: text('description', 4000),
});
const askInput = z.strictObject({ question: text('question', 2000) });
const proposeInput = z.strictObject({ request: text('request', 2000) });

function explanationView(e: RunExplanation) {
  return { run_id: e.run_id, provider: e.provider, model: e.model, answer: e.answer, explained_by: e.explained_by, explained_at: e.explained_at };
}

export function aiRoutes(server: ServerContext): Router {
  const router = new Router();

  describeRoute({ method: 'post', path: '/v1/runs/:id/explain', summary: "Explain a run with the advisory AI (kept answer shown again)", role: 'viewer', errors: [429, 502, 503] });
  router.post('/v1/runs/:id/explain', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    parseInput(noFields, ctx.request.body ?? {});
    const { explanation, created } = await explainRun(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = created ? 201 : 200;
    ctx.body = explanationView(explanation);
  });

  describeRoute({ method: 'post', path: '/v1/ai/draft', summary: 'Draft a step script for a person to review (never run)', role: 'operator', body: draftInput, errors: [429, 502, 503] });
  router.post('/v1/ai/draft', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(draftInput, ctx.request.body);
    const script = await draftScript(server, caller, originOf(ctx), input.language, input.description);
    ctx.body = { language: input.language, script, note: 'a draft for a person to review; Cairn never runs it' };
  });

  describeRoute({ method: 'post', path: '/v1/ai/ask', summary: 'Ask a fleet question over what the caller may read', role: 'viewer', body: askInput, errors: [429, 502, 503] });
  router.post('/v1/ai/ask', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const input = parseInput(askInput, ctx.request.body);
    ctx.body = { answer: await askFleet(server, caller, originOf(ctx), input.question) };
  });

  describeRoute({ method: 'post', path: '/v1/ai/propose-run', summary: 'Propose a run from a plain-language request, held for approval', role: 'operator', body: proposeInput, ok: 201, errors: [422, 429, 502, 503] });
  router.post('/v1/ai/propose-run', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(proposeInput, ctx.request.body);
    const origin = originOf(ctx);
    const proposal = await proposeRun(server, caller, origin, input.request);
    // The model's submission passes the same schema as POST /v1/runs; notification channels are
    // not taken from a model (they carry addresses and secrets).
    const candidate = proposal.run && typeof proposal.run === 'object' ? { ...(proposal.run as Record<string, unknown>) } : proposal.run;
    if (candidate && typeof candidate === 'object') delete (candidate as Record<string, unknown>).notifications;
    const checked = runSubmission.safeParse(candidate);
    if (!checked.success) {
      const issue = checked.error.issues[0];
      const field = ['run', ...issue.path.map(String)].join('.');
      throw new DomainError('unprocessable', `the AI's proposal is not a valid run submission: ${field}: ${issue.message}; nothing was submitted`, { field, proposal: candidate });
    }
    const request = runRequestOf(checked.data);
    request.hold = proposalHold(server, input.request, proposal.reasoning);
    const { run } = await submitRun(server, caller, origin, request);
    ctx.status = 201;
    ctx.set('Location', `/v1/runs/${run.id}`);
    ctx.body = { run: runView(run), reasoning: proposal.reasoning };
  });

  return router;
}
