import { skippedFireBody, skippedFireId, type SkippedFire } from '../../core/notifications/notification-messages';
import type { Db } from '../../store/db';
import { insertDeliveries, recordSkippedFire, SKIPPED_FIRE_SEQ, targetsHearingSkippedFire, type NewDelivery } from '../../store/notifications';
import type { ServerContext } from '../context';
import { carryOut } from '../effects';
import { handOffDelivery, oweDeliveryHandOffs } from './notification-recorder';
import { notSentBecause } from './notifications';

/**
 * A schedule's fire skipped because its inventory matched no host, announced to notification
 * targets as `schedule.skipped` (spec part B 6.1, 6.2 rules 2-3, 6.3). It is recorded in the
 * transaction that records the skip on the schedule: the skipped fire with its one event, one
 * delivery per target that hears it (skipped with why when the target never hears a skip or waits
 * for its secret), and the hand-offs of those pending. After the commit the hand-offs are made,
 * and each target's delivery workflow delivers it as it delivers a run's events, with the same
 * retries and records. A skip no target hears records nothing more than the schedule's
 * `last_skipped`.
 */

/** What a recorded skip owes after its commit: the hand-offs of its pending deliveries. */
export interface OwedSkipNotice {
  subjectId: string;
  targets: string[];
  handOffs: string[];
}

/** Records the notice of a skipped fire in `tx`; undefined when no target hears it or it was recorded before. */
export async function recordSkippedFireNotice(tx: Db, fire: SkippedFire & { projectId: string | null }): Promise<OwedSkipNotice | undefined> {
  const targets = await targetsHearingSkippedFire(tx, { schedule_id: fire.scheduleId, template_id: fire.templateId, project_id: fire.projectId });
  if (targets.length === 0) return undefined;
  const subjectId = skippedFireId(fire.scheduleId, fire.fireAt);
  const body = skippedFireBody(fire);
  if (!(await recordSkippedFire(tx, { id: subjectId, schedule_id: fire.scheduleId, fire_at: fire.fireAt, body }))) return undefined;
  const event = 'schedule.skipped';
  const rows: NewDelivery[] = targets.map((target) => {
    const why = notSentBecause(target, event, body.run.status);
    return { target_id: target.id, subject_id: subjectId, seq: SKIPPED_FIRE_SEQ, event, status: why ? 'skipped' : 'pending', reason: why ?? null };
  });
  await insertDeliveries(tx, rows);
  const pending = rows.filter((row) => row.status === 'pending').map((row) => row.target_id);
  return { subjectId, targets: pending, handOffs: await oweDeliveryHandOffs(tx, pending, subjectId) };
}

/** Hands a recorded skip's deliveries to their targets' workflows just after the commit; a failure is left to the outbox dispatcher. */
export async function handOffSkippedFireNotice(ctx: ServerContext, notice: OwedSkipNotice): Promise<void> {
  await carryOut(ctx, notice.handOffs, 'handing notification deliveries to Temporal', async () => {
    await Promise.all(notice.targets.map((targetId) => handOffDelivery(ctx, targetId, [notice.subjectId])));
  });
}
