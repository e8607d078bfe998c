import { writeOnlyEdit } from '../../core/credentials/write-only';
import { targetSecretContext, entrySecretContext } from '../../core/credentials/seal-contexts';
import { badRequest, conflict, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { httpUrlFault } from '../../core/notifications/http-url';
import {
  deafnessOf,
  keepsStored,
  type StoredEntry,
  REQUIRED_FIELDS,
  urlHint,
  type AttachmentEvent,
  type NotificationField,
  type NotificationKind,
  type ObjectKind,
  type StoredObjectKind,
} from '../../core/notifications/notification-kinds';
import { encryptionKeyRequired } from '../../core/runs/run-secrets';
import type { DeliverySettings } from '../../core/notifications/notification-settings';
import type { Db } from '../../store/db';
import { isUniqueViolation } from '../../store/db';
import {
  deleteAttachment,
  deleteAttachmentsOfObject,
  deleteTarget,
  getAttachment,
  getTarget,
  getTargetForUpdate,
  insertAttachment,
  insertTarget,
  listAttachmentsOfObject,
  targetDeliveryStats,
  updateTarget,
  type Attachment,
  type Delivery,
  type StoredTarget,
  type TargetDeliveryStats,
  type TargetFields,
} from '../../store/notifications';
import { getTemplate } from '../../store/templates';
import type { Caller } from '../../store/tokens';
import { recordMutation, withholdFields, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { checkedAddress } from './notification-egress';

/**
 * Named notification targets and their attachments (spec part A 2.11, 4.8, 4.16; part B 5.3):
 * their writes, their views, and the sealing, hints and masks of their secrets, which a
 * template's or run's own `notifications` entries share.
 */

/** A target or entry as sent: a kind and its destination fields. */
export interface DestinationInput {
  kind: NotificationKind;
  url?: string | null;
  key?: string | null;
  to?: string | null;
}

/** A template's or run's own entry as sent. */
export interface EntryInput extends DestinationInput {
  on_failure?: boolean;
}

export interface TargetDraft extends DestinationInput {
  name: string;
  description?: string | null;
  org_id?: string | null;
}

/** Body paths of a target's or entries' secrets, withheld from the request's fingerprint. */
export function withholdDestinationSecrets(origin: AuditOrigin, prefix = ''): void {
  withholdFields(origin, [`${prefix}url`, `${prefix}key`]);
}


/** A URL a delivery may go to: https (or http) with a host that resolves to an address deliveries may reach. */
export async function checkDestinationUrl(delivery: DeliverySettings, url: string, field: string): Promise<void> {
  const fault = httpUrlFault(url);
  if (fault) throw badRequest(`${field}: ${fault}`, { field });
  const parsed = new URL(url);
  if (parsed.username || parsed.password) throw badRequest(`${field}: must not carry credentials; a token goes in key`, { field });
  try {
    await checkedAddress(delivery, parsed.hostname);
  } catch (err) {
    throw badRequest(`${field}: ${(err as Error).message}`, { field });
  }
}

/** Sealed url and key as a write keeps them: new values sealed, blank or masked ones kept. */
interface SealedSecrets {
  url_sealed: string | null;
  url_hint: string | null;
  key_sealed: string | null;
}

/**
 * Merges an edit's `url` and `key` with what is stored (spec part A 2.11 rules 3 and 5): a blank
 * or masked value keeps the stored one, a new one is checked and sealed. Returns the kept secrets
 * and which of the kind's required fields are still missing. A field the kind does not use is
 * dropped.
 */
async function mergeSecrets(
  ctx: Pick<ServerContext, 'sealer' | 'config'>,
  context: (field: 'url' | 'key') => string,
  kind: NotificationKind,
  sent: DestinationInput,
  stored: SealedSecrets | undefined,
  fieldPrefix: string,
  allowMissing = false,
): Promise<{ secrets: SealedSecrets; missing: NotificationField[] }> {
  const required = REQUIRED_FIELDS[kind];
  const secrets: SealedSecrets = { url_sealed: null, url_hint: null, key_sealed: null };
  // A blank, the mask or the url's hint keeps what is stored; a target's secret is never cleared by an edit.
  const edits = {
    url: writeOnlyEdit(sent.url, stored?.url_sealed, { keeps: (v) => keepsStored(v as string | null | undefined, stored?.url_hint ?? null), clears: () => false }),
    key: writeOnlyEdit(sent.key, stored?.key_sealed, { keeps: (v) => keepsStored(v as string | null | undefined, null), clears: () => false }),
  };
  const toSeal = (['url', 'key'] as const).filter((f) => required.includes(f) && edits[f].action === 'replace');
  // A field left missing is named before any sent value is checked.
  const present = (f: NotificationField) => (f === 'to' ? !!sent.to?.trim() : toSeal.includes(f) || !!(f === 'url' ? stored?.url_sealed : stored?.key_sealed));
  const missing = required.filter((f) => !present(f));
  if (missing.length && !allowMissing) throw missingField(missing, kind, fieldPrefix);
  if (toSeal.length && !ctx.sealer) throw encryptionKeyRequired(`the notification ${toSeal.join(' and ')}`, toSeal.map((f) => `${fieldPrefix}${f}`));
  if (required.includes('url')) {
    if (toSeal.includes('url')) {
      await checkDestinationUrl(ctx.config.delivery, sent.url!, `${fieldPrefix}url`);
      secrets.url_sealed = ctx.sealer!.seal(sent.url!, context('url'));
      secrets.url_hint = urlHint(sent.url!);
    } else if (edits.url.action === 'keep') {
      secrets.url_sealed = edits.url.sealed;
      secrets.url_hint = stored!.url_hint;
    }
  }
  if (required.includes('key')) {
    if (toSeal.includes('key')) secrets.key_sealed = ctx.sealer!.seal(sent.key!, context('key'));
    else if (edits.key.action === 'keep') secrets.key_sealed = edits.key.sealed;
  }
  return { secrets, missing };
}

const missingField = (missing: NotificationField[], kind: NotificationKind, prefix: string) =>
  badRequest(`${prefix}${missing[0]}: a ${kind} notification needs ${REQUIRED_FIELDS[kind].join(' and ')}`, { field: `${prefix}${missing[0]}` });

/** Recipients as stored: a comma-separated list, trimmed. */
const recipientsOf = (kind: NotificationKind, to: string | null | undefined) =>
  REQUIRED_FIELDS[kind].includes('to') && to ? to.split(',').map((s) => s.trim()).filter(Boolean).join(', ') : null;

// --- targets

/** A new target; 409 naming the settings when a secret must be sealed without the encryption key. */
export async function createTarget(ctx: ServerContext, caller: Caller, origin: AuditOrigin, draft: TargetDraft): Promise<StoredTarget> {
  const id = newId('ntf');
  const { secrets } = await mergeSecrets(ctx, (f) => targetSecretContext(id, f), draft.kind, draft, undefined, '');
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const target = await insertTarget(tx, id, fieldsOf(draft, secrets, false), caller.account.username);
    entry.body = { kind: 'notification.created', target_id: id, target: audited(target) };
    return target;
  });
}

