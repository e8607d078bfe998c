import type postgres from 'postgres';
import type { AttachmentEvent, NotificationKind, StoredObjectKind, ObjectKind } from '../core/notifications/notification-kinds';
import { followerReadableBy, runReadableBy } from './access';
import { readPage, type Db, type Page, type PageRequest } from './db';
import type { Run } from '../core/runs/run';
import { OUTBOX_CHANNEL, oweEffectsStep, type Effect } from './outbox';

/**
 * Notification targets, their attachments, the events owed them and each delivery (spec part A
 * 2.11, 4.8; part B 6.1-6.3). A target's `url` and `key` are stored sealed only.
 *
 * An event and its deliveries have a subject (schema/028): a run, whose events are its run events,
 * or a schedule's skipped fire (`skipped_fires`), whose one event is `schedule.skipped`. Both are
 * keyed by `subject_id` (the run's id, or the fire's `<schedule id>@<fire time>`) and a sequence.
 */

export interface StoredTarget {
  id: string;
  name: string;
  description: string;
  org_id: string | null;
  kind: NotificationKind;
  url_sealed: string | null;
  url_hint: string | null;
  key_sealed: string | null;
  recipients: string | null;
  needs_secret: boolean;
  /** The account that made it, which manages it (store/access.ts); null once that account is gone. */
  owner_id: string | null;
  /** Counts the target's writes, from 1: a PUT may send it back to be refused if it is stale. */
  version: number;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export type TargetFields = Pick<StoredTarget, 'name' | 'description' | 'org_id' | 'kind' | 'url_sealed' | 'url_hint' | 'key_sealed' | 'recipients' | 'needs_secret'>;

export interface Attachment {
  id: string;
  target_id: string;
  object_kind: StoredObjectKind;
  object_id: string;
  event: AttachmentEvent;
  created_by: string;
  created_at: Date;
}

export type DeliveryStatus = 'pending' | 'retrying' | 'arrived' | 'failed' | 'skipped';

export interface Delivery {
  target_id: string;
  /** The run's id, or a skipped fire's. */
  subject_id: string;
  seq: number;
  event: string;
  status: DeliveryStatus;
  attempts: number;
  reason: string | null;
  queued_at: Date;
  last_attempt_at: Date | null;
  next_attempt_at: Date | null;
  finished_at: Date | null;
}

/** A delivery as a target's list reads it: for a skipped fire's, its schedule and the fire's time (null for a run's). */
export interface ListedDelivery extends Delivery {
  schedule_id: string | null;
  fire_at: Date | null;
}

export interface NotificationEvent {
  subject_id: string;
  subject_kind: 'run' | 'skipped_fire';
  seq: number;
  event: string;
  state: 'owed' | 'recorded' | 'skipped';
  reason: string | null;
  owed_at: Date;
  recorded_at: Date | null;
}

// --- targets

/** A new target; `owner` is the account making it, or just a name for one the service makes (an import). */
export async function insertTarget(db: Db, id: string, fields: TargetFields, owner: string | { id: string; username: string }): Promise<StoredTarget> {
  const { id: ownerId, username } = typeof owner === 'string' ? { id: null, username: owner } : owner;
  const [row] = await db<StoredTarget[]>`
    INSERT INTO notification_targets (id, name, description, org_id, kind, url_sealed, url_hint, key_sealed, recipients, needs_secret, owner_id, created_by)
    VALUES (${id}, ${fields.name}, ${fields.description}, ${fields.org_id}, ${fields.kind}, ${fields.url_sealed}, ${fields.url_hint},
            ${fields.key_sealed}, ${fields.recipients}, ${fields.needs_secret}, ${ownerId}, ${username})
    RETURNING *`;
  return row;
}

/**
 * Replaces a target's fields, only while it is still at `version` (the one its edit was made
 * against), and counts the write; undefined when it is not (changed since, or gone).
 */
export async function updateTarget(db: Db, id: string, version: number, fields: TargetFields): Promise<StoredTarget | undefined> {
  const [row] = await db<StoredTarget[]>`
    UPDATE notification_targets SET
      name = ${fields.name}, description = ${fields.description}, org_id = ${fields.org_id}, kind = ${fields.kind},
      url_sealed = ${fields.url_sealed}, url_hint = ${fields.url_hint}, key_sealed = ${fields.key_sealed},
      recipients = ${fields.recipients}, needs_secret = ${fields.needs_secret}, version = version + 1, updated_at = now()
    WHERE id = ${id} AND version = ${version} RETURNING *`;
  return row;
}

/** Deletes a target; its attachments and deliveries go with it. Returns how many attachments it had. */
export async function deleteTarget(db: Db, id: string): Promise<{ attachments: number } | undefined> {
  const [row] = await db<{ attachments: number }[]>`
    WITH gone AS (DELETE FROM notification_targets WHERE id = ${id} RETURNING id)
    SELECT (SELECT count(*)::int FROM notification_attachments WHERE target_id = ${id}) AS attachments FROM gone`;
  return row;
}

export async function getTarget(db: Db, id: string): Promise<StoredTarget | undefined> {
  const [row] = await db<StoredTarget[]>`SELECT * FROM notification_targets WHERE id = ${id}`;
  return row;
}

/** The targets of these ids that exist, by id. */
export async function getTargets(db: Db, ids: string[]): Promise<Map<string, StoredTarget>> {
  if (ids.length === 0) return new Map();
  const rows = await db<StoredTarget[]>`SELECT * FROM notification_targets WHERE id IN ${db(ids)}`;
  return new Map(rows.map((row) => [row.id, row]));
}

export async function getTargetForUpdate(db: Db, id: string): Promise<StoredTarget | undefined> {
  const [row] = await db<StoredTarget[]>`SELECT * FROM notification_targets WHERE id = ${id} FOR UPDATE`;
  return row;
}

export async function listTargetPage(db: Db, page: PageRequest): Promise<Page<StoredTarget>> {
  return readPage(db, { from: db`notification_targets`, order: db`id` }, page);
}

/** What a target's `delivery` block is made of (spec part A 2.11 rule 5, 3.4). */
export interface TargetDeliveryStats {
  target_id: string;
  /** Status of the delivery that finished last (arrived or failed), if any. */
  latest_status: 'arrived' | 'failed' | null;
  last_delivered_at: Date | null;
  last_failed_at: Date | null;
  last_failure_reason: string | null;
  retrying: number;
  failed_last_7_days: number;
}

export async function targetDeliveryStats(db: Db, ids: string[]): Promise<Map<string, TargetDeliveryStats>> {
  if (ids.length === 0) return new Map();
  const rows = await db<TargetDeliveryStats[]>`
    SELECT t.id AS target_id,
      (SELECT d.status FROM notification_deliveries d WHERE d.target_id = t.id AND d.status IN ('arrived', 'failed')
        ORDER BY d.finished_at DESC LIMIT 1) AS latest_status,
      (SELECT max(d.finished_at) FROM notification_deliveries d WHERE d.target_id = t.id AND d.status = 'arrived') AS last_delivered_at,
      f.finished_at AS last_failed_at, f.reason AS last_failure_reason,
      (SELECT count(*)::int FROM notification_deliveries d WHERE d.target_id = t.id AND d.status = 'retrying') AS retrying,
      (SELECT count(*)::int FROM notification_deliveries d WHERE d.target_id = t.id AND d.status = 'failed'
        AND d.finished_at > now() - interval '7 days') AS failed_last_7_days
    FROM notification_targets t
    LEFT JOIN LATERAL (SELECT finished_at, reason FROM notification_deliveries d WHERE d.target_id = t.id AND d.status = 'failed'
                       ORDER BY d.finished_at DESC LIMIT 1) f ON true
    WHERE t.id IN ${db(ids)}`;
  return new Map(rows.map((r) => [r.target_id, r]));
}

// --- attachments

export async function insertAttachment(db: Db, row: Omit<Attachment, 'created_at'>): Promise<Attachment> {
  const [inserted] = await db<Attachment[]>`
    INSERT INTO notification_attachments (id, target_id, object_kind, object_id, event, created_by)
    VALUES (${row.id}, ${row.target_id}, ${row.object_kind}, ${row.object_id}, ${row.event}, ${row.created_by})
    RETURNING *`;
  return inserted;
}

export async function getAttachment(db: Db, targetId: string, id: string): Promise<Attachment | undefined> {
  const [row] = await db<Attachment[]>`SELECT * FROM notification_attachments WHERE id = ${id} AND target_id = ${targetId}`;
  return row;
}

export async function deleteAttachment(db: Db, targetId: string, id: string): Promise<boolean> {
  return (await db`DELETE FROM notification_attachments WHERE id = ${id} AND target_id = ${targetId} RETURNING id`).length > 0;
}

export async function listAttachmentsOfTarget(db: Db, targetId: string, page: PageRequest): Promise<Page<Attachment>> {
  return readPage(db, { from: db`notification_attachments`, order: db`id`, where: [db`target_id = ${targetId}`] }, page);
}

export async function listAttachmentsOfObject(db: Db, kind: StoredObjectKind, objectId: string): Promise<Attachment[]> {
  return db<Attachment[]>`SELECT * FROM notification_attachments WHERE object_kind = ${kind} AND object_id = ${objectId} ORDER BY id`;
}

/** Where each kind of object an attachment names is stored; a workflow is a template with steps. */
const NOTIFIABLE_TABLES: Record<ObjectKind, string> = { template: 'templates', workflow: 'templates', schedule: 'schedules', project: 'projects', org: 'orgs' };

/**
 * Whether the object an attachment names exists (for `workflow`, a template with steps), held
 * until the transaction ends (FOR KEY SHARE) so that it cannot be deleted under a new attachment:
 * its delete waits for the attach, then finds the attachment and removes it.
 */
export async function holdNotifiable(db: Db, kind: ObjectKind, id: string): Promise<boolean> {
  const [row] = await db<{ fits: boolean }[]>`
    SELECT ${kind === 'workflow' ? db`kind = 'workflow'` : db`true`} AS fits FROM ${db(NOTIFIABLE_TABLES[kind])} WHERE id = ${id} FOR KEY SHARE`;
  return row?.fits === true;
}

/** Removes every attachment of an object; returns the ids removed. */
export async function deleteAttachmentsOfObject(db: Db, kind: StoredObjectKind, objectId: string): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    DELETE FROM notification_attachments WHERE object_kind = ${kind} AND object_id = ${objectId} RETURNING id`;
  return rows.map((r) => r.id);
}

// --- owed events

/**
 * Marks a run event owed to its targets, with the outbox effect that records it; call it in the
 * transaction that writes the event. Dispatchers are woken at commit.
 */
export async function markOwed(db: Db, runId: string, seq: number, event: string): Promise<void> {
  await db`
    WITH owed AS (
      INSERT INTO notification_events (subject_id, seq, event) VALUES (${runId}, ${seq}, ${event}) ON CONFLICT DO NOTHING RETURNING subject_id, seq
    ), owed_record AS (
      INSERT INTO outbox (effect, subject, payload) SELECT 'event.record', subject_id, jsonb_build_object('seq', seq) FROM owed
    )
    SELECT pg_notify(${OUTBOX_CHANNEL}, '') FROM owed`;
}

/** A run event as it was appended: what its announcement is made from. */
export interface RunEventRecord {
  kind: string;
  body: Record<string, unknown>;
  at: Date;
}

/** An owed event as the recorder reads it, with the run event it announces (null when that is gone). */
export interface OwedEvent {
  seq: number;
  event: string;
  run_event: RunEventRecord | null;
}

/** An attachment by which a target hears one kind of a run's events. */
export interface HearingAttachment {
  target_id: string;
  event: AttachmentEvent;
}

/** What the recorder reads of a run's owed events, in one round trip. */
export interface OwedEvents {
  owed: OwedEvent[];
  /** The run as it stands (undefined when it is gone). */
  run: Run | undefined;
  /** False when the template the run came from no longer exists (its targets are then passed over). */
  template_exists: boolean;
  /**
   * Every attachment through which a target hears any of the run's events (spec part B 6.2 rule 1):
   * those to the run's template (every source carries it: a launch, a rerun, a schedule's or a
   * trigger's fire); to the schedule that fired it; to its project (the one the run works in, its
   * spec's `project`, and its template's); to its organization (the one that owns its project, and
   * the one that owns its template). The recorder keeps those for the event each owed event is heard as.
   */
  hearing: HearingAttachment[];
}

/**
 * The projects and organizations a subject sits in, as subqueries for an attachment rule (spec
 * part B 6.2): its own project and its template's; the organization that owns its template and
 * those that own its projects. `templateId` and `projectId` are SQL expressions: a run's columns,
 * or a schedule fire's values.
 */
function owningScopes(db: Db, templateId: postgres.Fragment, projectId: postgres.Fragment) {
  const projects = db`SELECT ${projectId} UNION SELECT project_id FROM templates WHERE id = ${templateId}`;
  const orgs = db`SELECT org_id FROM templates WHERE id = ${templateId} UNION SELECT org_id FROM projects WHERE id IN (${projects})`;
  return { projects, orgs };
}

/**
 * `FROM` of the attachments (`a`) through which a target may hear the events of the run named `r`
 * (OwedEvents.hearing says which): the run's scopes (its template, its schedule, its projects and
 * their organizations), each looked up in the attachments' index. So a run costs a probe a scope,
 * however many attachments the install holds.
 */
function attachmentsOfRun(db: Db) {
  const { projects, orgs } = owningScopes(db, db`r.template_id`, db`r.spec #>> '{project,id}'`);
  return db`
    FROM (
      SELECT 'template' AS kind, r.template_id AS id
      UNION ALL SELECT 'schedule', r.source_id WHERE r.source_kind = 'schedule'
      UNION ALL SELECT 'project', p.id FROM (${projects}) p(id)
      UNION ALL SELECT 'org', o.id FROM (${orgs}) o(id)
    ) scope
    JOIN notification_attachments a ON a.object_kind = scope.kind AND a.object_id = scope.id`;
}

