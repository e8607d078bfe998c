import {
  BLOCKERS,
  conditionsOf,
  interactionOf,
  isAlerting,
  mainCondition,
  summaryOf,
  thresholdsFor,
  waitingSeconds,
  WHO_ACTS,
  type AttentionWorker,
  type Blocker,
  type Condition,
  type Thresholds,
} from '../../core/runs/attention';
import { approvalBranches } from '../../core/runs/approval-branches';
import { newId } from '../../core/ids';
import { runView } from '../../core/runs/run-view';
import type { StepDefinition } from '../../core/runs/workflow-graph';
import { alertsOf, attentionWorkers, claimAlert, heldBackSchedules, setAlertSeq, slotHolders, unfinishedWork, type AttentionRow } from '../../store/attention';
import { appendEvent } from '../../store/events';
import { markOwed } from '../../store/notifications';
import { getRun } from '../../store/runs';
import type { ServerContext } from '../context';

/**
 * Attention (spec part A 2.12, 3.3, 4.2; part B 6.6): every unfinished run, workflow, pipeline,
 * split and held-back schedule under its one main blocker, and the alerts sent once per condition
 * that passes its threshold. The rules are core/attention.ts; this reads the facts and records
 * the alerts.
 */

/** One item as `GET /v1/attention` shows it. */
export interface AttentionItem {
  id: string;
  kind: string;
  status: string | null;
  template_id: string | null;
  requested_by: string | null;
  blocker: Blocker;
  /** The item's other conditions (spec part A 2.12), in blocker order. */
  badges: Blocker[];
  interaction: string;
  since: string;
  waiting_seconds: number;
  reason: string;
  who_can_act: string;
  next: string;
  /** The run the main blocker is about: the item's own, or its step or shard. */
  subject_run_id: string | null;
  alert_after_seconds: number;
  alerting: boolean;
  /** The alert sent for the main condition, once it has been. */
  alert_id: string | null;
  schedule_id?: string;
  schedule_name?: string;
  path: string;
  [detail: string]: unknown;
}

/** An item with what its alert needs: the run its event goes on, the condition's identity, its start. */
interface Evaluated {
  item: AttentionItem;
  alertRunId: string | null;
  identity: string;
  sinceAt: Date;
}

const ORDER = new Map(BLOCKERS.map((b, i) => [b, i]));

/** Every item the reader may read (all without a reader), in blocker order, oldest first within one. */
async function evaluate(ctx: ServerContext, readerId?: string): Promise<Evaluated[]> {
  const [rows, { now, workers }, holders, schedules] = await Promise.all([
    unfinishedWork(ctx.sql, readerId),
    attentionWorkers(ctx.sql),
    slotHolders(ctx.sql, readerId),
    heldBackSchedules(ctx.sql, readerId),
  ]);
  const push = <T>(map: Map<string, T[]>, key: string, value: T) => {
    const list = map.get(key);
    if (list) list.push(value);
    else map.set(key, [value]);
  };
  const workersByQueue = new Map<string, AttentionWorker[]>();
  for (const w of workers) push(workersByQueue, w.queue, w);
  const byRoot = new Map<string, AttentionRow[]>();
  const byId = new Map<string, AttentionRow>();
  const byParent = new Map<string, AttentionRow[]>();
  for (const row of rows) {
    push(byRoot, row.root_id, row);
    byId.set(row.id, row);
    if (row.parent_run_id) push(byParent, row.parent_run_id, row);
  }
  const facts = {
    now,
    workersByQueue,
    holderByQueue: holders,
    siblingsOf: (run: { parent_run_id: string | null }) => (run.parent_run_id ? (byParent.get(run.parent_run_id) ?? []) : []),
    branchesOf: (run: { parent_run_id: string | null; step_name: string | null }) => {
      const graph = ((run.parent_run_id ? byId.get(run.parent_run_id)?.graph : null) ?? []) as StepDefinition[];
      const definition = graph.find((s) => s.name === run.step_name);
      return Array.isArray(graph) && run.step_name ? approvalBranches(graph, { name: run.step_name, if_denied: definition?.if_denied }) : { on_approve: [], on_deny: [] };
    },
  };
  const { thresholds: install, file } = ctx.attention;
  const out: Evaluated[] = [];
  for (const [rootId, members] of byRoot) {
    const root = byId.get(rootId)!;
    const conditions = members.flatMap((m) => conditionsOf(m, facts));
    const chosen = mainCondition(conditions);
    if (!chosen) continue;
    const { main, badges } = chosen;
    const subject = byId.get(main.subject_id)!;
    const thresholds = thresholdsFor(install, file, { orgId: root.template_org_id, queue: subject.queue, templateId: root.template_id });
    const waiting = waitingSeconds(main.since, now);
    const sameElsewhere = conditions.filter((c) => c !== main && c.blocker === main.blocker).length;
    out.push({
      item: {
        id: root.id,
        kind: root.kind,
        status: root.status,
        template_id: root.template_id,
        requested_by: root.requested_by,
        blocker: main.blocker,
        badges,
        interaction: interactionOf(main.blocker, badges, sameElsewhere),
        since: main.since.toISOString(),
        waiting_seconds: waiting,
        reason: main.reason,
        who_can_act: main.who_can_act,
        next: main.next,
        subject_run_id: main.subject_id,
        ...main.details,
        alert_after_seconds: thresholds[main.blocker],
        alerting: isAlerting(waiting, thresholds[main.blocker]),
        alert_id: null,
        path: `/v1/runs/${root.id}`,
      },
      alertRunId: root.id,
      identity: main.identity,
      sinceAt: main.since,
    });
  }
  for (const s of schedules) {
    const thresholds = thresholdsFor(install, file, { orgId: s.template_org_id, templateId: s.template_id });
    const since = new Date(s.since);
    const waiting = waitingSeconds(since, now);
    const condition: Pick<Condition, 'blocker'> = { blocker: 'blocked' };
    out.push({
      item: {
        id: s.id,
        kind: 'schedule',
        status: null,
        template_id: s.template_id,
        requested_by: null,
        blocker: condition.blocker,
        badges: [],
        interaction: 'only blocked holds it',
        since: since.toISOString(),
        waiting_seconds: waiting,
        reason: `${s.fires} ${s.fires === 1 ? 'fire' : 'fires'} skipped: ${s.run_readable ? s.reason : 'a run this schedule started still goes'}`,
        who_can_act: WHO_ACTS.blocked,
        next: s.run_readable ? `wait for run ${s.run_id} to finish, or cancel it (POST /v1/runs/${s.run_id}/cancel)` : 'wait for the run it started to finish',
        subject_run_id: s.run_readable ? s.run_id : null,
        holder_run_id: s.run_readable ? s.run_id : null,
        alert_after_seconds: thresholds.blocked,
        alerting: isAlerting(waiting, thresholds.blocked),
        alert_id: null,
        schedule_id: s.id,
        schedule_name: s.name,
        path: `/v1/schedules/${s.id}`,
      },
      alertRunId: s.run_id,
      identity: `schedule_blocked:${s.id}:${since.toISOString()}`,
      sinceAt: since,
    });
  }
  const alerts = await alertsOf(ctx.sql, [...new Set(out.map((e) => e.alertRunId!).filter(Boolean))]);
  for (const e of out) e.item.alert_id = alerts.get(`${e.alertRunId} ${e.identity}`)?.id ?? null;
  out.sort(
    (a, b) =>
      ORDER.get(a.item.blocker)! - ORDER.get(b.item.blocker)! ||
      a.sinceAt.getTime() - b.sinceAt.getTime() ||
      a.item.id.localeCompare(b.item.id),
  );
  return out;
}

