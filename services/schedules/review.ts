import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { forgeTokenContext } from '../../core/credentials/seal-contexts';
import { DomainError, badRequest, conflict, forbidden, statusOf } from '../../core/errors';
import { planSummary } from '../../core/iac/plan';
import { TERMINAL_STATUSES } from '../../core/runs/run';
import {
  commentCall,
  defaultApiUrl,
  forgeAuthHeader,
  readReviewDelivery,
  statusCall,
  type ForgeCall,
  type ReviewEvent,
  type ReviewForge,
} from '../../core/schedules/review';
import { deliveryIdempotencyKey } from '../../core/schedules/webhooks';
import { sha256 } from '../../core/sha256';
import { getAccountById } from '../../store/accounts';
import { forgeLinkOf } from '../../store/forge-links';
import { getRunPlan } from '../../store/iac';
import { getPullRequestRun, insertPullRequestRun, latestPullRequestPlan, updatePullRequestReport, type PullRequestReport, type PullRequestRun } from '../../store/pull-requests';
import { getRun } from '../../store/runs';
import { getTemplate } from '../../store/templates';
import { getTrigger, recordDeliveryOutcome, type Trigger } from '../../store/triggers';
import { isPlanTool } from '../../tools/iac';
import { PULL_REQUEST_WORKFLOW, type PullRequestNotice, type PullRequestWorkflowInput } from '../../workflows/definitions';
import { scheduleTaskQueue } from '../../workflows/ids';
import { recordMutation, type AuditOrigin } from '../audit/audit';
import { carryOut } from '../effects';
import { oweEffects } from '../../store/outbox';
import type { ServerContext } from '../context';
import { sendHttp, withPath } from '../notifications/notification-egress';
import { proposeSavedPlan } from '../iac/saved-plan';
import { decideRun } from '../runs/decisions';
import { launchUnattended, unattendedCaller, UnattendedSurveyRefusal } from '../runs/launch';
import { triggerFire, triggerTemplate } from './trigger-fire';

/**
 * Pull request review triggers (spec part A 2.4 rule 6, 2.7 rule 4, 4.7; part B 7.3; docs/api.md,
 * Pull request review). A pull request opened or pushed to, or a comment `/service plan`, plans the
 * pull request's head with the trigger's terraform or opentofu template (a dry run, as the trigger's
 * owner); `/service apply` proposes exactly the saved plan as the commenter's linked account and
 * approves it with the comment. What Cairn tells the forge (a commit status, a comment) is posted by
 * a Temporal workflow (workflows/pull-request.ts) whose activities retry a failing forge, each
 * attempt recorded on the run's `pull_request_report`.
 */

export interface ReviewAnswer {
  status: number;
  body: Record<string, unknown>;
  location?: string;
}

const FORGE_TIMEOUT_MS = 10_000;

/** What the hook answers and does for a delivery to a review trigger, once its signature is checked and its body read. */
export async function deliverReview(
  ctx: ServerContext,
  trigger: Trigger,
  origin: AuditOrigin,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  payload: unknown,
  deliveryId: string | undefined,
  received: Date,
): Promise<ReviewAnswer> {
  const event = readReviewDelivery(headers, payload);
  if (event.kind === 'ping') return { status: 200, body: { ping: true, trigger_id: trigger.id } };
  if (event.kind === 'unreadable') {
    const message = `the delivery is not a pull request event this trigger can read: it has no ${event.missing}`;
    await note(ctx, trigger.id, received, message);
    throw badRequest(message, { field: event.missing });
  }
  if (event.kind === 'other') return { status: 200, body: { skipped: true, reason: `${event.what} start nothing: this trigger plans pull requests`, trigger_id: trigger.id } };
  if (trigger.review && event.forge !== trigger.review.forge) {
    return { status: 200, body: { skipped: true, reason: `this trigger reviews ${trigger.review.forge} pull requests; the delivery is from ${event.forge}`, trigger_id: trigger.id } };
  }
  const pr = { forge: event.forge, repository: event.repository, number: event.number };
  if (event.kind === 'pull_request') return planPullRequest(ctx, trigger, origin, { ...pr, headSha: event.headSha }, deliveryId, received);
  if (event.command === 'plan') {
    const latest = await latestPullRequestPlan(ctx.sql, trigger.id, pr.repository, pr.number);
    if (!latest) return reply(ctx, trigger, pr, undefined, 'Cairn could not plan: no commit of this pull request is known yet; push a commit (or reopen the pull request) first.', 'plan_refused');
    return planPullRequest(ctx, trigger, origin, { ...pr, headSha: latest.head_sha }, deliveryId && `${deliveryId}:comment`, received);
  }
  return applyByComment(ctx, trigger, pr, event);
}

