import Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { DomainError, unauthorized } from '../../core/errors';
import type { ExecutionOutcome } from '../../core/runs/run-outcome';
import { runView } from '../../core/runs/run-view';
import type { ServerContext } from '../../services/context';
import {
  appendRelayEvents,
  appendRelayLog,
  claimRun,
  endAttempt,
  heldLease,
  MAX_CLAIM_WAIT_SECONDS,
  MAX_REPORT_ITEMS,
  projectArchive,
  reportFacts,
  reportHosts,
  reportTasks,
  renewLease,
  startRun,
  workerTokenMatches,
  type RelayWorker,
} from '../../services/relay/relay';
import { getRun } from '../../store/runs';
import { RELAY_PLAN_FILE_BYTES, RELAY_PLAN_JSON_BYTES } from '../../core/iac/plan';
import { reportPlan } from '../../services/relay/relay-plans';
import { HOST_VERDICTS, RESULT_KINDS } from '../../core/ansible/ansible-results';
import { MAX_FACTS_BYTES } from '../../core/ansible/facts';
import { listPolicies } from '../../store/policies';
import { fitsBytes } from '../schemas/common';
import { parseInput } from '../validate';
import { policyView } from './policies';
import { describeRoute } from '../openapi/registry';

/** The header a report call presents its per-claim capability in. */
export const CAPABILITY_HEADER = 'cairn-capability';

const workerInput = z.strictObject({
  id: z.string().regex(/^wrk_[A-Za-z0-9_-]{1,64}$/, 'worker.id is wrk_ followed by letters, digits, - or _'),
  queue: z.string().min(1).refine(fitsBytes(255), 'worker.queue is at most 255 bytes'),
  host: z.string().min(1).max(255),
  pid: z.number().int().min(0).max(2 ** 31 - 1),
  version: z.string().min(1).max(64),
});

const claimInput = z.strictObject({
  worker: workerInput,
  wait_seconds: z.number().min(0).max(MAX_CLAIM_WAIT_SECONDS).default(20),
});

const heartbeatInput = z.strictObject({ run_id: z.string().min(1).max(64), worker: workerInput });

const startInput = z.strictObject({
  worker: workerInput,
  // The public half of the worker's delivery key (a JWK): the execution is then answered sealed to it.
  delivery_key: z
    .record(z.string(), z.unknown())
    .refine((jwk) => jwk.kty === 'EC' || jwk.kty === 'OKP', 'delivery_key is an EC or OKP public JWK')
    .refine((jwk) => !('d' in jwk), 'delivery_key must be the public half only: never send the private key')
    .refine((jwk) => JSON.stringify(jwk).length <= 2048, 'delivery_key is at most 2 KiB')
    .optional(),
  work_root: z.string().regex(/^\/[^\0]*$/, 'work_root is an absolute path').max(1024),
});

const logInput = z.strictObject({
  // Masked output, base64; the 1 MiB body bound keeps one call at most about 750 KiB of output.
  data: z.base64('data is base64'),
});

const eventsInput = z.strictObject({
  events: z
    .array(
      z.strictObject({
        kind: z.string().regex(/^worker\.[a-z][a-z0-9_.]{0,62}$/, 'events[].kind is worker.<name>: a worker reports its own kinds only'),
        body: z.record(z.string(), z.unknown()).default({}),
      }),
    )
    .max(MAX_REPORT_ITEMS, `at most ${MAX_REPORT_ITEMS} events a call`),
});

const hostName = z.string().min(1).max(1024);
const kindCounts = z.strictObject(Object.fromEntries(RESULT_KINDS.map((k) => [k, z.number().int().min(0).max(1e9)])) as Record<(typeof RESULT_KINDS)[number], z.ZodNumber>);

const hostSummaryInput = z.strictObject({
  hosts: z
    .array(z.strictObject({ host: hostName, status: z.enum(HOST_VERDICTS), counts: kindCounts }))
    .max(MAX_REPORT_ITEMS, `at most ${MAX_REPORT_ITEMS} hosts a call: send the rest in further calls`),
  // The playbook reached its end (the callback plugin wrote its stats).
  ended: z.boolean().default(false),
});

const taskSummaryInput = z.strictObject({
  tasks: z
    .array(
      z.strictObject({
        seq: z.number().int().min(0),
        play: z.string().max(1024).nullable(),
        task: z.string().min(1).max(1024),
        counts: kindCounts.partial(),
        hosts: z.record(hostName, z.string().max(32)).refine((hosts) => Object.keys(hosts).length <= 100_000, 'at most 100000 hosts a task'),
        started_at: z.iso.datetime({ offset: true }).nullable(),
        finished_at: z.iso.datetime({ offset: true }).nullable(),
        duration_ms: z.number().int().min(0).nullable(),
      }),
    )
    .max(MAX_REPORT_ITEMS, `at most ${MAX_REPORT_ITEMS} tasks a call: send the rest in further calls`),
});

