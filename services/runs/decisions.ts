import type { DecisionComment } from '../../core/runs/decision';
import { badRequest, conflict, forbidden, notFound } from '../../core/errors';
import { createMasker } from '../../core/masker';
import { newReasonRandom, reasonCommitment } from '../../core/audit/reason-commitment';
import { DENIED_ERROR, finalStateOf, REJECTED_ERROR, type ExecutionOutcome } from '../../core/runs/run-outcome';
import { newId } from '../../core/ids';
import { getDecisionRecordForUpdate, insertDecisionRecord, redactDecisionRecord } from '../../store/decisions';
import { appendEvent } from '../../store/events';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Db } from '../../store/db';
import { getRunForUpdate, listChildRuns } from '../../store/runs';
import { runWorkflowId } from '../../workflows/ids';
import { planDecided, stepDecided } from '../../workflows/definitions';
import { actorKindOf, type Caller } from '../../store/tokens';
import { appendEntry, recordMutation, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { endUnrunChildren, moveRun, recordRunEnd } from './run-lifecycle';
import { startRunWorkflow } from './runs';
import { carryOut } from '../effects';
import { oweEffects, type Effect } from '../../store/outbox';
import type { DecisionRecord, RedactionCategory } from '../../core/runs/decision';
import { PARENT_KINDS, type Run } from '../../core/runs/run';

/** Runs carry no secret values of their own yet, so reasons pass the masker's patterns. */
const reasonMasker = createMasker();

export interface DecisionInput {
  reason?: string;
  /** The text a 409 said would be kept; sending it back confirms the masked reason. */
  masked_reason?: string;
  state_digest?: string;
  /** For a run held at the plan gate: the saved plan's digest the approver decides on; another answers 409. */
  plan_digest?: string;
  /** A decision made from a pull request comment: the comment, recorded on the decision and its chain entry. */
  comment?: DecisionComment;
}

/** Text that opens a commitment: the masked reason, its random value and the commitment itself. */
interface CommittedText {
  reason: string;
  random: string;
  commitment: string;
}

/**
 * The reason as it will be kept (spec part A 2.7 item 2). The masker may change it: then nothing
 * is recorded and the caller is answered 409 with the text as it would be kept, which goes through
 * when sent back as the confirmation. A reason is never refused for looking like a secret.
 */
function maskedText(text: string | undefined, confirmation: string | undefined, confirmationField: string): string | undefined {
  const given = text ?? confirmation;
  if (given === undefined || given === '') return undefined;
  const masked = reasonMasker.mask(given);
  if (masked !== given && confirmation !== masked) {
    throw conflict(`the text holds what looks like a secret; resend with ${confirmationField} set to the masked text to record it as shown`, {
      [confirmationField]: masked,
    });
  }
  return masked;
}

function commit(text: string | undefined, recordId: string): CommittedText | undefined {
  if (text === undefined) return undefined;
  const random = newReasonRandom();
  return { reason: text, random, commitment: reasonCommitment({ event: recordId, random, reason: text }) };
}

/** Approve or reject given a workflow that waits at approval steps: 409 naming each step and its call. */
async function refuseWorkflowId(tx: Db, run: Run): Promise<void> {
  const waiting = (await listChildRuns(tx, run.id)).filter((child) => child.kind === 'approval' && child.status === 'held');
  if (waiting.length === 0) return;
  throw conflict(`run ${run.id} is a workflow waiting at ${waiting.length === 1 ? 'an approval step' : 'approval steps'}; decide each step by its own id`, {
    waiting_steps: waiting.map((step) => ({
      id: step.id,
      name: step.step_name,
      approve: `POST /v1/runs/${step.id}/approve`,
      reject: `POST /v1/runs/${step.id}/reject`,
    })),
  });
}

/**
 * Tells a workflow its approval step was decided (the `step.decided` effect: the deciding server
 * right after its commit, or the outbox dispatcher); a repeat is harmless.
 */
export async function deliverStepDecision(ctx: ServerContext, step: Run): Promise<void> {
  try {
    await ctx.temporal.workflow.getHandle(runWorkflowId(step.parent_run_id!)).signal(stepDecided, step.id);
  } catch (err) {
    // A workflow that has ended no longer waits for it.
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/**
 * Tells a run's workflow that its plan-gate hold was decided (the `plan.decided` effect); a repeat
 * is harmless, and a workflow that has ended no longer waits.
 */
export async function deliverPlanDecision(ctx: ServerContext, runId: string): Promise<void> {
  try {
    await ctx.temporal.workflow.getHandle(runWorkflowId(runId)).signal(planDecided);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/** An agent never approves or rejects (spec part B 5.2 item 6), whatever role its account has. */
export function refuseAgentDecision(caller: Caller): void {
  if (caller.token.kind === 'agent') throw forbidden('an agent never approves or rejects a run; an admin decides it');
}

/**
 * Approves or rejects a held run (spec part A 3.1, part B 7.6). Under the run's row lock: a run no
 * longer waiting (decided, or canceled, on any server) answers 409 and records nothing. The
 * decision, the run's move, its events and the decision's chain entry commit together; an approved
 * run owes its workflow's start, and a decided step its workflow's signal (store/outbox.ts), carried
 * out by this server right after the commit, or by the outbox dispatcher if it dies first.
 */
export async function decideRun(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  runId: string,
  decision: 'approve' | 'reject',
  input: DecisionInput,
): Promise<{ run: Run; record: DecisionRecord }> {
  refuseAgentDecision(caller);
  const result = await ctx.sql.begin(async (tx) => {
    const run = await getRunForUpdate(tx, runId);
    if (!run) throw notFound(`run ${runId}`);
    if (PARENT_KINDS.includes(run.kind) && run.status !== 'held') await refuseWorkflowId(tx, run);
    if (run.status !== 'held' || run.cancel_requested_at) {
      const state = run.cancel_requested_at && !run.finished_at ? 'being canceled' : run.status;
      throw conflict(`run ${runId} is no longer waiting for a decision (${state}); nothing was recorded`, { status: run.status });
    }
    const hold = run.hold!;
    if (hold.distinct_approver && run.account_id === caller.account.id) {
      throw forbidden(`a policy holding run ${runId} requires an approver other than its requester`, { policies: hold.policies });
    }
    if (input.state_digest !== undefined && input.state_digest !== run.state_digest) {
      throw conflict(`state_digest does not match run ${runId}'s execution settings; read the run again and decide on what it shows`, {
        state_digest: run.state_digest,
      });
    }
    // Held at the plan gate: the decision binds to the saved plan's digest too.
    const planHeld = run.kind !== 'approval' && hold.plan !== undefined;
    if (input.plan_digest !== undefined && input.plan_digest !== hold.plan?.digest) {
      throw conflict(`plan_digest does not match the plan run ${runId} is held with; read the run again and decide on what it shows`, {
        plan_digest: hold.plan?.digest ?? null,
      });
    }
    const text = maskedText(input.reason, input.masked_reason, 'masked_reason');
    if (hold.require_reason && text === undefined) {
      throw badRequest(`a reason is required: a policy holding this run asks approvers for one (${hold.policies.join(', ')})`, { field: 'reason' });
    }
    const entryId = newId('aud');
    const committed = commit(text, entryId);
    const record = await insertDecisionRecord(tx, {
      id: entryId,
      run_id: runId,
      kind: decision,
      decision_id: null,
      actor: caller.account.username,
      actor_kind: 'user',
      reason: committed?.reason ?? null,
      random: committed?.random ?? null,
      commitment: committed?.commitment ?? null,
      ...(input.comment ? { comment: input.comment } : {}),
    });
    // What the decision does: a step ends with it (the workflow takes the path it opens); a held
    // run is released to run, or ends rejected.
    const step = run.kind === 'approval';
    const outcome: ExecutionOutcome | undefined = step
      ? decision === 'approve'
        ? { kind: 'approved' }
        : { kind: 'denied', message: DENIED_ERROR }
      : decision === 'reject'
        ? { kind: 'rejected' }
        : undefined;
    // The decision is on the chain before the move it makes.
    await appendEntry(tx, origin, 200, {
      id: entryId,
      run_id: runId,
      body: {
        kind: 'run.decision',
        run_id: runId,
        workflow_run_id: step ? run.parent_run_id : null,
        decision_id: record.id,
        decision,
        commitment: record.commitment,
        state_digest: run.state_digest,
        ...(planHeld ? { plan_digest: hold.plan!.digest } : {}),
        ...(input.comment ? { comment: input.comment } : {}),
        run_status: outcome ? finalStateOf(outcome, null).status : 'pending',
      },
    });
    const by = caller.account.username;
    let moved: Run | undefined;
    if (outcome) {
      await appendEvent(tx, runId, decision === 'approve' ? 'run.approved' : 'run.rejected', { decision_id: record.id, by });
      // A rejected pipeline, workflow or split never ran its steps: they end with it.
      if (!step) await endUnrunChildren(tx, runId, `not run: ${REJECTED_ERROR}`);
      moved = await recordRunEnd(tx, runId, outcome);
    } else {
      const released = await moveRun(tx, runId, 'release it', (current) =>
        current?.status === 'held'
          ? { changes: { status: 'pending' }, event: { kind: 'run.approved', body: () => ({ decision_id: record.id, by }) } }
          : { settled: undefined },
      );
      moved = 'settled' in released ? undefined : released.moved;
    }
    if (!moved) throw new Error(`run ${runId} changed under its row lock`);
    // A run held at the plan gate has a workflow waiting for the decision: it is signalled, whatever the answer.
    // (A proposal held at its submission, such as a drift reconcile, has no workflow yet: approving starts it.)
    const waiting = planHeld && run.workflow_started_at !== null;
    const effect: Effect | undefined = step
      ? { effect: 'step.decided', subject: runId }
      : waiting
        ? { effect: 'plan.decided', subject: runId }
        : decision === 'approve'
          ? { effect: 'run.start', subject: runId }
          : undefined;
    return { run: moved, record, effects: effect ? await oweEffects(tx, [effect], true) : [] };
  });
  const { effects, ...decided } = result;
  if (decided.run.kind === 'approval') await carryOut(ctx, effects, 'telling the workflow of its step decision', () => deliverStepDecision(ctx, decided.run));
  else if (decided.run.hold?.plan && decided.run.workflow_started_at) await carryOut(ctx, effects, 'telling the workflow of its plan decision', () => deliverPlanDecision(ctx, decided.run.id));
  else await carryOut(ctx, effects, 'starting the run workflow', (ids) => startRunWorkflow(ctx, decided.run, ids));
  return decided;
}

/**
 * Decision records are what a person answered for; an agent, which never decides, may not amend
 * or erase them either, whatever its account's role.
 */
export function refuseAgentRecordChange(caller: Caller): void {
  if (actorKindOf(caller) === 'agent') {
    throw forbidden("an agent may not correct or redact a decision record, whatever its account's role: an admin person does");
  }
}

/** Appends a correction to a decision: masked and committed like a reason, under its own chain entry. */
export async function correctDecision(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  runId: string,
  decisionId: string,
  input: { text: string; masked_text?: string },
): Promise<DecisionRecord> {
  refuseAgentRecordChange(caller);
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const decision = await getDecisionRecordForUpdate(tx, runId, decisionId);
    if (!decision || decision.kind === 'correction') throw notFound(`decision ${decisionId} of run ${runId}`);
    const text = maskedText(input.text, input.masked_text, 'masked_text');
    if (text === undefined) throw badRequest('text must not be empty', { field: 'text' });
    const committed = commit(text, entry.id)!;
    const record = await insertDecisionRecord(tx, {
      id: entry.id,
      run_id: runId,
      kind: 'correction',
      decision_id: decision.id,
      actor: caller.account.username,
      actor_kind: actorKindOf(caller),
      reason: committed.reason,
      random: committed.random,
      commitment: committed.commitment,
    });
    entry.run_id = runId;
    entry.body = { kind: 'run.correction', run_id: runId, decision_id: decision.id, correction_id: record.id, commitment: record.commitment };
    return record;
  });
}

/**
 * Removes a decision's or correction's text and random value together; the commitment stays and
 * can never be opened again. The chain entry names the category; its actor and time say who and when.
 */
export async function redactDecision(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  runId: string,
  recordId: string,
  category: RedactionCategory,
): Promise<DecisionRecord> {
  refuseAgentRecordChange(caller);
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const record = await getDecisionRecordForUpdate(tx, runId, recordId);
    if (!record) throw notFound(`decision record ${recordId} of run ${runId}`);
    if (record.redacted_at) throw conflict(`decision record ${recordId} was already redacted`, { redacted_at: record.redacted_at.toISOString() });
    const redacted = await redactDecisionRecord(tx, record.id, { by: caller.account.username, category, entryId: entry.id });
    entry.run_id = runId;
    entry.body = { kind: 'run.redaction', run_id: runId, record_id: record.id, category, commitment: record.commitment };
    return redacted;
  });
}

/**
 * For a run an agent asked for: whether its approver was someone other than the requester, the
 * separation of duties the built-in hold exists for (spec part A 2.7 item 4).
 */
export function separationOfDuties(run: Run, records: DecisionRecord[]) {
  if (run.actor_kind !== 'agent') return undefined;
  const decision = records.find((r) => r.kind !== 'correction');
  return {
    requester: run.requested_by,
    requester_kind: 'agent',
    approver: decision?.actor ?? null,
    approver_kind: decision?.actor_kind ?? null,
    held_by_agent_hold: run.hold?.agent_hold ?? false,
    satisfied: decision ? decision.actor_kind !== 'agent' && decision.actor !== run.requested_by : null,
  };
}