/**
 * A run's events still owed up to `seq`, in event order, and in the same round trip the run event
 * each announces, the run, and the attachments that hear it. Undefined when none is owed. Nothing
 * is locked: `settleOwedEvents` writes what the recorder decided only if these are still the
 * events owed.
 */
export async function readOwedEventsUpTo(db: Db, runId: string, seq: number): Promise<OwedEvents | undefined> {
  type Row = Run & {
    owed_seq: number;
    owed_event: string;
    run_event_kind: string | null;
    run_event_body: Record<string, unknown> | null;
    run_event_at: Date | null;
    owed_template_exists: boolean;
    owed_hearing: HearingAttachment[];
  };
  const rows = await db<Row[]>`
    WITH owed AS (
      SELECT subject_id, seq, event FROM notification_events
      WHERE subject_id = ${runId} AND seq <= ${seq} AND state = 'owed'
    )
    SELECT r.*, o.seq AS owed_seq, o.event AS owed_event, e.kind AS run_event_kind, e.body AS run_event_body, e.at AS run_event_at,
      (r.template_id IS NULL OR EXISTS (SELECT 1 FROM templates WHERE id = r.template_id)) AS owed_template_exists,
      (SELECT coalesce(jsonb_agg(DISTINCT jsonb_build_object('target_id', a.target_id, 'event', a.event)), '[]'::jsonb) ${attachmentsOfRun(db)}) AS owed_hearing
    FROM owed o
    LEFT JOIN run_events e ON e.run_id = o.subject_id AND e.seq = o.seq
    LEFT JOIN runs r ON r.id = o.subject_id
    ORDER BY o.seq`;
  if (rows.length === 0) return undefined;
  const owed = rows.map(({ owed_seq: seq, owed_event: event, run_event_kind: kind, run_event_body: body, run_event_at: at }) => ({
    seq,
    event,
    run_event: kind !== null && body !== null && at !== null ? { kind, body, at } : null,
  }));
  // Every row carries the same run; the owed event's own columns are not the run's.
  const { owed_seq, owed_event, run_event_kind, run_event_body, run_event_at, owed_template_exists, owed_hearing, ...run } = rows[0];
  return { owed, run: run.id === null ? undefined : run, template_exists: owed_template_exists, hearing: owed_hearing };
}