const hostFactsInput = z.strictObject({
  facts: z
    .array(z.strictObject({ host: hostName, size: z.number().int().min(0), text: z.string().max(MAX_FACTS_BYTES).optional() }))
    .max(MAX_REPORT_ITEMS, `at most ${MAX_REPORT_ITEMS} hosts' facts a call: send the rest in further calls`),
  // The digests of the facts the run was given (its manifest), so facts it did not gather again are not stored twice.
  supplied: z.record(hostName, z.string().regex(/^[0-9a-f]{64}$/)).default({}),
});

const outcomeInput = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('exited'), exit_code: z.number().int().nullable(), signal: z.string().max(32).nullable().default(null) }),
  z.strictObject({ kind: z.literal('spawn_failed'), message: z.string().min(1).max(2000) }),
  z.strictObject({
    kind: z.literal('bound_exceeded'),
    exit_code: z.number().int().nullable(),
    bound: z.enum(['memory', 'process', 'disk']),
    flag: z.string().max(32),
    limit: z.string().max(64),
  }),
  z.strictObject({ kind: z.literal('canceled') }),
  // A terraform or opentofu run that stopped where propose-apply said: held for approval, or refused.
  z.strictObject({ kind: z.literal('gated') }),
]);

const saveInput = z.strictObject({ outcome: outcomeInput });

const planReportInput = z.strictObject({
  // The saved plan file (binary), base64.
  plan: z.base64('plan is base64').min(1, 'plan is the saved plan file, base64'),
  // Its `show -json`; null when it is larger than a report carries (the plan is then held as unclassified).
  plan_json: z.string().max(RELAY_PLAN_JSON_BYTES, `plan_json is at most ${RELAY_PLAN_JSON_BYTES} characters: send null and plan_json_bytes`).nullable(),
  plan_json_bytes: z.number().int().min(0).optional(),
});

function outcomeOf(input: z.output<typeof outcomeInput>): ExecutionOutcome | { kind: 'gated' } {
  switch (input.kind) {
    case 'exited':
      return { kind: 'exited', exitCode: input.exit_code, signal: input.signal };
    case 'bound_exceeded':
      return { kind: 'bound_exceeded', exitCode: input.exit_code, bound: input.bound, flag: input.flag, limit: input.limit };
    default:
      return input;
  }
}

/**
 * The worker relay (spec part A 4.18, part B 5.1): served only with --worker-token. Every call
 * presents the worker token as its bearer; every call about a run presents the per-claim
 * capability its claim returned (the `Cairn-Capability` header), so a worker reaches only the run
 * it holds. The relay is where an untrusted worker meets the records, so it takes only what a
 * worker may say of its own run.
 */