interface PullRequest {
  forge: ReviewForge;
  repository: string;
  number: number;
}

/** Plans the head commit: an unattended dry run of the template as the trigger's owner; its report follows from the workflow. */
async function planPullRequest(
  ctx: ServerContext,
  trigger: Trigger,
  origin: AuditOrigin,
  pr: PullRequest & { headSha: string },
  deliveryId: string | undefined,
  received: Date,
): Promise<ReviewAnswer> {
  try {
    const template = await triggerTemplate(ctx, trigger);
    if (template.kind !== 'job' || !template.tool || !isPlanTool(template.tool)) throw conflict(`template ${template.id} is not a terraform or opentofu template: only their plans can be reviewed`);
    const { run, created } = await launchUnattended(
      ctx,
      origin,
      template,
      await triggerFire(ctx, trigger),
      {
        dryRun: true,
        // A project-backed template plans the pull request's head commit, fetched by the worker.
        projectCommit: pr.headSha,
        extraVars: { pull_request_repository: pr.repository, pull_request_number: pr.number, pull_request_head_sha: pr.headSha },
        ...(deliveryId ? { idempotencyKey: deliveryIdempotencyKey(trigger.id, deliveryId) } : {}),
      },
    );
    const body = { run_id: run.id, status: run.status, trigger_id: trigger.id };
    if (!created) return { status: 200, body: { ...body, repeated: true }, location: `/v1/runs/${run.id}` };
    await oweReport(ctx, { runId: run.id }, `pr-report-${run.id}`, {
      run_id: run.id, trigger_id: trigger.id, forge: pr.forge, repository: pr.repository, number: pr.number, head_sha: pr.headSha, purpose: 'plan',
    });
    await note(ctx, trigger.id, received, null);
    return { status: 201, body, location: `/v1/runs/${run.id}` };
  } catch (err) {
    throw await planRefused(ctx, trigger, origin, pr, received, err);
  }
}

/**
 * A plan that could not start (spec part B 7.3): a survey nobody can answer is 409 naming its
 * questions, with its chain entry; another configuration error 409 naming the error only. Both are
 * commented on the pull request with an `error` status. Content that could not be read is 502 with
 * no comment; a failure of the server 502 `could not plan the pull request`, detail in the log.
 */