/** An `event.record` effect as the outbox holds it: its id, and the run event up to which the run's events are owed. */
export interface OwedRecording {
  effectId: string;
  runId: string;
  seq: number;
}

/**
 * Records, in one statement for a batch of `event.record` effects, the owed events of every run
 * in it that nothing stored can hear, and completes (deletes) those runs' effects in the outbox
 * in the same statement; answers the ids of the effects completed. Nothing can hear a run when it
 * exists, it and its template (if it names one) have no notifications of their own, and no
 * attachment is on its template, schedule, project or organization. Its events owed up to the
 * latest of its effects' sequences are recorded (each recorded, no delivery: what deciding and
 * settling them would write) when each one's run event exists; a run with none owed any longer
 * has nothing left to do. They are locked in (run, event) order first, as settling locks a run's
 * in event order, so a recorder of an earlier one is waited for. Every other effect (a run heard,
 * gone, or owing an event whose run event is missing) is left as it is, for the recorder to read,
 * decide and settle.
 */
export async function recordUnheardOwedEvents(db: Db, recordings: OwedRecording[]): Promise<string[]> {
  if (recordings.length === 0) return [];
  const rows = await db<{ id: string }[]>`
    WITH unheard_recordings AS (
      SELECT i.effect_id, i.run_id, i.seq FROM jsonb_to_recordset(${db.json(recordings.map((r) => ({ effect_id: r.effectId, run_id: r.runId, seq: r.seq })) as never)}) AS i(effect_id bigint, run_id text, seq integer)
    ), unheard AS (
      SELECT r.id AS run_id, max(i.seq) AS seq FROM unheard_recordings i JOIN runs r ON r.id = i.run_id
      WHERE r.notifications = '[]'::jsonb
        AND (r.template_id IS NULL OR EXISTS (SELECT 1 FROM templates t WHERE t.id = r.template_id AND t.notifications = '[]'::jsonb))
        AND NOT EXISTS (SELECT 1 ${attachmentsOfRun(db)})
      GROUP BY r.id
    ), still_owed AS MATERIALIZED (
      SELECT n.subject_id, n.seq, EXISTS (SELECT 1 FROM run_events e WHERE e.run_id = n.subject_id AND e.seq = n.seq) AS announces
      FROM notification_events n JOIN unheard u ON n.subject_id = u.run_id AND n.seq <= u.seq
      WHERE n.state = 'owed'
      ORDER BY n.subject_id, n.seq FOR UPDATE OF n
    ), recordable AS (
      SELECT u.run_id FROM unheard u WHERE NOT EXISTS (SELECT 1 FROM still_owed s WHERE s.subject_id = u.run_id AND NOT s.announces)
    ), recorded AS (
      UPDATE notification_events n SET state = 'recorded', reason = NULL, recorded_at = now()
      FROM still_owed s
      WHERE n.subject_id = s.subject_id AND n.seq = s.seq AND s.subject_id IN (SELECT run_id FROM recordable)
    )
    DELETE FROM outbox o USING unheard_recordings i
    WHERE o.id = i.effect_id AND i.run_id IN (SELECT run_id FROM recordable)
    RETURNING o.id::text AS id`;
  return rows.map((r) => r.id);
}