export function relayRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/relay/v1' });
  const hashes = server.config.workerToken ?? [];
  router.use(async (ctx, next) => {
    const match = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'));
    if (!match || !workerTokenMatches(hashes, match[1])) throw unauthorized('the relay needs Authorization: Bearer <worker token> with a token this server was started with (--worker-token)');
    await next();
  });
  const held = (ctx: Context, runId?: string) => heldLease(server, runId, ctx.get(CAPABILITY_HEADER) || undefined);
  const worker = (input: RelayWorker) => input;

  describeRoute({ method: 'get', path: '/relay/v1/policies', summary: "The approval policies, for a worker's own checks (worker token)" });
  router.get('/policies', async (ctx) => {
    ctx.body = { policies: (await listPolicies(server.sql)).map(policyView) };
  });

  describeRoute({ method: 'post', path: '/relay/v1/claim', summary: 'Claim the oldest waiting attempt of a queue, waiting up to wait_seconds (204 when none) (worker token)', body: claimInput });
  router.post('/claim', async (ctx) => {
    const input = parseInput(claimInput, ctx.request.body);
    // A worker that hangs up stops the wait (the response closes before it is written).
    const hungUp = new AbortController();
    ctx.res.once('close', () => hungUp.abort());
    const claimed = await claimRun(server, worker(input.worker), input.wait_seconds, hungUp.signal);
    if (!claimed) {
      ctx.status = 204;
      return;
    }
    ctx.body = claimed;
  });

  describeRoute({ method: 'post', path: '/relay/v1/heartbeat', summary: "Renew the lease of a held attempt: continue, or cancel (worker token and the claim's Cairn-Capability)", body: heartbeatInput, errors: [409] });
  router.post('/heartbeat', async (ctx) => {
    const input = parseInput(heartbeatInput, ctx.request.body);
    const lease = await held(ctx, input.run_id);
    ctx.body = { action: await renewLease(server, lease, worker(input.worker)) };
  });

  describeRoute({ method: 'post', path: '/relay/v1/runs/:id/start', summary: "Start the held attempt: its execution (argv, environment, files) (worker token and the claim's Cairn-Capability)", body: startInput, errors: [409] });
  router.post('/runs/:id/start', async (ctx) => {
    const input = parseInput(startInput, ctx.request.body);
    const lease = await held(ctx, ctx.params.id);
    const answer = await startRun(server, lease, worker(input.worker), input.work_root, input.delivery_key);
    ctx.body = answer.state === 'running' ? { ...answer, run: runView(answer.run) } : answer;
  });

  describeRoute({ method: 'get', path: '/relay/v1/runs/:id', summary: "The held run, or its project tree as a tar (Accept: application/x-tar) (worker token and the claim's Cairn-Capability)" });
  router.get('/runs/:id', async (ctx) => {
    const lease = await held(ctx, ctx.params.id);
    // The run's project tree, for a worker with no shared projects directory.
    if (ctx.accepts('application/json', 'application/x-tar') === 'application/x-tar' && ctx.get('accept').includes('application/x-tar')) {
      const archive = await projectArchive(server, lease);
      if (!archive) throw new DomainError('not_found', `run ${ctx.params.id} has no project`);
      ctx.type = 'application/x-tar';
      ctx.body = archive;
      return;
    }
    const run = await getRun(server.sql, ctx.params.id);
    if (!run) throw new DomainError('not_found', `run ${ctx.params.id} does not exist`);
    ctx.body = runView(run);
  });

  describeRoute({ method: 'post', path: '/relay/v1/runs/:id/save', summary: "End the held attempt with its outcome (worker token and the claim's Cairn-Capability)", body: saveInput, errors: [409] });
  router.post('/runs/:id/save', async (ctx) => {
    const input = parseInput(saveInput, ctx.request.body);
    const lease = await held(ctx, ctx.params.id);
    const run = await endAttempt(server, lease, outcomeOf(input.outcome));
    ctx.body = { status: run?.status ?? null };
  });

  describeRoute({ method: 'post', path: '/relay/v1/runs/:id/log', summary: "Append masked output (base64) to the run's log (worker token and the claim's Cairn-Capability)", body: logInput, ok: 204 });
  router.post('/runs/:id/log', async (ctx) => {
    const input = parseInput(logInput, ctx.request.body);
    const lease = await held(ctx, ctx.params.id);
    await appendRelayLog(server, lease, Buffer.from(input.data, 'base64'));
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/relay/v1/runs/:id/events', summary: "Append worker.* events to the run (worker token and the claim's Cairn-Capability)", body: eventsInput, ok: 204 });
  router.post('/runs/:id/events', async (ctx) => {
    const input = parseInput(eventsInput, ctx.request.body);
    const lease = await held(ctx, ctx.params.id);
    await appendRelayEvents(server, lease, input.events);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/relay/v1/runs/:id/host-summary', summary: "Report per-host results in a bounded batch (worker token and the claim's Cairn-Capability)", body: hostSummaryInput, ok: 204 });
  router.post('/runs/:id/host-summary', async (ctx) => {
    const input = parseInput(hostSummaryInput, ctx.request.body);
    const lease = await held(ctx, ctx.params.id);
    await reportHosts(server, lease, input.hosts, input.ended);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/relay/v1/runs/:id/task-summary', summary: "Report per-task results in a bounded batch (worker token and the claim's Cairn-Capability)", body: taskSummaryInput, ok: 204 });
  router.post('/runs/:id/task-summary', async (ctx) => {
    const input = parseInput(taskSummaryInput, ctx.request.body);
    const lease = await held(ctx, ctx.params.id);
    await reportTasks(server, lease, input.tasks);
    ctx.status = 204;
  });

  describeRoute({ method: 'post', path: '/relay/v1/runs/:id/host-facts', summary: "Report gathered facts in a bounded batch (worker token and the claim's Cairn-Capability)", body: hostFactsInput, ok: 204 });
  router.post('/runs/:id/host-facts', async (ctx) => {
    const input = parseInput(hostFactsInput, ctx.request.body);
    const lease = await held(ctx, ctx.params.id);
    await reportFacts(server, lease, input.facts, input.supplied);
    ctx.status = 204;
  });

  // A terraform or opentofu run's plan: judged at the plan gate (propose-apply) or recorded as a drift check (drift-plan).
  for (const report of ['propose-apply', 'drift-plan'] as const) {
    describeRoute({
      method: 'post',
      path: `/relay/v1/runs/:id/${report}`,
      summary:
        report === 'propose-apply'
          ? "Hand the plan phase's saved plan and its show -json to the plan gate: apply it now, hold the run for approval, or refused (worker token and the claim's Cairn-Capability)"
          : "Hand over the plan a dry run (drift check) saved; the server seals and keeps it as the template's drift (worker token and the claim's Cairn-Capability)",
      body: planReportInput,
      errors: [409],
    });
    router.post(`/runs/:id/${report}`, async (ctx) => {
      const input = parseInput(planReportInput, ctx.request.body);
      const lease = await held(ctx, ctx.params.id);
      const plan = Buffer.from(input.plan, 'base64');
      if (plan.length > RELAY_PLAN_FILE_BYTES) throw new DomainError('invalid', `plan is ${plan.length} bytes: a relay plan report carries at most ${RELAY_PLAN_FILE_BYTES}`, { field: 'plan' });
      ctx.body = await reportPlan(server, lease, report, { plan, planJson: input.plan_json, planJsonBytes: input.plan_json_bytes });
    });
  }
  return router;
}
