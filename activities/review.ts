import { Context } from '@temporalio/activity';
import type { ServerContext } from '../services/context';
import {
  postPullRequestNotice,
  pullRequestRunEnded,
  reportPullRequestComment,
  reportPullRequestStatus,
  type AttemptInfo,
} from '../services/schedules/review';
import type { PullRequestNotice } from '../workflows/definitions';

/** This attempt's number and when the next is due should it fail (the workflow's FORGE_RETRY: 1 s doubling, at most 60 s, 30 attempts). */
function attemptInfo(): AttemptInfo {
  const attempt = Context.current().info.attempt;
  if (attempt >= 30) return { attempt, nextTryAt: null };
  return { attempt, nextTryAt: Date.now() + Math.min(1000 * 2 ** (attempt - 1), 60_000) };
}

/**
 * What a pull request review's workflow does to the world (workflows/pull-request.ts), in `cairn
 * serve`'s schedule worker, which has the server's context: read a run's end, post a commit status
 * and a comment to the forge.
 */
export function createReviewActivities(ctx: ServerContext) {
  return {
    pullRequestRunEnded: (runId: string): Promise<boolean> => pullRequestRunEnded(ctx, runId),
    reportPullRequestStatus: (runId: string, ended: boolean): Promise<void> => reportPullRequestStatus(ctx, runId, ended, attemptInfo()),
    reportPullRequestComment: (runId: string): Promise<void> => reportPullRequestComment(ctx, runId, attemptInfo()),
    postPullRequestNotice: (notice: PullRequestNotice): Promise<void> => postPullRequestNotice(ctx, notice),
  };
}

export type ReviewActivities = ReturnType<typeof createReviewActivities>;
