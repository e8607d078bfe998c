import { forgeTokenContext, signingSecretContext } from '../../core/credentials/seal-contexts';
import type { ReviewSettings } from '../../core/schedules/review';
import type { FollowerAction } from '../../core/access/access';
import { DomainError, badRequest, conflict, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { encryptionKeyRequired, sealedValueFault } from '../../core/runs/run-secrets';
import { hashBearerSecret } from '../../core/credentials/secrets';
import { checkSignature, deliveryIdOf, hasSignature, newHookToken, newSigningSecret, readDelivery, type DeliveryHeaders } from '../../core/schedules/webhooks';
import { actorKindOf, type Caller } from '../../store/tokens';
import {
  deleteTrigger,
  findTriggerByTokenHash,
  getTrigger,
  getTriggerForUpdate,
  insertTrigger,
  replaceTriggerSecret,
  updateTriggerSettings,
  type Trigger,
} from '../../store/triggers';
import { requireAccess, requireFollowerAccess } from '../access/access';
import { recordMutation, unchanged, withholdFields, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { deliverReview } from './review';
import { answering, deliverPush } from './hook-deliveries';
import { deliveryOrigin, refused, skippedDelivery, within, type FireOutcome, type HookAnswer } from './trigger-fire';

export type { HookAnswer } from './trigger-fire';

/**
 * Webhook triggers (spec part A 2.4 rules 5-6, 4.7; part B 5.1, 7.3, 8): a git push delivered to
 * `POST /hooks/{token}` launches the trigger's template unattended, as the trigger's owner.
 *
 * The hook's path token is shown once, when the trigger is made, and kept only as its SHA-256.
 * The signing secret is shown once, at creation and at each rotation, and kept only sealed under
 * the install's encryption key, so making a trigger needs SERVICE_ENCRYPTION_KEY and
 * SERVICE_ENCRYPTION_SALT. A secret the caller chooses is withheld from the request's fingerprint.
 */

/** A trigger write as parsed from its body. */
export interface TriggerDraft {
  name: string;
  template_id: string;
  enforce_signature: boolean;
  /** A signing secret of the caller's own; absent, Cairn makes one. */
  secret?: string;
  /** Makes a pull request review trigger: the forge, its API base and the API token Cairn reports with. */
  review?: ReviewDraft;
}

/** Review settings as a write sends them; the token is write-only. */
export interface ReviewDraft {
  forge: ReviewSettings['forge'];
  api_url?: string | null;
  token?: string;
}

/** A trigger as every read shows it: no secret, no token, RFC 3339 times. */
export function triggerView(trigger: Trigger) {
  return {
    id: trigger.id,
    name: trigger.name,
    kind: trigger.kind,
    template_id: trigger.template_id,
    enforce_signature: trigger.enforce_signature,
    review: trigger.review ? { ...trigger.review, token_set: trigger.forge_token_sealed !== null } : null,
    created_by: trigger.created_by,
    created_at: trigger.created_at.toISOString(),
    updated_at: trigger.updated_at.toISOString(),
    secret_rotated_at: trigger.secret_rotated_at?.toISOString() ?? null,
    last_error: trigger.last_error,
    last_error_at: trigger.last_error_at?.toISOString() ?? null,
    last_delivery_at: trigger.last_delivery_at?.toISOString() ?? null,
  };
}

/** What a trigger's chain entries record of it: its read view without times or the delivery record. */
function audited(trigger: Trigger): Record<string, unknown> {
  return { name: trigger.name, kind: trigger.kind, template_id: trigger.template_id, enforce_signature: trigger.enforce_signature, review: trigger.review };
}

/** A review draft's stored settings and sealed token (the current token kept when the draft sends none). */
function reviewOf(ctx: ServerContext, id: string, draft: ReviewDraft, current: string | null): { review: ReviewSettings; forge_token_sealed: string } {
  if (draft.token === undefined && current === null) throw badRequest('review.token is required: the forge API token Cairn posts commit statuses and comments with', { field: 'review.token' });
  return {
    review: { forge: draft.forge, api_url: draft.api_url ? draft.api_url.replace(/\/+$/, '') : null },
    forge_token_sealed: draft.token !== undefined ? ctx.sealer!.seal(draft.token, forgeTokenContext(id)) : current!,
  };
}

/** A new trigger with the secret and the hook path, each shown this once. */
export async function createTrigger(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  draft: TriggerDraft,
): Promise<{ trigger: Trigger; secret: string; hookPath: string }> {
  withholdFields(origin, draft.review?.token !== undefined ? ['secret', 'review.token'] : ['secret']);
  if (!ctx.sealer) throw encryptionKeyRequired('the signing secret', [`trigger ${draft.name}`]);
  // Its deliveries launch as its creator, who must be able to launch the template.
  await requireAccess(ctx.sql, caller, draft.template_id, 'use', { action: `triggering template ${draft.template_id}`, field: 'template_id' });
  const id = newId('trg');
  const token = newHookToken();
  const secret = draft.secret ?? newSigningSecret();
  const review = draft.review ? reviewOf(ctx, id, draft.review, null) : { review: null, forge_token_sealed: null };
  const trigger = await recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const created = await insertTrigger(tx, {
      id,
      kind: draft.review ? 'review' : 'push',
      ...review,
      name: draft.name,
      template_id: draft.template_id,
      owner_account_id: caller.account.id,
      owner_actor_kind: actorKindOf(caller),
      created_by: caller.account.username,
      hook_token_hash: hashBearerSecret(token),
      secret_sealed: ctx.sealer!.seal(secret, signingSecretContext(id)),
      enforce_signature: draft.enforce_signature,
    });
    entry.body = { kind: 'trigger.created', trigger_id: id, trigger: audited(created) };
    return created;
  });
  return { trigger, secret, hookPath: `/hooks/${token}` };
}

