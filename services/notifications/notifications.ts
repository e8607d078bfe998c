import { writeOnlyEdit } from '../../core/credentials/write-only';
import { targetSecretContext, entrySecretContext } from '../../core/credentials/seal-contexts';
import { badRequest, conflict, notFound, forbidden } from '../../core/errors';
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
import { deleteGrantsOn } from '../../store/access';
import {
  deleteAttachment,
  deleteAttachmentsOfObject,
  deleteTarget,
  getAttachment,
  getTarget,
  getTargetForUpdate,
  holdNotifiable,
  insertAttachment,
  insertTarget,
  listAttachmentsOfObject,
  targetDeliveryStats,
  updateTarget,
  type Attachment,
  type Delivery,
  type ListedDelivery,
  type StoredTarget,
  type TargetDeliveryStats,
  type TargetFields,
} from '../../store/notifications';
import type { Caller } from '../../store/tokens';
import { recordMutation, withholdFields, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import type { Permission } from '../../core/access/access';
import { requireAccess } from '../access/access';
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
  /** On an edit: the version it was made against (a read's `version`); absent replaces whatever is stored. */
  version?: number | null;
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

/**
 * A new target; 409 naming the settings when a secret must be sealed without the encryption key.
 * An imported one may lack its `url` or `key` and then waits for it (`needs_secret`, spec part A
 * 2.11 rule 5); its recipients are never optional.
 */
export async function createTarget(ctx: ServerContext, caller: Caller, origin: AuditOrigin, draft: TargetDraft, options: { imported?: boolean } = {}): Promise<StoredTarget> {
  const id = newId('ntf');
  const { secrets, missing } = await mergeSecrets(ctx, (f) => targetSecretContext(id, f), draft.kind, draft, undefined, '', options.imported === true);
  if (missing.includes('to')) throw missingField(missing, draft.kind, '');
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const target = await insertTarget(tx, id, fieldsOf(draft, secrets, missing.length > 0), caller.account);
    entry.body = { kind: 'notification.created', target_id: id, target: audited(target) };
    return target;
  });
}

/**
 * What a change to a target needs (spec part A 4.8): an admin, or the grant on it (its owner and
 * its organization's admins manage it, its organization's members use it). Every operator reads
 * every target, so one that exists is never hidden from an operator: too little is a 403.
 */
async function requireTargetAccess(db: Db, caller: Caller, targetId: string, needed: Permission, action: string): Promise<void> {
  await requireAccess(db, caller, targetId, needed, { action: `${action} notification target ${targetId}`, readByRole: caller.account.role !== 'viewer' });
}

/** The 409 of an edit made against a version of the target that is no longer the stored one. */
const staleTarget = (targetId: string, version: number, why: string) =>
  conflict(`notification target ${targetId} ${why}; read it again (it is at version ${version}) and send your edit with that version`, {
    field: 'version',
    version,
  });

/**
 * Replaces a target whole, for an admin or a manager of it. A blank or masked `url` or `key`
 * keeps the stored one; a target waiting for its secret may be saved still missing it and keeps
 * waiting; any other edit that leaves a required field missing is refused naming it.
 *
 * Optimistic concurrency on the target's `version`: an edit sending a version that is not the
 * stored one is refused with 409 naming the current one, and so is an edit that finds the target
 * changed between reading it (whose secrets it merged with) and saving it, so no edit is lost.
 */
export async function replaceTarget(ctx: ServerContext, caller: Caller, origin: AuditOrigin, targetId: string, draft: TargetDraft): Promise<StoredTarget> {
  const current = await getTarget(ctx.sql, targetId);
  if (!current) throw notFound(`notification target ${targetId}`);
  await requireTargetAccess(ctx.sql, caller, targetId, 'manage', 'changing');
  if (draft.version != null && draft.version !== current.version) throw staleTarget(targetId, current.version, `is at another version than the ${draft.version} this edit was made against`);
  // A target waiting for its secret may be saved still missing it (not its recipients), and keeps waiting.
  const { secrets, missing } = await mergeSecrets(ctx, (f) => targetSecretContext(targetId, f), draft.kind, draft, current, '', current.needs_secret);
  if (missing.includes('to')) throw missingField(missing, draft.kind, '');
  const waiting = current.needs_secret;
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const locked = await getTargetForUpdate(tx, targetId);
    if (!locked) throw notFound(`notification target ${targetId}`);
    const updated = await updateTarget(tx, targetId, current.version, fieldsOf(draft, secrets, waiting && missing.length > 0));
    if (!updated) throw staleTarget(targetId, locked.version, 'changed while this edit was being saved; nothing was saved');
    entry.body = { kind: 'notification.updated', target_id: targetId, target: audited(updated), previous: audited(locked) };
    return updated;
  });
}