async function planRefused(ctx: ServerContext, trigger: Trigger, origin: AuditOrigin, pr: PullRequest & { headSha: string }, received: Date, err: unknown): Promise<DomainError> {
  let refusal: DomainError;
  let comment: string | undefined;
  if (err instanceof UnattendedSurveyRefusal) {
    refusal = err;
    comment = `Cairn could not plan this pull request: the template's survey asks ${err.questions.join(', ')} with no default, and an unattended plan cannot answer it.`;
    await recordMutation(ctx.sql, { ...origin, path: `/hooks/${trigger.id}/review/${pr.number}/refused/survey/${err.questions.join(',')}` }, 409, async (tx, entry) => {
      await recordDeliveryOutcome(tx, trigger.id, received, err.message);
      entry.body = { kind: 'trigger.refused', trigger_id: trigger.id, template_id: trigger.template_id, pull_request: pr.number, questions: err.questions };
    }).catch((recordErr) => ctx.logger.warn({ triggerId: trigger.id, err: recordErr }, 'recording a pull request plan refusal failed'));
  } else if (err instanceof DomainError && statusOf(err.code) < 500) {
    refusal = conflict(`this template cannot launch: ${err.message}`);
    comment = `Cairn could not plan this pull request: ${refusal.message}.`;
    await note(ctx, trigger.id, received, refusal.message);
  } else if (err instanceof DomainError && err.code === 'bad_gateway') {
    refusal = err;
  } else {
    ctx.logger.error({ triggerId: trigger.id, err }, 'a review trigger could not plan a pull request');
    refusal = new DomainError('bad_gateway', 'could not plan the pull request');
  }
  if (comment) {
    await oweReport(ctx, { notice: { triggerId: trigger.id, ...pr, state: 'error', description: 'plan refused', comment } }, `pr-notice-${trigger.id}-${pr.number}-${received.getTime()}`).catch((startErr) =>
      ctx.logger.warn({ triggerId: trigger.id, err: startErr }, 'telling the forge of a refused plan failed to start'),
    );
  }
  return refusal;
}

/**
 * `/service apply`: the commenter's linked account proposes the latest plan of the pull request (as
 * saved) and approves it with the comment, so the decision carries the `comment` object. Anything
 * that stops it is answered with one reply on the pull request, which never quotes the comment.
 */
async function applyByComment(ctx: ServerContext, trigger: Trigger, pr: PullRequest, event: Extract<ReviewEvent, { kind: 'comment' }>): Promise<ReviewAnswer> {
  const { comment } = event;
  const forge = ctx.config.forge?.forges.get(pr.forge);
  const link = forge ? await forgeLinkOf(ctx.sql, pr.forge, forge.baseUrl, comment.authorId) : undefined;
  if (!link) return reply(ctx, trigger, pr, comment.id, `Cairn did not apply: the ${pr.forge} account ${comment.authorLogin} is not linked to a Cairn account. Nothing was applied.`, 'apply_refused');
  const account = await getAccountById(ctx.sql, link.account_id);
  if (!account || account.disabled || account.role === 'viewer') {
    return reply(ctx, trigger, pr, comment.id, `Cairn did not apply: the Cairn account linked to ${comment.authorLogin} may not apply this template. Nothing was applied.`, 'apply_refused');
  }
  const latest = await latestPullRequestPlan(ctx.sql, trigger.id, pr.repository, pr.number);
  const planRun = latest && (await getRun(ctx.sql, latest.run_id));
  const plan = planRun && (await getRunPlan(ctx.sql, planRun.id));
  if (!latest || !planRun || planRun.status !== 'succeeded' || !plan || plan.plan === null || !plan.classification.classified) {
    return reply(ctx, trigger, pr, comment.id, 'Cairn did not apply: this pull request has no finished plan of its head commit that the gate could read in full (comment `/service plan` to plan again). Nothing was applied.', 'apply_refused');
  }
  const template = await getTemplate(ctx.sql, trigger.template_id);
  if (!template) return reply(ctx, trigger, pr, comment.id, `Cairn did not apply: template ${trigger.template_id} no longer exists. Nothing was applied.`, 'apply_refused');
  const caller = unattendedCaller({ kind: 'trigger', id: trigger.id, name: trigger.name, owner: account, actorKind: 'user' });
  const path = `/hooks/${trigger.id}/review/${pr.number}/apply`;
  const origin: AuditOrigin = { actor: account.username, method: 'POST', path, request: { method: 'POST', path, query: {}, body: { comment_id: comment.id, pull_request: pr.number } }, withheld: new Set() };
  const decided = {
    forge: pr.forge,
    repository: pr.repository,
    pull_request: pr.number,
    comment_id: comment.id,
    author: { id: comment.authorId, login: comment.authorLogin },
    body_sha256: `sha256:${sha256(comment.body).toString('hex')}`,
    plan_digest: plan.digest,
  };
  let runId: string;
  try {
    const proposed = await proposeSavedPlan(ctx, caller, origin, template, planRun.id, `applies pull request ${pr.repository}#${pr.number} by comment ${comment.id}`, {
      source: { kind: 'trigger', id: trigger.id },
      idempotencyKey: `review:${trigger.id}:comment:${comment.id}`,
      extraVars: { pull_request_repository: pr.repository, pull_request_number: pr.number, pull_request_head_sha: latest.head_sha },
    });
    if (!proposed.created) return { status: 200, body: { run_id: proposed.run.id, trigger_id: trigger.id, repeated: true }, location: `/v1/runs/${proposed.run.id}` };
    runId = proposed.run.id;
    await insertPullRequestRun(ctx.sql, { run_id: runId, trigger_id: trigger.id, forge: pr.forge, repository: pr.repository, number: pr.number, head_sha: latest.head_sha, purpose: 'apply' });
    await decideRun(ctx, caller, origin, runId, 'approve', { plan_digest: plan.digest, comment: decided });
  } catch (err) {
    if (err instanceof DomainError && (err.code === 'forbidden' || err.code === 'not_found')) {
      return reply(ctx, trigger, pr, comment.id, `Cairn did not apply: the Cairn account linked to ${comment.authorLogin} may not apply this template. Nothing was applied.`, 'apply_refused');
    }
    if (err instanceof DomainError && err.code === 'bad_gateway') {
      return reply(ctx, trigger, pr, comment.id, 'Cairn could not start the apply because inventory content could not be read. Nothing was applied; comment again later.', 'apply_refused');
    }
    if (err instanceof DomainError && statusOf(err.code) < 500) {
      return reply(ctx, trigger, pr, comment.id, `Cairn did not apply: this template cannot launch: ${err.message}. Nothing was applied.`, 'apply_refused');
    }
    ctx.logger.error({ triggerId: trigger.id, err }, 'an apply by pull request comment failed');
    throw new DomainError('bad_gateway', 'could not apply the pull request');
  }
  await oweReport(ctx, { runId }, `pr-report-${runId}`);
  return { status: 201, body: { run_id: runId, trigger_id: trigger.id, applied_by: account.username }, location: `/v1/runs/${runId}` };
}

