import { commentCall, commentCommand, defaultApiUrl, readReviewDelivery, statusCall } from '../../core/schedules/review';
import { githubPullRequest, githubPullRequestComment } from '../support/forge-deliveries';

const pr = { repository: 'acme/infra', number: 12, headSha: 'a'.repeat(40) };

describe('reading review deliveries', () => {
  test("GitHub's pull_request and issue_comment", () => {
    expect(readReviewDelivery({ 'x-github-event': 'pull_request' }, githubPullRequest(pr, 'synchronize'))).toEqual({ kind: 'pull_request', forge: 'github', ...pr });
    expect(readReviewDelivery({ 'x-github-event': 'pull_request' }, githubPullRequest(pr, 'closed'))).toMatchObject({ kind: 'other' });
    const comment = githubPullRequestComment(pr, { id: 5, body: '  /service apply  \nplease', user: { id: 9, login: 'mona' } });
    expect(readReviewDelivery({ 'x-github-event': 'issue_comment' }, comment)).toEqual({
      kind: 'comment', forge: 'github', repository: pr.repository, number: 12, command: 'apply',
      comment: { id: '5', body: '  /service apply  \nplease', authorId: '9', authorLogin: 'mona' },
    });
    const onIssue = { ...comment, issue: { number: 12 } };
    expect(readReviewDelivery({ 'x-github-event': 'issue_comment' }, onIssue)).toMatchObject({ kind: 'other', what: 'comments on issues' });
    expect(readReviewDelivery({ 'x-github-event': 'ping' }, {})).toEqual({ kind: 'ping' });
  });

  test("Gitea's own headers and its synchronized action; its comment on a pull request", () => {
    expect(readReviewDelivery({ 'x-gitea-event': 'pull_request', 'x-github-event': 'pull_request' }, githubPullRequest(pr, 'synchronized'))).toMatchObject({ kind: 'pull_request', forge: 'gitea' });
    const comment = { action: 'created', is_pull: true, issue: { number: 3 }, comment: { id: 1, body: '/service plan', user: { id: 2, login: 'g' } }, repository: { full_name: 'acme/infra' } };
    expect(readReviewDelivery({ 'x-gitea-event': 'issue_comment' }, comment)).toMatchObject({ kind: 'comment', forge: 'gitea', number: 3, command: 'plan' });
  });

  test("GitLab's merge request and note hooks", () => {
    const mr = { object_kind: 'merge_request', project: { path_with_namespace: 'acme/infra' }, object_attributes: { iid: 4, action: 'update', last_commit: { id: 'b'.repeat(40) } } };
    expect(readReviewDelivery({ 'x-gitlab-event': 'Merge Request Hook' }, mr)).toEqual({ kind: 'pull_request', forge: 'gitlab', repository: 'acme/infra', number: 4, headSha: 'b'.repeat(40) });
    const note = { object_kind: 'note', project: { path_with_namespace: 'acme/infra' }, user: { id: 7, username: 'ann' }, object_attributes: { id: 70, note: '/service apply', noteable_type: 'MergeRequest' }, merge_request: { iid: 4 } };
    expect(readReviewDelivery({ 'x-gitlab-event': 'Note Hook' }, note)).toMatchObject({ kind: 'comment', forge: 'gitlab', number: 4, command: 'apply', comment: { id: '70', authorId: '7', authorLogin: 'ann' } });
    expect(readReviewDelivery({ 'x-gitlab-event': 'Merge Request Hook' }, { ...mr, object_attributes: { iid: 4, action: 'update' } })).toEqual({ kind: 'unreadable', missing: 'object_attributes.last_commit.id' });
  });

  test('only a first line that is exactly the command counts', () => {
    expect(commentCommand('/service plan')).toBe('plan');
    expect(commentCommand('/service applyx')).toBeUndefined();
    expect(commentCommand('please /service apply')).toBeUndefined();
  });
});

test("each forge's API base and write paths", () => {
  expect(defaultApiUrl('github', 'https://github.com')).toBe('https://api.github.com');
  expect(defaultApiUrl('github', 'https://ghe.example.com/')).toBe('https://ghe.example.com/api/v3');
  expect(defaultApiUrl('gitlab', 'https://gitlab.com')).toBe('https://gitlab.com/api/v4');
  expect(statusCall('gitlab', 'acme/infra', 'abc1234', 'failure', 'x')).toEqual({ method: 'POST', path: '/projects/acme%2Finfra/statuses/abc1234', body: { state: 'failed', name: 'cairn/plan', description: 'x' } });
  expect(commentCall('gitea', 'acme/infra', 3, 'hi').path).toBe('/repos/acme/infra/issues/3/comments');
});
