import type { Db } from './db';
import type { StoredSurveyField } from './templates';

/**
 * What `GET /v1/doctor` reads that no other store module answers (services/doctor.ts): the
 * notification attachments whose object or target is gone, the deliveries kept as failed, and
 * the enabled schedules that fire a template a fire could not launch. Each list is bounded, with
 * the whole count beside it.
 */

/** A first page of findings and how many there are in all. */
export interface Findings<T> {
  rows: T[];
  total: number;
}

/** An attachment whose object (template, schedule, project, organization) or target no longer exists. */
export interface OrphanedAttachment {
  id: string;
  target_id: string;
  object_kind: string;
  object_id: string;
  event: string;
  created_at: Date;
  target_gone: boolean;
  object_gone: boolean;
}

/** Attachments whose object or target is gone (spec part A 4.16), in id order. */
export async function orphanedAttachments(db: Db, limit: number): Promise<Findings<OrphanedAttachment>> {
  const rows = await db<(OrphanedAttachment & { total: number })[]>`
    WITH judged AS (
      SELECT a.id, a.target_id, a.object_kind, a.object_id, a.event, a.created_at,
        NOT EXISTS (SELECT 1 FROM notification_targets t WHERE t.id = a.target_id) AS target_gone,
        CASE a.object_kind
          WHEN 'template' THEN NOT EXISTS (SELECT 1 FROM templates o WHERE o.id = a.object_id)
          WHEN 'schedule' THEN NOT EXISTS (SELECT 1 FROM schedules o WHERE o.id = a.object_id)
          WHEN 'project' THEN NOT EXISTS (SELECT 1 FROM projects o WHERE o.id = a.object_id)
          WHEN 'org' THEN NOT EXISTS (SELECT 1 FROM orgs o WHERE o.id = a.object_id)
          ELSE true
        END AS object_gone
      FROM notification_attachments a
    )
    SELECT *, count(*) OVER ()::int AS total FROM judged WHERE target_gone OR object_gone ORDER BY id LIMIT ${limit}`;
  return { rows: rows.map(({ total: _total, ...row }) => row), total: rows[0]?.total ?? 0 };
}

/** A delivery kept as failed, with its target's name; a run's names the run, a skipped fire's its schedule and fire time. */
export interface FailedDelivery {
  target_id: string;
  target_name: string;
  run_id: string | null;
  schedule_id: string | null;
  fire_at: Date | null;
  seq: number;
  event: string;
  attempts: number;
  reason: string | null;
  finished_at: Date | null;
}

/** Deliveries kept as failed (spec part B 6.3 rule 7), newest first; and how many failed in the last `recentDays`. */
export async function failedDeliveries(db: Db, limit: number, recentDays: number): Promise<Findings<FailedDelivery> & { recent: number }> {
  const rows = await db<FailedDelivery[]>`
    SELECT d.target_id, t.name AS target_name, n.run_id, f.schedule_id, f.fire_at, d.seq, d.event, d.attempts, d.reason, d.finished_at
    FROM notification_deliveries d JOIN notification_targets t ON t.id = d.target_id
    JOIN notification_events n ON n.subject_id = d.subject_id AND n.seq = d.seq
    LEFT JOIN skipped_fires f ON f.id = n.fire_id
    WHERE d.status = 'failed'
    ORDER BY d.finished_at DESC NULLS LAST, d.subject_id, d.seq, d.target_id LIMIT ${limit}`;
  const [{ total, recent }] = await db<{ total: number; recent: number }[]>`
    SELECT count(*)::int AS total,
      count(*) FILTER (WHERE finished_at > now() - make_interval(days => ${recentDays}))::int AS recent
    FROM notification_deliveries WHERE status = 'failed'`;
  return { rows, total, recent };
}

/** A template that enabled schedules fire and whose survey has a required question, with that survey. */
export interface ScheduledSurvey {
  id: string;
  survey: StoredSurveyField[];
}

/**
 * The templates fired by an enabled schedule whose survey has at least one required question:
 * the only ones an unattended fill can fail on. Which of them fail is the launch rule's to say.
 */
export async function scheduledTemplatesWithRequiredQuestions(db: Db): Promise<ScheduledSurvey[]> {
  return db<ScheduledSurvey[]>`
    SELECT t.id, t.survey FROM templates t
    WHERE t.survey @> '[{"required": true}]'::jsonb
      AND EXISTS (SELECT 1 FROM schedules s WHERE s.enabled AND s.template_id = t.id)
    ORDER BY t.id`;
}

/** An enabled schedule whose template is gone or is one of the templates named. */
export interface BrokenScheduleRow {
  id: string;
  name: string;
  template_id: string;
  template_gone: boolean;
  next_fire_at: Date | null;
}

/** Enabled schedules firing a template that is gone or one of `templateIds`, in id order. */
export async function schedulesFiring(db: Db, templateIds: string[], limit: number): Promise<Findings<BrokenScheduleRow>> {
  const named = templateIds.length ? db`OR s.template_id IN ${db(templateIds)}` : db``;
  const rows = await db<(BrokenScheduleRow & { total: number })[]>`
    SELECT s.id, s.name, s.template_id, t.id IS NULL AS template_gone, s.next_fire_at, count(*) OVER ()::int AS total
    FROM schedules s LEFT JOIN templates t ON t.id = s.template_id
    WHERE s.enabled AND s.template_id IS NOT NULL AND (t.id IS NULL ${named})
    ORDER BY s.id LIMIT ${limit}`;
  return { rows: rows.map(({ total: _total, ...row }) => row), total: rows[0]?.total ?? 0 };
}