/**
 * Replaces a target whole. A blank or masked `url` or `key` keeps the stored one; a target
 * waiting for its secret may be saved still missing it and keeps waiting; any other edit that
 * leaves a required field missing is refused naming it.
 */
export async function replaceTarget(ctx: ServerContext, origin: AuditOrigin, targetId: string, draft: TargetDraft): Promise<StoredTarget> {
  const current = await getTarget(ctx.sql, targetId);
  if (!current) throw notFound(`notification target ${targetId}`);
  // A target waiting for its secret may be saved still missing it (not its recipients), and keeps waiting.
  const { secrets, missing } = await mergeSecrets(ctx, (f) => targetSecretContext(targetId, f), draft.kind, draft, current, '', current.needs_secret);
  if (missing.includes('to')) throw missingField(missing, draft.kind, '');
  const waiting = current.needs_secret;
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const locked = await getTargetForUpdate(tx, targetId);
    if (!locked) throw notFound(`notification target ${targetId}`);
    const updated = (await updateTarget(tx, targetId, fieldsOf(draft, secrets, waiting && missing.length > 0)))!;
    entry.body = { kind: 'notification.updated', target_id: targetId, target: audited(updated), previous: audited(locked) };
    return updated;
  });
}

/** Deletes a target and every attachment. */
export async function removeTarget(ctx: ServerContext, origin: AuditOrigin, targetId: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getTargetForUpdate(tx, targetId);
    if (!current) throw notFound(`notification target ${targetId}`);
    const removed = (await deleteTarget(tx, targetId))!;
    entry.body = { kind: 'notification.deleted', target_id: targetId, target: audited(current), attachments: removed.attachments };
  });
}

function fieldsOf(draft: TargetDraft, secrets: SealedSecrets, needsSecret: boolean): TargetFields {
  return {
    name: draft.name,
    description: draft.description ?? '',
    org_id: draft.org_id ?? null,
    kind: draft.kind,
    ...secrets,
    recipients: recipientsOf(draft.kind, draft.to),
    needs_secret: needsSecret,
  };
}