/** Deletes a target, every attachment and every grant on it, for an admin or a manager of it. */
export async function removeTarget(ctx: ServerContext, caller: Caller, origin: AuditOrigin, targetId: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getTargetForUpdate(tx, targetId);
    if (!current) throw notFound(`notification target ${targetId}`);
    await requireTargetAccess(tx, caller, targetId, 'manage', 'deleting');
    const grantsRemoved = await deleteGrantsOn(tx, targetId);
    const removed = (await deleteTarget(tx, targetId))!;
    entry.body = { kind: 'notification.deleted', target_id: targetId, target: audited(current), attachments: removed.attachments, grants_removed: grantsRemoved };
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
    version: target.version,
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

/** How an attachment is stored: a workflow is a template with steps. */
export const storedObjectKind = (kind: ObjectKind): StoredObjectKind => (kind === 'workflow' ? 'template' : kind);

/** Objects only an admin attaches targets to (spec part A 4.8). */
const ADMIN_ONLY_OBJECTS: ReadonlySet<ObjectKind> = new Set(['schedule', 'org']);
const OBJECT_NOUNS: Record<ObjectKind, string> = { template: 'a template', workflow: 'a workflow', schedule: 'a schedule', project: 'a project', org: 'an organization' };

/**
 * What attaching a target to an object, or detaching it, asks (spec part A 4.8): use of the target,
 * and management of the object (an admin; a manage grant on a template, workflow or project, or
 * admin of the organization owning it). Attaching to a schedule or an organization is admin work.
 * The object is held until the transaction ends (store/notifications.ts holdNotifiable); 404 when
 * it does not exist, or the caller may not read it.
 */
async function requireAttachAccess(db: Db, caller: Caller, targetId: string, kind: ObjectKind, objectId: string, action: 'attaching' | 'detaching'): Promise<void> {
  await requireTargetAccess(db, caller, targetId, 'use', action);
  const admin = caller.account.role === 'admin';
  if (!admin && ADMIN_ONLY_OBJECTS.has(kind)) {
    throw forbidden(`${action} a notification target to ${OBJECT_NOUNS[kind]} is admin work; ${caller.account.username} is ${caller.account.role === 'operator' ? 'an' : 'a'} ${caller.account.role}`, {
      required_role: 'admin',
    });
  }
  if (!(await holdNotifiable(db, kind, objectId))) throw notFound(`${kind} ${objectId}`);
  if (!admin) await requireAccess(db, caller, objectId, 'manage', { action: `${action} a notification target to ${kind} ${objectId}` });
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
    await requireAttachAccess(tx, caller, targetId, input.object_kind, input.object_id, 'attaching');
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

/** Detaches a target from an object; asks what attaching asked. An admin detaches one whose object is gone. */
export async function detachTarget(ctx: ServerContext, caller: Caller, origin: AuditOrigin, targetId: string, attachmentId: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const attachment = await getAttachment(tx, targetId, attachmentId);
    if (!attachment) throw notFound(`attachment ${attachmentId} of notification target ${targetId}`);
    if (caller.account.role !== 'admin') await requireAttachAccess(tx, caller, targetId, attachment.object_kind, attachment.object_id, 'detaching');
    if (!(await deleteAttachment(tx, targetId, attachmentId))) throw notFound(`attachment ${attachmentId} of notification target ${targetId}`);
    entry.body = { kind: 'notification.detached', target_id: targetId, attachment: attachmentView(attachment) };
  });
}

export function attachmentView(a: Attachment) {
  return { id: a.id, target_id: a.target_id, object_kind: a.object_kind, object_id: a.object_id, event: a.event, created_by: a.created_by, created_at: a.created_at.toISOString() };
}

/**
 * Deletes a notification-bearing object (a template or workflow, a schedule, a project, an
 * organization: spec part A 4.16) with its attachments, in the caller's transaction `tx`, leaving
 * the targets; the one way each of those deletes does it. `remove` deletes the object itself.
 *
 * The attachments are read first and the delete's chain entry says so in its path, as
 * `notification_attachments=<count>` and `notification_targets=<ids>` (sorted, comma-separated);
 * after `remove`, they are deleted, and when they are no longer the ones read (an attach or detach
 * committed in between) the delete answers 409 and, its transaction rolling back, deletes nothing.
 */
export async function deleteWithAttachments<T>(
  tx: Db,
  origin: AuditOrigin,
  kind: StoredObjectKind,
  objectId: string,
  remove: () => Promise<T>,
): Promise<{ removed: T; attachments: number }> {
  const attachments = await listAttachmentsOfObject(tx, kind, objectId);
  const planned = attachments.map((a) => a.id).sort();
  const targetIds = [...new Set(attachments.map((a) => a.target_id))].sort();
  origin.path = `${origin.path}?notification_attachments=${planned.length}&notification_targets=${targetIds.join(',')}`;
  const removed = await remove();
  const gone = (await deleteAttachmentsOfObject(tx, kind, objectId)).sort();
  if (gone.length !== planned.length || gone.some((id, i) => id !== planned[i])) {
    throw conflict(`the notification attachments of ${kind} ${objectId} changed while it was being deleted; nothing was deleted, try again`, {
      notification_attachments: gone.length,
    });
  }
  return { removed, attachments: planned.length };
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

/** A delivery's id: `<target id>/<subject id>/<sequence>`, the subject a run's id or a skipped fire's `<schedule id>@<fire time>`. */
export function deliveryId(d: Pick<Delivery, 'target_id' | 'subject_id' | 'seq'>): string {
  return `${d.target_id}/${d.subject_id}/${d.seq}`;
}

/** A delivery as reads show it: a run's names its run; a skipped fire's its schedule and fire time, and `run_id` null. */
export function deliveryView(d: Delivery & Partial<Pick<ListedDelivery, 'schedule_id' | 'fire_at'>>) {
  const iso = (t: Date | null) => (t ? t.toISOString() : null);
  return {
    id: deliveryId(d),
    target_id: d.target_id,
    ...(d.schedule_id ? { run_id: null, schedule_id: d.schedule_id, fire_at: iso(d.fire_at ?? null) } : { run_id: d.subject_id }),
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
