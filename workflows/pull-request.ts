import { proxyActivities, sleep } from '@temporalio/workflow';
import type { ReviewActivities } from '../activities/review';
import type { PullRequestWorkflowInput } from './definitions';

/** Forge calls are retried with backoff (1 s, doubling, up to a minute between) for about half an hour. */
export const FORGE_RETRY = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m', maximumAttempts: 30 } as const;

/**
 * A pull request review's report (services/schedules/review.ts): the run's commit status `pending`,
 * then, once the run has ended (looked at on a durable timer that backs off from one second to
 * thirty), its final status and its one comment. Or one notice about no run. Every forge call is an
 * activity retried on failure, each failed attempt shown on the run's `pull_request_report`.
 */
export async function pullRequestWorkflow(input: PullRequestWorkflowInput): Promise<void> {
  const forge = proxyActivities<ReviewActivities>({ startToCloseTimeout: '30s', retry: FORGE_RETRY });
  const store = proxyActivities<ReviewActivities>({ startToCloseTimeout: '30s', retry: { initialInterval: '1s', maximumInterval: '10s' } });
  if (input.notice) {
    await forge.postPullRequestNotice(input.notice);
    return;
  }
  const { runId } = input;
  if (!(await store.pullRequestRunEnded(runId))) {
    await forge.reportPullRequestStatus(runId, false);
    let wait = 1000;
    while (!(await store.pullRequestRunEnded(runId))) {
      await sleep(wait);
      wait = Math.min(wait * 2, 30_000);
    }
  }
  await forge.reportPullRequestStatus(runId, true);
  await forge.reportPullRequestComment(runId);
}