/** The target's `delivery` block (spec part A 2.11 rule 5, 3.4). */
export function deliveryBlock(target: StoredTarget, stats: TargetDeliveryStats | undefined) {
  const missing = REQUIRED_FIELDS[target.kind].filter((f) => (f === 'url' ? !target.url_sealed : f === 'key' ? !target.key_sealed : false));
  const state =
    target.needs_secret || missing.length
      ? 'needs_secret'
      : stats?.retrying
        ? 'retrying'
        : stats?.latest_status === 'arrived'
          ? 'healthy'
          : stats?.latest_status === 'failed'
            ? 'failing'
            : 'configured';
  const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);
  return {
    state,
    missing,
    last_delivered_at: iso(stats?.last_delivered_at),
    last_failed_at: iso(stats?.last_failed_at),
    last_failure_reason: stats?.last_failure_reason ?? null,
    failed_last_7_days: stats?.failed_last_7_days ?? 0,
  };
}

/** A target as every read shows it: no secret, the URL as its scheme and host. */
export function targetView(target: StoredTarget, stats: TargetDeliveryStats | undefined) {
  return {
    id: target.id,
    ...audited(target),
    delivery: deliveryBlock(target, stats),
    created_by: target.created_by,
    created_at: target.created_at.toISOString(),
    updated_at: target.updated_at.toISOString(),
  };
}

/** Views of several targets with their delivery blocks, in one read of the delivery figures. */
export async function targetViews(db: Db, targets: StoredTarget[]) {
  const stats = await targetDeliveryStats(db, targets.map((t) => t.id));
  return targets.map((t) => targetView(t, stats.get(t.id)));
}

/** What a target's chain entries record: its view's fields that do not change with deliveries. */
function audited(target: StoredTarget) {
  return {
    name: target.name,
    description: target.description,
    org_id: target.org_id,
    kind: target.kind,
    url: target.url_hint,
    key_set: target.key_sealed !== null,
    to: target.recipients,
    needs_secret: target.needs_secret,
  };
}

// --- attachments

/**
 * How each kind of object is found when something is attached to it: the one place a kind is
 * wired in. Kinds this release does not serve yet have no entry, so an attachment to one answers
 * 404 for the unknown object.
 */
const NOTIFIABLE_OBJECTS: Record<ObjectKind, ((db: Db, id: string) => Promise<boolean>) | undefined> = {
  template: async (db, id) => (await getTemplate(db, id)) !== undefined,
  workflow: async (db, id) => (await getTemplate(db, id))?.kind === 'workflow',
  schedule: undefined,
  project: undefined,
  org: undefined,
};

/** How an attachment is stored: a workflow is a template with steps. */
export const storedObjectKind = (kind: ObjectKind): StoredObjectKind => (kind === 'workflow' ? 'template' : kind);

/** Finds the object an attachment names; 404 when there is none (or its kind is not served yet). */
export async function resolveNotifiable(db: Db, kind: ObjectKind, id: string): Promise<void> {
  const find = NOTIFIABLE_OBJECTS[kind];
  if (!find || !(await find(db, id))) throw notFound(`${kind} ${id}`);
}

export async function attachTarget(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  targetId: string,
  input: { object_kind: ObjectKind; object_id: string; event: AttachmentEvent },
): Promise<Attachment> {
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    if (!(await getTargetForUpdate(tx, targetId))) throw notFound(`notification target ${targetId}`);
    await resolveNotifiable(tx, input.object_kind, input.object_id);
    let attachment: Attachment;
    try {
      attachment = await insertAttachment(tx, {
        id: newId('nta'),
        target_id: targetId,
        object_kind: storedObjectKind(input.object_kind),
        object_id: input.object_id,
        event: input.event,
        created_by: caller.account.username,
      });
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw conflict(`notification target ${targetId} is already attached to ${input.object_kind} ${input.object_id} for ${input.event}`);
      }
      throw err;
    }
    entry.body = { kind: 'notification.attached', target_id: targetId, attachment: attachmentView(attachment) };
    return attachment;
  });
}

export async function detachTarget(ctx: ServerContext, origin: AuditOrigin, targetId: string, attachmentId: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const attachment = await getAttachment(tx, targetId, attachmentId);
    if (!attachment || !(await deleteAttachment(tx, targetId, attachmentId))) throw notFound(`attachment ${attachmentId} of notification target ${targetId}`);
    entry.body = { kind: 'notification.detached', target_id: targetId, attachment: attachmentView(attachment) };
  });
}

export function attachmentView(a: Attachment) {
  return { id: a.id, target_id: a.target_id, object_kind: a.object_kind, object_id: a.object_id, event: a.event, created_by: a.created_by, created_at: a.created_at.toISOString() };
}

/** What deleting a notification-bearing object will remove: its attachments, and the targets they name. */
export interface AttachmentCleanup {
  kind: StoredObjectKind;
  objectId: string;
  attachmentIds: string[];
  targetIds: string[];
}