/** Renames a trigger or turns its signature enforcement on or off; what the change omits stays, and so does its template. */
export async function changeTrigger(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  id: string,
  change: Partial<Pick<Trigger, 'name' | 'enforce_signature'>> & { template_id?: string; review?: ReviewDraft },
): Promise<Trigger> {
  if (change.review?.token !== undefined) withholdFields(origin, ['review.token']);
  await readableTrigger(ctx, caller, id, 'change');
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const current = await getTriggerForUpdate(tx, id);
    if (!current) throw notFound(`trigger ${id}`);
    if (change.template_id !== undefined && change.template_id !== current.template_id) {
      throw badRequest(`template_id: a trigger's template cannot change; make a new trigger for template ${change.template_id}`, { field: 'template_id' });
    }
    if (change.review !== undefined && current.kind !== 'review') {
      throw badRequest('review: a push trigger cannot become a review trigger; make a new trigger with review settings', { field: 'review' });
    }
    if (change.review?.token !== undefined && !ctx.sealer) throw encryptionKeyRequired('the forge API token', [`trigger ${id}`]);
    const review = change.review ? reviewOf(ctx, id, change.review, current.forge_token_sealed) : { review: current.review, forge_token_sealed: current.forge_token_sealed };
    const settings = { name: change.name ?? current.name, enforce_signature: change.enforce_signature ?? current.enforce_signature, ...review };
    if (
      current.name === settings.name &&
      current.enforce_signature === settings.enforce_signature &&
      JSON.stringify(current.review) === JSON.stringify(settings.review) &&
      current.forge_token_sealed === settings.forge_token_sealed
    ) return unchanged(current);
    const updated = (await updateTriggerSettings(tx, id, settings))!;
    entry.body = { kind: 'trigger.updated', trigger_id: id, trigger: audited(updated), previous: audited(current) };
    return updated;
  });
}