/** How the recorder settled one owed event. */
export interface EventSettlement {
  seq: number;
  state: 'recorded' | 'skipped';
  reason: string | null;
}

/**
 * Writes what recording a run's owed events decided, in one statement, only if the events owed up
 * to `upTo` are still exactly those `settled` names, one each in event order (as readOwedEventsUpTo
 * answered them): each event settled, the deliveries queued, and the effects owed (their ids
 * answered: store/outbox.ts, kept for this server). The owed events are locked in event order
 * first, so a server recording an earlier one is waited for; when it recorded any of them, nothing
 * is written and undefined is answered, for the recorder to read again. So a run's events are recorded, and their deliveries
 * queued, once each and in the order the run reached them.
 */
export async function settleOwedEvents(
  db: Db,
  runId: string,
  upTo: number,
  settled: EventSettlement[],
  deliveries: NewDelivery[],
  effects: Effect[],
): Promise<string[] | undefined> {
  const unchanged = db`(SELECT unchanged FROM owed_now)`;
  const delivered = deliveries.length ? db`, ${insertDeliveriesStep(db, deliveries, unchanged)}` : db``;
  const owing = effects.length ? db`, ${oweEffectsStep(db, effects, true, unchanged)}` : db``;
  const [row] = await db<{ unchanged: boolean; effects: string[] | null }[]>`
    WITH still_owed AS MATERIALIZED (
      SELECT seq FROM notification_events
      WHERE subject_id = ${runId} AND seq <= ${upTo} AND state = 'owed' ORDER BY seq FOR UPDATE
    ), owed_now AS (
      SELECT coalesce(jsonb_agg(seq ORDER BY seq), '[]'::jsonb) = ${db.json(settled.map((one) => one.seq))} AS unchanged FROM still_owed
    ), settled AS (
      UPDATE notification_events n SET state = s.state, reason = s.reason, recorded_at = now()
      FROM jsonb_to_recordset(${db.json(settled as never)}) AS s(seq integer, state text, reason text)
      WHERE n.subject_id = ${runId} AND n.seq = s.seq AND ${unchanged}
    ) ${delivered} ${owing}
    SELECT ${unchanged} AS unchanged, ${effects.length ? db`(SELECT array_agg(id::text) FROM owed_effects)` : db`NULL::text[]`} AS effects`;
  return row.unchanged ? (row.effects ?? []) : undefined;
}

