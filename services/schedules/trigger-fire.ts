import { DomainError, conflict, statusOf } from '../../core/errors';
import { deliveryIdempotencyKey, pushExtraVars, type Push } from '../../core/schedules/webhooks';
import { getTemplate, type Template } from '../../store/templates';
import { recordDeliveryOutcome, type Trigger } from '../../store/triggers';
import { recordMutation, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { firingOwner, launchUnattended, UnattendedSurveyRefusal, type UnattendedFire } from '../runs/launch';
import { hostlessFireReason, templateFireHosts } from '../ansible/hostless-fires';

/**
 * A trigger's fire (spec part A 2.4 rules 5-6, 4.7; part B 7.3): the launch a push delivery makes,
 * and how a delivery that starts no run is answered and recorded on the trigger's `last_error`.
 * Used by services/schedules/triggers.ts for the checks that need no launch and by
 * services/schedules/hook-deliveries.ts for the recorded launch.
 */

/** An answer to a delivery that is not a refusal (refusals are thrown as DomainErrors). */
export interface HookAnswer {
  status: number;
  body: Record<string, unknown>;
  location?: string;
}

/** The chain's view of a delivery: the owner it fires as, the trigger's path (never the token) and the push as sent. */
export function deliveryOrigin(trigger: Trigger, query: Record<string, unknown>, payload: unknown): AuditOrigin {
  const path = `/hooks/${trigger.id}`;
  return { actor: trigger.created_by, method: 'POST', path, request: { method: 'POST', path, query, body: payload }, withheld: new Set() };
}

export type FireOutcome = { answer: HookAnswer } | { refusal: DomainError };

/** A delivery that starts no run by design: 200 with `skipped` and why, the why on the trigger's `last_error`. */
export async function skippedDelivery(ctx: ServerContext, trigger: Trigger, received: Date, reason: string): Promise<HookAnswer> {
  await noteOutcome(ctx, trigger.id, received, reason);
  return { status: 200, body: { skipped: true, reason, trigger_id: trigger.id } };
}

/** The template a trigger launches: a 409 when it no longer exists. */
export async function triggerTemplate(ctx: ServerContext, trigger: Trigger): Promise<Template> {
  const template = await getTemplate(ctx.sql, trigger.template_id);
  if (!template) throw conflict(`template ${trigger.template_id} no longer exists`);
  return template;
}

/** What a trigger's launch names as its source: the trigger, fired as its owner while the owner may still fire. */
export async function triggerFire(ctx: ServerContext, trigger: Trigger): Promise<UnattendedFire> {
  const owner = await firingOwner(ctx.sql, trigger.owner_account_id, `the trigger's owner (${trigger.created_by})`, 'a trigger fires as its owner: create it again as an operator');
  return { kind: 'trigger', id: trigger.id, name: trigger.name, owner, actorKind: trigger.owner_actor_kind };
}

/** Launches the trigger's template for a push; never rejects: a refusal is recorded and returned. */
export async function fireTrigger(
  ctx: ServerContext,
  trigger: Trigger,
  origin: AuditOrigin,
  push: Push,
  deliveryId: string,
  received: Date,
): Promise<FireOutcome> {
  try {
    const template = await triggerTemplate(ctx, trigger);
    const fireHosts = templateFireHosts(template);
    const hostless = fireHosts && (await hostlessFireReason(ctx, fireHosts));
    if (hostless) return { answer: await skippedDelivery(ctx, trigger, received, hostless) };
    const { run, created } = await launchUnattended(
      ctx,
      origin,
      template,
      await triggerFire(ctx, trigger),
      { extraVars: pushExtraVars(push), idempotencyKey: deliveryIdempotencyKey(trigger.id, deliveryId) },
    );
    const body = { run_id: run.id, status: run.status, trigger_id: trigger.id };
    // A redelivery names the run the first delivery started and changes nothing.
    if (!created) return { answer: { status: 200, body: { ...body, repeated: true }, location: `/v1/runs/${run.id}` } };
    await noteOutcome(ctx, trigger.id, received, null);
    return { answer: { status: 201, body, location: `/v1/runs/${run.id}` } };
  } catch (err) {
    return { refusal: await launchRefused(ctx, trigger, origin, received, err) };
  }
}

/**
 * A launch that started no run, as the sender is told and the trigger records it (spec part A 2.4
 * rule 6, part B 7.3): a survey nobody can answer is 409 naming its questions, with its chain
 * entry; any other configuration error 409 naming the error only; a failure of the server or its
 * stores 502, whose detail stays in the server log.
 */
export async function launchRefused(ctx: ServerContext, trigger: Trigger, origin: AuditOrigin, received: Date, err: unknown): Promise<DomainError> {
  if (err instanceof UnattendedSurveyRefusal) {
    try {
      await recordMutation(ctx.sql, { ...origin, path: `/hooks/${trigger.id}/refused/survey/${err.questions.join(',')}` }, 409, async (tx, entry) => {
        await recordDeliveryOutcome(tx, trigger.id, received, err.message);
        entry.body = { kind: 'trigger.refused', trigger_id: trigger.id, template_id: trigger.template_id, questions: err.questions };
      });
    } catch (recordErr) {
      ctx.logger.warn({ triggerId: trigger.id, err: recordErr }, 'recording a trigger refusal failed');
    }
    return err;
  }
  if (err instanceof DomainError && statusOf(err.code) < 500) return refused(ctx, trigger, received, conflict(`this template cannot launch: ${err.message}`));
  ctx.logger.error({ triggerId: trigger.id, err }, 'a trigger could not launch its template');
  return refused(ctx, trigger, received, new DomainError('bad_gateway', 'could not launch the template'));
}

/** Records why a delivery started no run, then gives back the refusal to answer with. */
export async function refused(ctx: ServerContext, trigger: Trigger, received: Date, refusal: DomainError, lastError = refusal.message): Promise<DomainError> {
  await noteOutcome(ctx, trigger.id, received, lastError);
  return refusal;
}

/** Records a delivery's outcome on its trigger; a failure to record is logged and does not change the answer. */
export async function noteOutcome(ctx: ServerContext, triggerId: string, received: Date, error: string | null): Promise<void> {
  try {
    await recordDeliveryOutcome(ctx.sql, triggerId, received, error);
  } catch (err) {
    ctx.logger.warn({ triggerId, err }, "recording a delivery's outcome on its trigger failed");
  }
}

/** The work's result if it settles within `ms`, else undefined (the work goes on). */
export async function within<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), Math.max(0, ms));
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