/** The one reply to a comment (or a pull request) that started nothing; answered 200 with `refused` to the forge. */
async function reply(ctx: ServerContext, trigger: Trigger, pr: PullRequest, commentId: string | undefined, text: string, phase: string): Promise<ReviewAnswer> {
  await oweReport(ctx, { notice: { triggerId: trigger.id, ...pr, comment: text } }, `pr-reply-${trigger.id}-${commentId ?? `${pr.number}-${Date.now()}`}`);
  return { status: 200, body: { refused: true, reason: text, phase, trigger_id: trigger.id } };
}

async function note(ctx: ServerContext, triggerId: string, received: Date, error: string | null): Promise<void> {
  try {
    await recordDeliveryOutcome(ctx.sql, triggerId, received, error);
  } catch (err) {
    ctx.logger.warn({ triggerId, err }, "recording a delivery's outcome on its trigger failed");
  }
}

/**
 * Owes the workflow that tells the forge in the outbox, with the pull request's run when there is
 * one, in one transaction: a server that dies before it starts it leaves it to the dispatcher.
 */
async function oweReport(ctx: ServerContext, input: PullRequestWorkflowInput, workflowId: string, row?: Omit<PullRequestRun, 'report' | 'created_at'>): Promise<void> {
  const effects = await ctx.sql.begin(async (tx) => {
    if (row) await insertPullRequestRun(tx, row);
    return oweEffects(tx, [{ effect: 'pull_request.report', subject: workflowId, payload: input as unknown as Record<string, unknown> }], true);
  });
  await carryOut(ctx, effects, 'starting the pull request report', () => startReport(ctx, input, workflowId));
}