/**
 * The targets that hear a schedule's skipped fire (spec part B 6.2 rule 2), each once: those
 * attached for `skipped` to the schedule, the template it fires, or its organization (the one
 * that owns that template, and the one that owns the project it works in), and those attached to
 * the schedule for `failure`.
 */
export async function targetsHearingSkippedFire(db: Db, fire: { schedule_id: string; template_id: string | null; project_id: string | null }): Promise<StoredTarget[]> {
  const { orgs } = owningScopes(db, db`${fire.template_id}::text`, db`${fire.project_id}::text`);
  return db<StoredTarget[]>`
    SELECT t.* FROM notification_targets t
    WHERE t.id IN (
      SELECT a.target_id FROM notification_attachments a
      WHERE (a.event = 'skipped' AND (
          (a.object_kind = 'schedule' AND a.object_id = ${fire.schedule_id})
          OR (a.object_kind = 'template' AND a.object_id = ${fire.template_id})
          OR (a.object_kind = 'org' AND a.object_id IN (${orgs}))
        ))
        OR (a.event = 'failure' AND a.object_kind = 'schedule' AND a.object_id = ${fire.schedule_id})
    )
    ORDER BY t.id`;
}

/**
 * Records a skipped fire and its one event, `schedule.skipped` (sequence 1), as recorded: its
 * deliveries are queued in the same transaction. Answers false when the fire was recorded before.
 */
