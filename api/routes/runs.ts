import { getRunPlan, type RunPlan } from '../../store/iac';
import { isPlanTool } from '../../tools/iac';
import Router from '@koa/router';
import { z } from 'zod';
import { notFound } from '../../core/errors';
import { readableRun, readerOf } from '../../services/access/access';
import { runView } from '../../core/runs/run-view';
import type { ServerContext } from '../../services/context';
import { jobRequest } from '../../services/runs/launch';
import { cancelRun, relaunchFailedRun, rerunRun, retryRun, submitRun, type RunRequest } from '../../services/runs/runs';
import { listChildRuns, listRuns } from '../../store/runs';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { listEnvelope, pageQuery } from '../paging';
import { ansibleInputOf, changeLabel, command, extraVars, idempotencyKey, optionalAnsibleFields, queue, requireCommandOrPlaybook, shards, timeout, tool } from '../schemas/run-fields';
import { parseInput, queryObject, storableTime } from '../validate';
import { notificationEntries } from '../schemas/notifications';
import { noFields } from '../schemas/common';
import { credentialIds } from '../schemas/credentials';
import { TERMINAL_STATUSES } from '../../core/runs/run';
import { describeRoute } from '../openapi/registry';
import { getPullRequestRun, type PullRequestRun } from '../../store/pull-requests';

export const runSubmission = z.strictObject({
  tool,
  // Required, except for an ansible run naming its `playbook` (refined below).
  command: command.optional(),
  // The ansible tool's playbook, inventory and controls (spec part A 2.1, 2.2); other tools ignore them.
  ...optionalAnsibleFields,
  extra_vars: extraVars.default({}),
  timeout: timeout.optional(),
  queue: queue.default(''),
  dry_run: z.boolean({ message: 'dry_run must be true or false' }).default(false),
  shards: shards.optional(),
  // The run's own notification channels (spec part A 2.1, 2.11).
  notifications: notificationEntries.optional(),
  // Credentials the run is given (spec part A 2.9); the caller needs use on each.
  credentials: credentialIds('credentials').optional(),
  // The change label the run carries (spec part A 2.1, 2.13; services/changes.ts).
  change: changeLabel.optional(),
}).superRefine((input, ctx) => {
  if (input.tool === 'ansible' && input.shards !== undefined && input.shards >= 2) {
    ctx.addIssue({ code: 'custom', path: ['shards'], message: 'the ansible tool does not split into shards: forks runs hosts in parallel' });
  }
  requireCommandOrPlaybook(input, ctx);
});


/** The run request a checked submission of POST /v1/runs (or an AI proposal, api/routes/ai.ts) makes. */
export function runRequestOf(input: z.output<typeof runSubmission>): RunRequest {
  const request = jobRequest({
    tool: input.tool,
    command: input.command ?? '',
    ansible: ansibleInputOf(input),
    extraVars: input.extra_vars,
    dryRun: input.dry_run,
    queue: input.queue,
    timeout: input.timeout,
    shards: input.shards,
  });
  if (input.notifications?.length) request.notifications = input.notifications;
  if (input.change !== undefined) request.spec = { ...request.spec, change: input.change };
  if (input.credentials?.length) request.credentials = input.credentials;
  return request;
}

const RUN_STATUSES = ['held', 'pending', 'running', ...TERMINAL_STATUSES] as const;

const runListQuery = z.strictObject({
  ...pageQuery(200, 1000),
  status: z.enum(RUN_STATUSES, { message: `status must be one of ${RUN_STATUSES.join(', ')}` }).optional(),
  tool: z.string().optional(),
  order: z.enum(['asc', 'desc'], { message: 'order must be asc or desc' }).default('desc'),
  after: storableTime('after').optional(),
  before: storableTime('before').optional(),
  q: z.string().max(200, 'q must be at most 200 characters').optional(),
  // Runs whose per-task results hold a task of this name (ansible runs, spec part A 4.1).
  task: z.string().min(1, 'task must not be empty').max(1024, 'task must be at most 1024 characters').optional(),
  template_id: z.string().min(1, 'template_id must not be empty').max(512, 'template_id must be at most 512 characters').optional(),
  requested_by: z.string().min(1, 'requested_by must not be empty').max(255, 'requested_by must be at most 255 characters').optional(),
  // "" is the default pool, so an empty queue is a filter of its own.
  queue: z.string().max(255, 'queue must be at most 255 characters').optional(),
});

