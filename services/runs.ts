import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { conflict, forbidden, notFound } from '../core/errors';
import { newId } from '../core/ids';
import { runView } from '../core/run-view';
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
import type { Caller } from '../store/tokens';
import { requireRunnableTool } from '../tools/registry';
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

/** Named queues are served only by workers, and every worker is Team tier (no license is loaded yet). */
function requireQueueAllowed(queue: string): void {
  if (queue !== '') {
    throw forbidden('named worker queues are a Team tier feature and this install has no Team license', {
      feature: 'named queue',
      field: 'queue',
    });
  }
}

/**
 * The one way a run comes to exist: checked, recorded with its `run.created` event in one write,
 * then handed to Temporal. If the hand-off fails the sweeper finishes it, so nothing is lost.
 * A repeat with the same Idempotency-Key by the same account returns the original run.
 */
export async function submitRun(
  ctx: ServerContext,
  caller: Caller,
  request: RunRequest,
  idempotencyKey?: string,
): Promise<{ run: Run; created: boolean }> {
  if (idempotencyKey) {
    const existing = await findRunByIdempotencyKey(ctx.sql, caller.account.id, idempotencyKey);
    if (existing) return { run: existing, created: false };
  }
  requireQueueAllowed(request.queue);
  await requireRunnableTool(request.tool);

  let run: Run;
  try {
    run = await insertRunWithEvent(
      ctx.sql,
      {
        id: newId('run'),
        tool: request.tool,
        spec: request.spec,
        queue: request.queue,
        timeout_seconds: request.timeout && request.timeout > 0 ? request.timeout : ctx.config.runTimeout,
        requested_by: caller.account.username,
        account_id: caller.account.id,
        token_id: caller.token.id,
        actor_kind: caller.token.kind === 'agent' ? 'agent' : 'user',
        rerun_of: request.rerunOf ?? null,
        idempotency_key: idempotencyKey ?? null,
      },
      { kind: 'run.created', body: (row) => ({ run: runView(row) }) },
    );
  } catch (err) {
    if (idempotencyKey && isUniqueViolation(err)) {
      const existing = await findRunByIdempotencyKey(ctx.sql, caller.account.id, idempotencyKey);
      if (existing) return { run: existing, created: false };
    }
    throw err;
  }
  ctx.metrics.runsSubmitted.inc({ tool: run.tool });
  try {
    await startRunWorkflow(ctx, run);
  } catch (err) {
    ctx.logger.warn({ runId: run.id, err: (err as Error).message }, 'starting the run workflow failed; the sweeper will retry');
  }
  return { run, created: true };
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
export async function cancelRun(ctx: ServerContext, caller: Caller, runId: string): Promise<Run> {
  const run = await ctx.sql.begin(async (tx) => {
    const current = await getRunForUpdate(tx, runId);
    if (!current) throw notFound(`run ${runId}`);
    if (current.finished_at) throw conflict(`run ${runId} has already ended (${current.status})`, { status: current.status });
    if (!current.cancel_requested_at) {
      await markCancelRequested(tx, runId, caller.account.username);
      await appendEvent(tx, runId, 'run.cancel_requested', { by: caller.account.username });
    }
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
export async function rerunRun(ctx: ServerContext, caller: Caller, runId: string, idempotencyKey?: string): Promise<Run> {
  const original = await getRun(ctx.sql, runId);
  if (!original) throw notFound(`run ${runId}`);
  if (!original.finished_at) throw conflict(`run ${runId} has not ended yet (${original.status}); rerun a finished run`);
  const { run } = await submitRun(
    ctx,
    caller,
    { tool: original.tool, spec: original.spec, queue: original.queue, timeout: original.timeout_seconds, rerunOf: original.id },
    idempotencyKey,
  );
  return run;
}