export async function recordSkippedFire(db: Db, fire: { id: string; schedule_id: string; fire_at: Date; body: Record<string, unknown> }): Promise<boolean> {
  const rows = await db`
    WITH fire AS (
      INSERT INTO skipped_fires (id, schedule_id, fire_at, body) VALUES (${fire.id}, ${fire.schedule_id}, ${fire.fire_at}, ${db.json(fire.body as never)})
      ON CONFLICT DO NOTHING RETURNING id
    )
    INSERT INTO notification_events (subject_id, subject_kind, seq, event, state, recorded_at)
    SELECT id, 'skipped_fire', ${SKIPPED_FIRE_SEQ}, 'schedule.skipped', 'recorded', now() FROM fire
    RETURNING subject_id`;
  return rows.length > 0;
}

/** The sequence number of a skipped fire's one event. */
export const SKIPPED_FIRE_SEQ = 1;

// --- deliveries

export interface NewDelivery {
  target_id: string;
  subject_id: string;
  seq: number;
  event: string;
  status: 'pending' | 'skipped';
  reason: string | null;
}

/** Queues deliveries; one that exists already (same target, run and sequence) is left as it is. */
export async function insertDeliveries(db: Db, rows: NewDelivery[]): Promise<void> {
  if (rows.length === 0) return;
  await db`WITH ${insertDeliveriesStep(db, rows)} SELECT 1`;
}