/** A new signing secret, shown this once; from the commit on, a delivery signed with the old one is refused. */
export async function rotateTriggerSecret(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  id: string,
  chosen: string | undefined,
): Promise<{ trigger: Trigger; secret: string }> {
  withholdFields(origin, ['secret']);
  await readableTrigger(ctx, caller, id, 'change');
  if (!ctx.sealer) throw encryptionKeyRequired('the signing secret', [`trigger ${id}`]);
  const secret = chosen ?? newSigningSecret();
  const trigger = await recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    if (!(await getTriggerForUpdate(tx, id))) throw notFound(`trigger ${id}`);
    const rotated = (await replaceTriggerSecret(tx, id, ctx.sealer!.seal(secret, signingSecretContext(id))))!;
    entry.body = { kind: 'trigger.secret_rotated', trigger_id: id };
    return rotated;
  });
  return { trigger, secret };
}

/** Deletes a trigger; its hook answers 404 from the commit on. Runs it started keep their source. */
export async function removeTrigger(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string): Promise<void> {
  await readableTrigger(ctx, caller, id, 'change');
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getTriggerForUpdate(tx, id);
    if (!current || !(await deleteTrigger(tx, id))) throw notFound(`trigger ${id}`);
    entry.body = { kind: 'trigger.deleted', trigger_id: id, trigger: audited(current) };
  });
}

/**
 * The trigger, when the caller may read it (or, for `change`, rename, rotate and delete it): a
 * trigger follows its template as a run does (core/access.ts followerAllows). 404 alike for a
 * missing trigger and one the caller may not read.
 */
export async function readableTrigger(ctx: ServerContext, caller: Caller, id: string, action: FollowerAction = 'read'): Promise<Trigger> {
  const trigger = await getTrigger(ctx.sql, id);
  if (!trigger) throw notFound(`trigger ${id}`);
  await requireFollowerAccess(ctx.sql, caller, { noun: `trigger ${id}`, ownerId: trigger.owner_account_id, templateId: trigger.template_id }, action);
  return trigger;
}

/** A delivery to `POST /hooks/{token}` as received. */
export interface HookDelivery {
  token: string;
  rawBody: Buffer;
  headers: DeliveryHeaders;
  contentType: string | undefined;
  query: Record<string, unknown>;
  /** When it arrived (ms since the epoch): the answer waits count from here. */
  receivedAt: number;
  /** Reads the delivery's body as JSON with the checks every body gets; throws a 400 naming the fault. */
  parseBody: () => unknown;
}

/**
 * How long a review trigger's delivery waits for its planning before it is answered `202
 * {"accepted": true}` while the work goes on: well inside the five seconds the spec allows (part B
 * 8), leaving room for a busy server's slow timers. (A push is answered once recorded:
 * services/schedules/hook-deliveries.ts.)
 */
export const REVIEW_ANSWER_MS = 3000;

/**
 * Answers a delivery. In order:
 *
 * 1. The token names the trigger (404 otherwise).
 * 2. The signature, checked first over the raw bytes: a signature header that does not match is
 *    403 (also when enforcement is off), none while enforcement is on 401. These refusals record
 *    nothing: the sender has not shown it knows the secret.
 * 3. The body is read (400 when it is not JSON), and what it is: a ping is answered 200 and not
 *    recorded; another event or a push that deleted its ref is skipped (200 with `skipped`).
 * 4. A push is recorded with its owed launch, in one statement (services/schedules/hook-deliveries.ts),
 *    and answered: 202 `{"accepted": true}` with a Location to the delivery's record, or, when the
 *    server's answer wait (`--hook-answer-wait`) lets the launch finish first, its outcome (201
 *    with the run id; 200 naming the run a redelivery's delivery id started; 200 skipped when the
 *    template's stored inventory, its limit applied, matches no host; 409 or 502). The template is
 *    launched unattended with what the push says as extra vars, its Idempotency-Key the trigger and
 *    the delivery id, so a redelivery or a repeated launch starts nothing new.
 *
 * A review trigger's delivery (services/schedules/review.ts) is not recorded: it is handled in
 * process and answered with its outcome, or 202 at REVIEW_ANSWER_MS while the work goes on.
 *
 * From step 3 on, a delivery that starts no run records why on the trigger's `last_error`, and one
 * that starts a run clears it (spec part A 2.4 rule 6).
 */