export function runRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/runs' });

  describeRoute({ method: 'post', path: '/v1/runs', summary: 'Submit a run', role: 'operator', body: runSubmission, ok: 201, okDescription: 'The run (201 when created; 200 when an Idempotency-Key repeats an earlier submission).', errors: [409, 422, 429], bodyExample: { tool: 'shell', command: 'uname -a' } });
  router.post('/', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    const input = parseInput(runSubmission, ctx.request.body);
    const request = runRequestOf(input);
    const { run, created } = await submitRun(server, caller, originOf(ctx), request, idempotencyKey(ctx));
    ctx.status = created ? 201 : 200;
    ctx.set('Location', `/v1/runs/${run.id}`);
    ctx.body = runView(run);
  });

  describeRoute({ method: 'get', path: '/v1/runs', summary: 'List runs', role: 'viewer', query: runListQuery });
  router.get('/', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(runListQuery, queryObject(ctx.query));
    // Below admin, only the runs the caller may read, counted alike (services/access.ts).
    const { rows, total } = await listRuns(server.sql, { ...query, readerId: readerOf(caller) });
    // Rows are previews: a run's whole command and extra vars are in GET /v1/runs/{id}.
    ctx.body = listEnvelope('runs', rows.map((run) => runView(run, 'preview')), total, query.offset);
  });

  describeRoute({ method: 'get', path: '/v1/runs/:id', summary: 'Read a run', role: 'viewer' });
  router.get('/:id', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const run = await readableRun(server.sql, caller, ctx.params.id);
    // A terraform or opentofu run shows the plan its gate read (docs/api.md, "The plan gate").
    const plan = isPlanTool(run.tool) ? await getRunPlan(server.sql, run.id) : undefined;
    // A pull request review's plan or apply shows what was last reported to the forge (docs/api.md, Pull request review).
    const review = run.source_kind === 'trigger' && isPlanTool(run.tool) ? await getPullRequestRun(server.sql, run.id) : undefined;
    ctx.body = {
      ...runView(run),
      ...(isPlanTool(run.tool) ? { plan: plan ? planView(plan) : null } : {}),
      ...(review ? { pull_request_report: pullRequestReportView(review) } : {}),
    };
  });

  describeRoute({ method: 'post', path: '/v1/runs/:id/cancel', summary: 'Cancel a run', role: 'operator', body: noFields });
  router.post('/:id/cancel', async (ctx) => {
    const caller = requireRole(ctx, 'operator');
    parseInput(noFields, ctx.request.body);
    const run = await cancelRun(server, caller, originOf(ctx), ctx.params.id);
    ctx.status = run.finished_at ? 200 : 202;
    ctx.body = runView(run);
  });

  for (const [path, again] of [
    ['rerun', rerunRun],
    ['retry', retryRun],
    ['relaunch-failed', relaunchFailedRun],
  ] as const) {
    describeRoute({ method: 'post', path: `/v1/runs/:id/${path}`, summary: `Create one of ${path}`, role: 'operator', body: noFields, ok: 201 });
    router.post(`/:id/${path}`, async (ctx) => {
      const caller = requireRole(ctx, 'operator');
      parseInput(noFields, ctx.request.body);
      const run = await again(server, caller, originOf(ctx), ctx.params.id, idempotencyKey(ctx));
      ctx.status = 201;
      ctx.set('Location', `/v1/runs/${run.id}`);
      ctx.body = runView(run);
    });
  }

  // A pipeline's or workflow's steps, or a split's shards, in definition order.
  for (const [path, kinds] of [
    ['steps', ['pipeline', 'workflow']],
    ['shards', ['split']],
  ] as const) {
    describeRoute({ method: 'get', path: `/v1/runs/:id/${path}`, summary: `List ${path}`, role: 'viewer' });
    router.get(`/:id/${path}`, async (ctx) => {
      const caller = requireRole(ctx, 'viewer');
      // A step or shard carries its parent's requester and template, so whoever reads the parent reads them all.
      const run = await readableRun(server.sql, caller, ctx.params.id);
      if (!(kinds as readonly string[]).includes(run.kind)) {
        throw notFound(`${path} of run ${run.id}: it is a ${run.kind}, not a ${kinds.join(' or ')}`);
      }
      const children = await listChildRuns(server.sql, run.id);
      ctx.body = listEnvelope(path, children.map((child) => runView(child, 'preview')), children.length, 0);
    });
  }

  return router;
}

/** A review run's `pull_request_report`: the pull request, and the phase and commit status last reported, when, and a forge failure being retried. */
export function pullRequestReportView(row: PullRequestRun) {
  return {
    forge: row.forge,
    repository: row.repository,
    number: row.number,
    head_sha: row.head_sha,
    purpose: row.purpose,
    phase: row.report.phase ?? 'queued',
    state: row.report.state ?? null,
    reported_at: row.report.reported_at ?? null,
    comment_posted: row.report.comment_posted ?? false,
    failure: row.report.failure ?? null,
  };
}

/** A run's plan as the API shows it: what the gate read and decided, never the plan file itself. */
export function planView(plan: RunPlan) {
  return {
    digest: plan.digest,
    verdict: plan.verdict,
    planned_at: plan.planned_at.toISOString(),
    applied_at: plan.applied_at?.toISOString() ?? null,
    kept: plan.plan !== null,
    sealed: plan.plan_sealed,
    bytes: plan.plan_bytes,
    ...plan.classification,
  };
}