/**
 * The same as a step of a larger statement (a CTE named `delivered`); skipped deliveries are
 * finished as they are queued. `onlyIf`: queued only when it holds (a condition on the statement's
 * other steps).
 */
function insertDeliveriesStep(db: Db, rows: NewDelivery[], onlyIf?: postgres.Fragment) {
  return db`delivered AS (
    INSERT INTO notification_deliveries (target_id, subject_id, seq, event, status, reason, finished_at)
    SELECT d.target_id, d.subject_id, d.seq, d.event, d.status, d.reason, CASE WHEN d.status = 'skipped' THEN now() END
    FROM jsonb_to_recordset(${db.json(rows as never)}) AS d(target_id text, subject_id text, seq integer, event text, status text, reason text)
    WHERE ${onlyIf ?? db`true`}
    ON CONFLICT DO NOTHING
  )`;
}

/** Everything an attempt at the next open delivery about a subject to a target reads, in one round trip. */
export interface AttemptState {
  seq: number;
  attempts: number;
  next_attempt_at: Date | null;
  target: StoredTarget | null;
  /** The run's status now, or a skipped fire's (`skipped`); null when the subject is gone. */
  subject_status: string | null;
  /** The event's name, body and time: a run event's, or the skipped fire's. */
  event: { kind: string; body: Record<string, unknown>; at: Date } | null;
  earlier_failed: boolean;
}

export async function nextAttemptState(db: Db, targetId: string, subjectId: string): Promise<AttemptState | undefined> {
  const [row] = await db<
    (Omit<AttemptState, 'event'> & { kind: string | null; body: Record<string, unknown> | null; at: Date | null })[]
  >`
    SELECT d.seq, d.attempts, d.next_attempt_at, to_jsonb(t.*) AS target,
      COALESCE(r.status, f.body->'run'->>'status') AS subject_status,
      COALESCE(e.kind, CASE WHEN f.id IS NOT NULL THEN n.event END) AS kind, COALESCE(e.body, f.body) AS body, COALESCE(e.at, f.at) AS at,
      EXISTS (SELECT 1 FROM notification_deliveries p
              WHERE p.target_id = d.target_id AND p.subject_id = d.subject_id AND p.seq < d.seq AND p.status = 'failed') AS earlier_failed
    FROM notification_deliveries d
    JOIN notification_events n ON n.subject_id = d.subject_id AND n.seq = d.seq
    LEFT JOIN notification_targets t ON t.id = d.target_id
    LEFT JOIN runs r ON r.id = n.run_id
    LEFT JOIN run_events e ON e.run_id = n.run_id AND e.seq = d.seq
    LEFT JOIN skipped_fires f ON f.id = n.fire_id
    WHERE d.target_id = ${targetId} AND d.subject_id = ${subjectId} AND d.status IN ('pending', 'retrying')
    ORDER BY d.seq LIMIT 1`;
  if (!row) return undefined;
  const { kind, body, at, ...rest } = row;
  return { ...rest, event: kind ? { kind, body: body!, at: at! } : null };
}

