import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { conflict, forbidden, notFound } from '../core/errors';
import { newId } from '../core/ids';
import { featureRefusal, tierAllows, type Tier } from '../core/license';
import { judgeSubmission, type GateVerdict } from '../core/policy-gate';
import { runView } from '../core/run-view';
import { stateDigest } from '../core/state-digest';
import { isUniqueViolation } from '../store/db';
import { appendEvent } from '../store/events';
import {
  findRunByIdempotencyKey,
  getRun,
  getRunForUpdate,
  insertRunWithEvent,
  markCancelRequested,
  markWorkflowStarted,
  type Run,
  type RunSpec,
} from '../store/runs';
import { listPolicies } from '../store/policies';
import type { Caller } from '../store/tokens';
import { requireRunnableTool } from '../tools/registry';
import type { Tool } from '../tools/types';
import { recordMutation, unchanged, type AuditOrigin } from './audit';
import { runWorkflowId } from '../workers/names';
import type { runWorkflow } from '../workflows/run';
import type { ServerContext } from './context';
import { recordRunEnd } from './run-lifecycle';

export interface RunRequest {
  tool: string;
  spec: RunSpec;
  queue: string;
  /** Seconds; zero or absent takes the server's --run-timeout. */
  timeout?: number;
  rerunOf?: string;
}

/** Named queues are served only by workers, and every worker is Team tier. */
function requireQueueAllowed(queue: string, tier: Tier): void {
  if (queue !== '' && !tierAllows(tier, 'named_queue')) {
    throw forbidden(featureRefusal('named_queue', tier), { feature: 'named_queue', field: 'queue', tier });
  }
}

/** The approval gate's verdict on a submission (spec part A 2.10, 4.17), judged before it is recorded. */
async function judge(ctx: ServerContext, caller: Caller, request: RunRequest, tool: Tool): Promise<GateVerdict> {
  const dryRun = request.spec.dry_run === true;
  return judgeSubmission(
    {
      tool: request.tool,
      command: request.spec.command,
      inventory_id: null,
      queue: request.queue,
      actor: caller.token.name,
      account: caller.account.username,
      actor_kind: caller.token.kind === 'agent' ? 'agent' : 'user',
      dry_run: dryRun,
      dry_run_change_free: dryRun && tool.dryRunChangeFree,
    },
    await listPolicies(ctx.sql),
  );
}

/**
 * The one way a run comes to exist: checked, judged by the approval gate, recorded with its events
 * and its chain entry in one transaction, then handed to Temporal unless it is held. If the
 * hand-off fails the sweeper finishes it, so nothing is lost. A repeat with the same
 * Idempotency-Key by the same account returns the original run and records nothing.
 */
export async function submitRun(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  request: RunRequest,
  idempotencyKey?: string,
): Promise<{ run: Run; created: boolean }> {
  if (idempotencyKey) {
    const existing = await findRunByIdempotencyKey(ctx.sql, caller.account.id, idempotencyKey);
    if (existing) return { run: existing, created: false };
  }
  requireQueueAllowed(request.queue, ctx.licensing.tier);
  const tool = await requireRunnableTool(request.tool);
  const verdict = await judge(ctx, caller, request, tool);
  if (verdict.verdict === 'deny') {
    throw forbidden(`a deny policy refuses this run (${verdict.policies.join(', ')})`, { policies: verdict.policies });
  }
  const hold = verdict.verdict === 'hold' ? verdict.hold : null;
  const timeoutSeconds = request.timeout && request.timeout > 0 ? request.timeout : ctx.config.runTimeout;

  let run: Run;
  try {
    run = await recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
      const inserted = await insertRunWithEvent(
        tx,
        {
          id: newId('run'),
          tool: request.tool,
          status: hold ? 'held' : 'pending',
          spec: request.spec,
          queue: request.queue,
          timeout_seconds: timeoutSeconds,
          requested_by: caller.account.username,
          account_id: caller.account.id,
          token_id: caller.token.id,
          actor_kind: caller.token.kind === 'agent' ? 'agent' : 'user',
          rerun_of: request.rerunOf ?? null,
          idempotency_key: idempotencyKey ?? null,
          hold,
          state_digest: stateDigest({ tool: request.tool, spec: request.spec, queue: request.queue, timeout_seconds: timeoutSeconds }),
        },
        { kind: 'run.created', body: (row) => ({ run: runView(row) }) },
      );
      if (hold) await appendEvent(tx, inserted.id, 'run.held', { blocker: 'approval_needed', hold });
      entry.run_id = inserted.id;
      entry.body = {
        kind: 'run.submitted',
        run_id: inserted.id,
        tool: inserted.tool,
        status: inserted.status,
        state_digest: inserted.state_digest,
        actor_kind: inserted.actor_kind,
        rerun_of: inserted.rerun_of,
        hold,
        exempted_by: verdict.verdict === 'run' ? verdict.exempted_by : [],
      };
      return inserted;
    });
  } catch (err) {
    if (idempotencyKey && isUniqueViolation(err)) {
      const existing = await findRunByIdempotencyKey(ctx.sql, caller.account.id, idempotencyKey);
      if (existing) return { run: existing, created: false };
    }
    throw err;
  }
  ctx.metrics.runsSubmitted.inc({ tool: run.tool });
  if (!hold) await handOff(ctx, run);
  return { run, created: true };
}