/** Starts the workflow that tells the forge; a repeated start (a redelivery) is harmless. */
export async function startReport(ctx: ServerContext, input: PullRequestWorkflowInput, workflowId: string): Promise<void> {
  try {
    await ctx.temporal.workflow.start<(input: PullRequestWorkflowInput) => Promise<void>>(PULL_REQUEST_WORKFLOW, {
      workflowId,
      taskQueue: scheduleTaskQueue(ctx.config.poolQueue),
      args: [input],
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

// ---- What the workflow's activities do (activities/review.ts) ----

/** Whether the run has ended (the workflow waits on a durable timer until it has). */
export async function pullRequestRunEnded(ctx: ServerContext, runId: string): Promise<boolean> {
  const run = await getRun(ctx.sql, runId);
  return !run || (TERMINAL_STATUSES as readonly string[]).includes(run.status);
}

/** What Cairn says on the forge about a run, by its phase. */
async function runMessage(ctx: ServerContext, row: PullRequestRun, ended: boolean): Promise<{ state: 'pending' | 'success' | 'failure' | 'error'; description: string; comment?: string; phase: string }> {
  const run = await getRun(ctx.sql, row.run_id);
  const short = row.head_sha.slice(0, 12);
  if (!run) return { state: 'error', description: 'the run is gone', phase: 'gone' };
  if (!ended) return { state: 'pending', description: row.purpose === 'plan' ? `planning ${short}` : `applying ${short}`, phase: row.purpose === 'plan' ? 'planning' : 'applying' };
  const plan = await getRunPlan(ctx.sql, run.id);
  const summary = plan ? planSummary(plan.classification) : 'no plan recorded';
  if (row.purpose === 'plan') {
    if (run.status !== 'succeeded') {
      return { state: 'failure', description: `plan ${run.status}`, phase: 'plan_failed', comment: `**Cairn plan** of \`${short}\` did not finish: run \`${run.id}\` ${run.status}. See the run's log in Cairn.` };
    }
    return {
      state: 'success',
      description: summary,
      phase: 'planned',
      comment: `**Cairn plan** of \`${short}\` (run \`${run.id}\`): ${summary}.\n\nPlan digest \`${plan?.digest ?? 'none'}\`. Comment \`/service apply\` to apply exactly this plan, or \`/service plan\` to plan again.`,
    };
  }
  if (run.status !== 'succeeded') {
    return { state: 'failure', description: `apply ${run.status}`, phase: 'apply_failed', comment: `**Cairn apply** of \`${short}\` did not finish: run \`${run.id}\` ${run.status}. See the run's log in Cairn.` };
  }
  return { state: 'success', description: `applied: ${summary}`.slice(0, 140), phase: 'applied', comment: `**Cairn apply** of \`${short}\` (run \`${run.id}\`) applied the saved plan \`${plan?.digest ?? 'none'}\`: ${summary}.` };
}

/** Posts the run's commit status (pending while it runs, then its outcome); the attempt is recorded on its report. */
export async function reportPullRequestStatus(ctx: ServerContext, runId: string, ended: boolean, attempt: AttemptInfo): Promise<void> {
  const row = await getPullRequestRun(ctx.sql, runId);
  if (!row) return;
  const trigger = await getTrigger(ctx.sql, row.trigger_id);
  if (!trigger) return;
  const message = await runMessage(ctx, row, ended);
  await attempted(ctx, runId, attempt, () => forgeCall(ctx, trigger, statusCall(row.forge as ReviewForge, row.repository, row.head_sha, message.state, message.description)));
  await updatePullRequestReport(ctx.sql, runId, { phase: message.phase, state: message.state, reported_at: new Date().toISOString(), failure: null });
}

/** Posts the run's one comment once it has ended. */
export async function reportPullRequestComment(ctx: ServerContext, runId: string, attempt: AttemptInfo): Promise<void> {
  const row = await getPullRequestRun(ctx.sql, runId);
  if (!row || row.report.comment_posted) return;
  const trigger = await getTrigger(ctx.sql, row.trigger_id);
  if (!trigger) return;
  const message = await runMessage(ctx, row, true);
  if (!message.comment) return;
  await attempted(ctx, runId, attempt, () => forgeCall(ctx, trigger, commentCall(row.forge as ReviewForge, row.repository, row.number, message.comment!)));
  await updatePullRequestReport(ctx.sql, runId, { comment_posted: true, reported_at: new Date().toISOString(), failure: null });
}

/** Posts a notice about no run (a refused plan or apply): an optional status, then the one comment. */
export async function postPullRequestNotice(ctx: ServerContext, notice: PullRequestNotice): Promise<void> {
  const trigger = await getTrigger(ctx.sql, notice.triggerId);
  if (!trigger) return;
  if (notice.state && notice.headSha) await forgeCall(ctx, trigger, statusCall(notice.forge, notice.repository, notice.headSha, notice.state, notice.description ?? notice.state));
  await forgeCall(ctx, trigger, commentCall(notice.forge, notice.repository, notice.number, notice.comment));
}

export interface AttemptInfo {
  attempt: number;
  /** When the next attempt is due should this one fail (ms since the epoch), or null when it is the last. */
  nextTryAt: number | null;
}

/** Runs a forge call; a failure is recorded on the run's report (attempts, error, next try) and rethrown for the retry. */
async function attempted(ctx: ServerContext, runId: string, attempt: AttemptInfo, call: () => Promise<void>): Promise<void> {
  try {
    await call();
  } catch (err) {
    const failure: PullRequestReport['failure'] = {
      attempts: attempt.attempt,
      error: err instanceof Error ? err.message : String(err),
      next_try_at: attempt.nextTryAt === null ? null : new Date(attempt.nextTryAt).toISOString(),
    };
    await updatePullRequestReport(ctx.sql, runId, { failure }).catch(() => undefined);
    throw err;
  }
}

/** The forge API base a trigger reports to: its own `api_url`, else the server's forge setting for its kind. */
function apiBase(ctx: ServerContext, trigger: Trigger): string {
  const review = trigger.review!;
  if (review.api_url) return review.api_url;
  const forge = ctx.config.forge?.forges.get(review.forge);
  if (!forge) throw forbidden(`review trigger ${trigger.id} names no api_url and this server has no ${review.forge} forge setting (--forge-${review.forge}-url)`);
  return defaultApiUrl(review.forge, forge.baseUrl);
}

/** One forge API write through the egress check (as notifications are sent); a non-2xx answer is an error naming its status only. */
async function forgeCall(ctx: ServerContext, trigger: Trigger, call: ForgeCall): Promise<void> {
  if (!trigger.review || !trigger.forge_token_sealed) throw new Error(`trigger ${trigger.id} is not a review trigger`);
  if (!ctx.sealer) throw new Error('the forge API token is sealed and this server has not the install encryption key');
  const token = ctx.sealer.open(trigger.forge_token_sealed, forgeTokenContext(trigger.id));
  const base = apiBase(ctx, trigger);
  let answer;
  try {
    answer = await sendHttp(
      ctx.config.delivery,
      withPath(base, call.path),
      { method: call.method, headers: { 'content-type': 'application/json', accept: 'application/json', 'user-agent': 'cairn', ...forgeAuthHeader(trigger.review.forge, token) }, body: JSON.stringify(call.body), readLimit: 64 * 1024 },
      FORGE_TIMEOUT_MS,
    );
  } catch (err) {
    throw new Error(`${trigger.review.forge} at ${new URL(base).host} could not be reached: ${err instanceof Error ? err.message : 'no answer'}`);
  }
  if (answer.status < 200 || answer.status > 299) throw new Error(`${trigger.review.forge} at ${new URL(base).host} answered ${call.path.includes('/statuses/') ? 'the commit status' : 'the comment'} with status ${answer.status}`);
}