/** Subjects (runs, skipped fires) with deliveries to this target still to make, oldest first. */
export async function subjectsWithOpenDeliveries(db: Db, targetId: string, limit = 10_000): Promise<string[]> {
  const rows = await db<{ subject_id: string }[]>`
    SELECT subject_id FROM notification_deliveries WHERE target_id = ${targetId} AND status IN ('pending', 'retrying')
    GROUP BY subject_id ORDER BY min(queued_at) LIMIT ${limit}`;
  return rows.map((r) => r.subject_id);
}

/**
 * Records an attempt's outcome, only while the delivery is still open: a finished delivery is
 * never rewritten, so a repeated attempt (a retried activity) changes nothing.
 */
export async function recordAttempt(
  db: Db,
  key: { target_id: string; subject_id: string; seq: number },
  outcome: { status: DeliveryStatus; attempts: number; reason: string | null; nextAttemptAt?: Date },
): Promise<boolean> {
  const finished = outcome.status === 'arrived' || outcome.status === 'failed' || outcome.status === 'skipped';
  const rows = await db`
    UPDATE notification_deliveries SET status = ${outcome.status}, attempts = ${outcome.attempts}, reason = ${outcome.reason},
      last_attempt_at = CASE WHEN ${outcome.status} = 'skipped' THEN last_attempt_at ELSE now() END,
      next_attempt_at = ${outcome.nextAttemptAt ?? null}, finished_at = ${finished ? db`now()` : null}
    WHERE target_id = ${key.target_id} AND subject_id = ${key.subject_id} AND seq = ${key.seq} AND status IN ('pending', 'retrying')
    RETURNING 1`;
  return rows.length > 0;
}


/** A run's owed events and their deliveries, in event order (GET /v1/runs/{id}/notifications). */
export async function listRunNotifications(db: Db, runId: string): Promise<{ events: NotificationEvent[]; deliveries: (Delivery & { target_name: string; target_kind: string })[] }> {
  const events = await db<NotificationEvent[]>`SELECT * FROM notification_events WHERE subject_id = ${runId} ORDER BY seq`;
  const deliveries = await db<(Delivery & { target_name: string; target_kind: string })[]>`
    SELECT d.*, t.name AS target_name, t.kind AS target_kind FROM notification_deliveries d
    JOIN notification_targets t ON t.id = d.target_id
    WHERE d.subject_id = ${runId} ORDER BY d.seq, d.target_id`;
  return { events, deliveries };
}

/**
 * A target's recent deliveries, newest first: every one, or for `readerId` only those of runs that
 * account may read (store/access.ts runReadableBy) and of skipped fires of schedules it may read
 * (followerReadableBy, as a schedule is read), `total` counting only them.
 */
export async function listDeliveriesOfTarget(
  db: Db,
  targetId: string,
  query: { limit: number; offset: number; status?: DeliveryStatus },
  readerId?: string,
): Promise<{ rows: ListedDelivery[]; total: number }> {
  const status = query.status ? db`AND d.status = ${query.status}` : db``;
  const readable =
    readerId !== undefined
      ? db`AND (d.subject_id IN (SELECT r.id FROM runs r WHERE ${runReadableBy(db, readerId, 'r')})
             OR d.subject_id IN (SELECT f.id FROM skipped_fires f JOIN schedules s ON s.id = f.schedule_id
                                 WHERE ${followerReadableBy(db, readerId, 'owner_account_id', 's')}))`
      : db``;
  const filter = db`d.target_id = ${targetId} ${status} ${readable}`;
  const rows = await db<ListedDelivery[]>`
    SELECT d.*, f.schedule_id, f.fire_at
    FROM notification_deliveries d
    JOIN notification_events n ON n.subject_id = d.subject_id AND n.seq = d.seq
    LEFT JOIN skipped_fires f ON f.id = n.fire_id
    WHERE ${filter}
    ORDER BY d.queued_at DESC, d.subject_id DESC, d.seq DESC LIMIT ${query.limit} OFFSET ${query.offset}`;
  const [{ n }] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM notification_deliveries d WHERE ${filter}`;
  return { rows, total: n };
}