export function deliverHook(ctx: ServerContext, delivery: HookDelivery): Promise<HookAnswer> {
  // The server's launches give way while deliveries are answered (services/schedules/hook-deliveries.ts).
  return answering(ctx, () => answerDelivery(ctx, delivery));
}

async function answerDelivery(ctx: ServerContext, delivery: HookDelivery): Promise<HookAnswer> {
  const trigger = await findTriggerByTokenHash(ctx.sql, hashBearerSecret(delivery.token));
  if (!trigger) throw notFound('hook');
  const received = new Date(delivery.receivedAt);
  await authenticate(ctx, trigger, delivery, received);

  let payload: unknown;
  try {
    payload = delivery.parseBody();
  } catch (err) {
    if (err instanceof DomainError) throw await refused(ctx, trigger, received, err, `the delivery's body could not be read: ${err.message}`);
    throw err;
  }
  if (trigger.kind === 'review') {
    const origin = deliveryOrigin(trigger, delivery.query, payload);
    const review = deliverReview(ctx, trigger, origin, delivery.headers, payload, deliveryIdOf(delivery.headers), received).then(
      (answer): FireOutcome => ({ answer }),
      // Never rejects: the answer may have gone (202) before the work ends.
      (err): FireOutcome => {
        if (err instanceof DomainError) return { refusal: err };
        ctx.logger.error({ triggerId: trigger.id, err }, 'a review trigger could not handle a delivery');
        return { refusal: new DomainError('bad_gateway', 'could not plan the pull request') };
      },
    );
    const first = await within(review, delivery.receivedAt + REVIEW_ANSWER_MS - Date.now());
    if (first === undefined) return { status: 202, body: { accepted: true, trigger_id: trigger.id } };
    if ('refusal' in first) throw first.refusal;
    return first.answer;
  }
  const reading = readDelivery(delivery.headers, payload);
  if (reading.kind === 'ping') return { status: 200, body: { ping: true, trigger_id: trigger.id } };
  if (reading.kind === 'unreadable') {
    throw await refused(ctx, trigger, received, badRequest(`the delivery is not a push this trigger can read: it has no ${reading.missing}`, { field: reading.missing }));
  }
  const skipped = (reason: string) => skippedDelivery(ctx, trigger, received, reason);
  if (reading.kind === 'other') return skipped(`${reading.forge} ${reading.event} events start no run: this trigger fires on a push`);
  if (reading.push.deleted) return skipped(`the push deleted ${reading.push.ref}: there is nothing to run`);

  return deliverPush(ctx, trigger, { headers: delivery.headers, query: delivery.query, receivedAt: delivery.receivedAt, payload, push: reading.push });
}

/**
 * The signature check (spec part B 5.1): every signature header the delivery carries must match;
 * with enforcement on it must carry one. A secret that cannot be opened here is a configuration
 * error of this server (409, recorded); it is opened only when a signature is there to check.
 */
async function authenticate(ctx: ServerContext, trigger: Trigger, delivery: HookDelivery, received: Date): Promise<void> {
  if (!hasSignature(delivery.headers)) {
    if (!trigger.enforce_signature) return;
    throw new DomainError('unauthorized',
      'this hook needs a signed delivery: the HMAC-SHA256 of the body under the signing secret in X-Hub-Signature-256 (sha256=<hex>), X-Gitea-Signature or X-Forgejo-Signature, or the secret itself in X-Gitlab-Token',
    );
  }
  const what = `the signing secret of trigger ${trigger.id}`;
  let secret: string;
  try {
    if (!ctx.sealer) throw conflict(sealedValueFault(what, undefined));
    secret = ctx.sealer.open(trigger.secret_sealed, signingSecretContext(trigger.id));
  } catch (err) {
    const refusal = err instanceof DomainError ? err : conflict(sealedValueFault(what, ctx.sealer, err));
    throw await refused(ctx, trigger, received, refusal);
  }
  const verdict = checkSignature(delivery.headers, delivery.rawBody, secret);
  if (verdict.verdict === 'invalid') throw new DomainError('forbidden', `the delivery's ${verdict.header} does not match this trigger's signing secret`, { header: verdict.header });
}