/**
 * Reads an object's attachments before its delete, and says so in the delete's audit path as
 * `notification_attachments=<count>` and `notification_targets=<ids>` (spec part A 4.16). Call
 * `removeAttachments` after the entry is written, in the same transaction.
 */
export async function planAttachmentCleanup(db: Db, origin: AuditOrigin, kind: StoredObjectKind, objectId: string): Promise<AttachmentCleanup> {
  const attachments = await listAttachmentsOfObject(db, kind, objectId);
  const targetIds = [...new Set(attachments.map((a) => a.target_id))].sort();
  origin.path = `${origin.path}?notification_attachments=${attachments.length}&notification_targets=${targetIds.join(',')}`;
  return { kind, objectId, attachmentIds: attachments.map((a) => a.id).sort(), targetIds };
}

/** Removes the planned attachments; 409 (and the caller's transaction rolls back) when they changed since the plan. */
export async function removeAttachments(db: Db, plan: AttachmentCleanup): Promise<void> {
  const removed = (await deleteAttachmentsOfObject(db, plan.kind, plan.objectId)).sort();
  if (removed.length !== plan.attachmentIds.length || removed.some((id, i) => id !== plan.attachmentIds[i])) {
    throw conflict(
      `the notification attachments of ${plan.kind} ${plan.objectId} changed while it was being deleted; nothing was deleted, try again`,
      { notification_attachments: removed.length },
    );
  }
}

// --- a template's or run's own entries



/**
 * The entries to store for a write: each checked for its kind's fields (400 naming
 * `notifications[i].<field>`), its secrets sealed, and a masked or blank secret kept from the
 * stored entry of the same kind in the same place (or, failing that, the one whose hint it echoes).
 */
export async function storedEntries(
  ctx: Pick<ServerContext, 'sealer' | 'config'>,
  ownerId: string,
  sent: readonly EntryInput[],
  previous: readonly StoredEntry[] = [],
): Promise<StoredEntry[]> {
  const result: StoredEntry[] = [];
  for (const [i, entry] of sent.entries()) {
    const prefix = `notifications[${i}].`;
    const same = previous[i]?.kind === entry.kind ? previous[i] : undefined;
    const echoed = previous.find((p) => p.kind === entry.kind && p.url_hint !== undefined && p.url_hint === entry.url);
    const stored = same ?? echoed;
    const { secrets } = await mergeSecrets(
      ctx,
      () => entrySecretContext(ownerId),
      entry.kind,
      entry,
      stored ? { url_sealed: stored.url_sealed ?? null, url_hint: stored.url_hint ?? null, key_sealed: stored.key_sealed ?? null } : undefined,
      prefix,
    );
    result.push({
      kind: entry.kind,
      ...(secrets.url_sealed ? { url_sealed: secrets.url_sealed, url_hint: secrets.url_hint! } : {}),
      ...(secrets.key_sealed ? { key_sealed: secrets.key_sealed } : {}),
      ...(recipientsOf(entry.kind, entry.to) ? { to: recipientsOf(entry.kind, entry.to)! } : {}),
      ...(entry.on_failure ? { on_failure: true } : {}),
    });
  }
  return result;
}

/** Withholds every entry's secrets from the request's fingerprint. */
export function withholdEntrySecrets(origin: AuditOrigin, count: number): void {
  for (let i = 0; i < count; i++) withholdDestinationSecrets(origin, `notifications[${i}].`);
}

// --- reads

export function deliveryId(d: Pick<Delivery, 'target_id' | 'run_id' | 'seq'>): string {
  return `${d.target_id}/${d.run_id}/${d.seq}`;
}

export function deliveryView(d: Delivery) {
  const iso = (t: Date | null) => (t ? t.toISOString() : null);
  return {
    id: deliveryId(d),
    target_id: d.target_id,
    run_id: d.run_id,
    sequence: d.seq,
    event: d.event,
    status: d.status,
    attempts: d.attempts,
    reason: d.reason,
    queued_at: d.queued_at.toISOString(),
    last_attempt_at: iso(d.last_attempt_at),
    next_attempt_at: iso(d.next_attempt_at),
    finished_at: iso(d.finished_at),
  };
}

/** Why a target is not sent an event, as it stands now (spec part B 6.2 rule 3, 6.3 rule 8); undefined when it is. */
export function notSentBecause(target: StoredTarget, event: string, runStatus: string): string | undefined {
  const { missing } = deliveryBlock(target, undefined);
  if (target.needs_secret || missing.length) {
    return `not sent: the target is waiting for its secret${missing.length ? ` (${missing.join(' and ')})` : ''}`;
  }
  return deafnessOf(target.kind, event, runStatus);
}