export interface AttentionAnswer {
  items: AttentionItem[];
  /** Items by blocker, over everything the reader may read whatever the filter. */
  counts: Record<Blocker, number>;
  total: number;
  /** Install-wide thresholds in seconds; zero means off. */
  thresholds: Thresholds;
}

/** `GET /v1/attention`: the reader's items (all for an admin), one blocker's with `blocker`, a page of them. */
export async function listAttention(
  ctx: ServerContext,
  query: { readerId?: string; blocker?: Blocker; limit: number; offset: number },
): Promise<AttentionAnswer> {
  const all = (await evaluate(ctx, query.readerId)).map((e) => e.item);
  const counts = Object.fromEntries(BLOCKERS.map((b) => [b, 0])) as Record<Blocker, number>;
  for (const item of all) counts[item.blocker] += 1;
  const matching = query.blocker ? all.filter((i) => i.blocker === query.blocker) : all;
  return {
    items: matching.slice(query.offset, query.offset + query.limit),
    counts,
    total: matching.length,
    thresholds: ctx.attention.thresholds,
  };
}

/**
 * The sweeper's share (spec part B 6.6): every item past its threshold alerts once per
 * condition. In one transaction: the condition's row in `attention_alerts` (a condition that has
 * alerted on any server, before any restart, inserts nothing and stops here), the run's
 * `run.needs_attention` event, and the event marked owed to its targets, which the notification
 * recorder (services/notification-recorder.ts) then records with one delivery per target attached
 * for `attention`, as it records every other event.
 */
export async function sweepAttention(ctx: ServerContext, stopped: () => boolean): Promise<void> {
  const due = (await evaluate(ctx)).filter((e) => e.item.alerting && e.item.alert_id === null && e.alertRunId);
  for (const e of due) {
    if (stopped()) return;
    try {
      await alertOnce(ctx, e);
    } catch (err) {
      ctx.logger.warn({ runId: e.alertRunId, blocker: e.item.blocker, err: (err as Error).message }, 'an attention alert could not be recorded; the next sweep tries again');
    }
  }
}

async function alertOnce(ctx: ServerContext, e: Evaluated): Promise<void> {
  const runId = e.alertRunId!;
  const item = e.item;
  const alertId = newId('att');
  const recorded = await ctx.sql.begin(async (tx) => {
    const claimed = await claimAlert(tx, {
      run_id: runId,
      condition: e.identity,
      id: alertId,
      blocker: item.blocker,
      subject_id: item.subject_run_id ?? runId,
      since: e.sinceAt,
      threshold_seconds: item.alert_after_seconds,
    });
    if (!claimed) return false;
    const run = await getRun(tx, runId);
    if (!run || run.finished_at) return false;
    const attention = {
      id: alertId,
      blocker: item.blocker,
      summary: summaryOf(item.kind, item.id, item.blocker, item.waiting_seconds),
      reason: item.reason,
      who_can_act: item.who_can_act,
      next: item.next,
      since: item.since,
      waiting_seconds: item.waiting_seconds,
      threshold_seconds: item.alert_after_seconds,
      subject_run_id: item.subject_run_id,
      path: `/v1/attention?blocker=${item.blocker}`,
      ...(item.schedule_id ? { schedule_id: item.schedule_id, schedule_name: item.schedule_name } : {}),
    };
    const seq = await appendEvent(tx, runId, 'run.needs_attention', { run: runView(run, 'preview'), attention });
    await setAlertSeq(tx, runId, e.identity, seq);
    await markOwed(tx, runId, seq, 'run.needs_attention');
    return true;
  });
  if (recorded) ctx.logger.info({ runId, alertId, blocker: item.blocker, itemId: item.id }, 'attention alert recorded');
}
