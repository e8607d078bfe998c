// What one run costs beside the bare workflow (issue: per-run cost): PostgreSQL statements and
// transactions, Temporal history events and billable actions, processes started. Counts, not
// times, so they hold on a loaded machine and explain the time ratios printed beside them.
import { readFileSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import type postgres from 'postgres';
import { mapLimit } from './concurrency';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** Processes the kernel has started since boot (`processes` in /proc/stat): the delta over a batch. */
export function processesStarted(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n').find((l) => l.startsWith('processes '));
  return line ? Number(line.split(' ')[1]) : Number.NaN;
}

/** Transactions PostgreSQL has committed in the install's database: the delta over a batch. */
export async function transactionsCommitted(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ n: string }[]>`SELECT xact_commit::text AS n FROM pg_stat_database WHERE datname = current_database()`;
  return Number(row.n);
}

export interface HistoryCost {
  events: number;
  actions: number;
  /** Billable actions by kind, per workflow. */
  breakdown: Record<string, number>;
}

/**
 * Temporal Cloud's billable actions in one history, as its documentation lists them: the start,
 * each activity attempt, each timer, each search-attribute upsert (not the ones given at start),
 * each signal received or sent, each child started, and the local activities of one workflow task
 * as one. Heartbeats are billed too but never reach a history; they are left out of both sides.
 */
export function billableActions(events: HistoryEvent[]): Record<string, number> {
  const counts: Record<string, number> = {};
  const add = (kind: string, n = 1) => void (counts[kind] = (counts[kind] ?? 0) + n);
  const localActivityTasks = new Set<string>();
  for (const event of events) {
    if (event.workflowExecutionStartedEventAttributes) add('start');
    else if (event.activityTaskStartedEventAttributes) add('activity', event.activityTaskStartedEventAttributes.attempt ?? 1);
    else if (event.timerStartedEventAttributes) add('timer');
    else if (event.upsertWorkflowSearchAttributesEventAttributes) {
      // A `patched()` marker's TemporalChangeVersion upsert is not billed.
      const fields = Object.keys(event.upsertWorkflowSearchAttributesEventAttributes.searchAttributes?.indexedFields ?? {});
      if (fields.some((field) => field !== 'TemporalChangeVersion')) add('upsert');
    }
    else if (event.workflowExecutionSignaledEventAttributes) add('signal');
    else if (event.signalExternalWorkflowExecutionInitiatedEventAttributes) add('signal');
    else if (event.startChildWorkflowExecutionInitiatedEventAttributes) add('child');
    else if (event.markerRecordedEventAttributes?.markerName === 'core_local_activity') {
      localActivityTasks.add(String(event.markerRecordedEventAttributes.workflowTaskCompletedEventId));
    }
  }
  if (localActivityTasks.size) add('local activities', localActivityTasks.size);
  return counts;
}

/** History events and billable actions per workflow, averaged over the given workflows. */
export async function historyCost(client: Client, workflowIds: string[]): Promise<HistoryCost> {
  const histories = await mapLimit(workflowIds.length, 10, async (i) => (await client.workflow.getHandle(workflowIds[i]).fetchHistory()).events ?? []);
  const breakdown: Record<string, number> = {};
  let events = 0;
  for (const history of histories) {
    events += history.length;
    for (const [kind, n] of Object.entries(billableActions(history))) breakdown[kind] = (breakdown[kind] ?? 0) + n;
  }
  const per = (n: number) => n / histories.length;
  const perKind = Object.fromEntries(Object.entries(breakdown).map(([k, n]) => [k, per(n)]));
  return { events: per(events), actions: per(Object.values(breakdown).reduce((a, b) => a + b, 0)), breakdown: perKind };
}

export const describeActions = (cost: HistoryCost) =>
  Object.entries(cost.breakdown)
    .map(([kind, n]) => `${kind} ${n.toFixed(2)}`)
    .join(', ');