/** Starts a committed run's workflow; a failure is left to the sweeper, which retries it. */
export async function handOff(ctx: ServerContext, run: Run): Promise<void> {
  try {
    await startRunWorkflow(ctx, run);
  } catch (err) {
    ctx.logger.warn({ runId: run.id, err: (err as Error).message }, 'starting the run workflow failed; the sweeper will retry');
  }
}

/** Starts the run's workflow; starting one that already exists is harmless (workflow id = run id). */
export async function startRunWorkflow(ctx: ServerContext, run: Run): Promise<void> {
  if (ctx.faults.fire('workflow-start-once')) throw new Error('injected fault: workflow start failed');
  try {
    await ctx.temporal.workflow.start<typeof runWorkflow>('runWorkflow', {
      workflowId: runWorkflowId(run.id),
      taskQueue: ctx.config.poolQueue,
      args: [{ runId: run.id, timeoutSeconds: run.timeout_seconds, leaseSeconds: ctx.config.leaseSeconds }],
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  await markWorkflowStarted(ctx.sql, run.id);
}

/**
 * Records the cancel, then cancels the workflow, whose activity kills the tool's process group and
 * whose final write marks the run canceled. A run with no workflow (never started, or gone) is
 * ended here directly. The sweeper repeats the Temporal half until the run has ended.
 */
export async function cancelRun(ctx: ServerContext, caller: Caller, origin: AuditOrigin, runId: string): Promise<Run> {
  const run = await recordMutation(ctx.sql, origin, 202, async (tx, entry) => {
    const current = await getRunForUpdate(tx, runId);
    if (!current) throw notFound(`run ${runId}`);
    if (current.finished_at) throw conflict(`run ${runId} has already ended (${current.status})`, { status: current.status });
    // A second cancel of a run still ending changes nothing and is not recorded again.
    if (current.cancel_requested_at) return unchanged(current);
    await markCancelRequested(tx, runId, caller.account.username);
    await appendEvent(tx, runId, 'run.cancel_requested', { by: caller.account.username });
    entry.run_id = runId;
    entry.body = { kind: 'run.cancel_requested', run_id: runId, status: current.status };
    return current;
  });
  await deliverCancel(ctx, run);
  return waitForEnd(ctx, runId, 3000);
}

/** The Temporal half of a cancel; safe to repeat. */
export async function deliverCancel(ctx: ServerContext, run: Run): Promise<void> {
  if (!run.workflow_started_at) {
    await recordRunEnd(ctx.sql, run.id, { kind: 'canceled' });
    return;
  }
  try {
    await ctx.temporal.workflow.getHandle(runWorkflowId(run.id)).cancel();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    await recordRunEnd(ctx.sql, run.id, { kind: 'canceled' });
  }
}

/** The run once it has ended, or as it stands when the wait runs out. */
export async function waitForEnd(ctx: ServerContext, runId: string, timeoutMs: number): Promise<Run> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await getRun(ctx.sql, runId);
    if (!run) throw notFound(`run ${runId}`);
    if (run.finished_at || Date.now() >= deadline) return run;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A fresh run with this run's execution settings; the original stays as it was. */
export async function rerunRun(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  runId: string,
  idempotencyKey?: string,
): Promise<Run> {
  const original = await getRun(ctx.sql, runId);
  if (!original) throw notFound(`run ${runId}`);
  if (!original.finished_at) throw conflict(`run ${runId} has not ended yet (${original.status}); rerun a finished run`);
  const { run } = await submitRun(
    ctx,
    caller,
    origin,
    { tool: original.tool, spec: original.spec, queue: original.queue, timeout: original.timeout_seconds, rerunOf: original.id },
    idempotencyKey,
  );
  return run;
}
