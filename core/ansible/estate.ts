import type { RunStatus } from '../runs/run';

/**
 * The estate and changes as pure rules (spec part A 2.13, 4.4; part B 8).
 */

/** `GET /v1/estate` pages hosts: `limit` default 1000, at most 10,000. */
export const ESTATE_PAGE_DEFAULT = 1000;
export const ESTATE_PAGE_MAX = 10_000;

/** `GET /v1/changes` reads at most this many labelled runs, newest first; `partial` says it stopped there (spec part B 8). */
export const CHANGE_SCAN_CAP = 10_000;
/** `GET /v1/changes/{change}` lists at most this many member runs, oldest first. */
export const CHANGE_MEMBERS_CAP = 1000;

/** Whether an instant predates the estate's history (its oldest kept reading). */
export function beforeHistory(at: Date, horizon: Date | null): boolean {
  return horizon !== null && at.getTime() < horizon.getTime();
}

/**
 * A change's outcome from its member runs' statuses:
 * - `in_progress` while any member is held, pending or running;
 * - else `succeeded` when every member succeeded;
 * - else `failed` when any failed or was interrupted (`partial` when others succeeded);
 * - else `canceled` or `rejected` when every member ended so (a mix of the two is `canceled`);
 * - `none` with no member the caller may read.
 */
export type ChangeOutcome = 'in_progress' | 'succeeded' | 'failed' | 'partial' | 'canceled' | 'rejected' | 'none';

export function changeOutcome(counts: Partial<Record<RunStatus, number>>): ChangeOutcome {
  const n = (s: RunStatus) => counts[s] ?? 0;
  const total = Object.values(counts).reduce((a, b) => a + (b ?? 0), 0);
  if (total === 0) return 'none';
  if (n('held') + n('pending') + n('running') > 0) return 'in_progress';
  if (n('succeeded') === total) return 'succeeded';
  const failed = n('failed') + n('interrupted');
  if (failed > 0) return n('succeeded') > 0 ? 'partial' : 'failed';
  if (n('succeeded') > 0) return 'partial';
  return n('rejected') === total ? 'rejected' : 'canceled';
}
