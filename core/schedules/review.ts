import { forgeEvent, type DeliveryHeaders } from './webhooks';

/**
 * Pull request review triggers (spec part A 4.7; docs/api.md, Pull request review): what a review
 * trigger keeps, what the forge's pull request and comment deliveries say, and the comment commands.
 * GitHub's shapes first; Gitea and Forgejo send the same fields, GitLab its merge request and note hooks.
 */

export const REVIEW_FORGES = ['github', 'gitlab', 'gitea'] as const;
export type ReviewForge = (typeof REVIEW_FORGES)[number];

/** A review trigger's settings as stored and shown (the forge API token is kept apart, sealed). */
export interface ReviewSettings {
  forge: ReviewForge;
  /** The forge's REST API base, such as https://api.github.com; null: derived from the server's forge link setting. */
  api_url: string | null;
}

/** The commit status context Cairn reports under. */
export const STATUS_CONTEXT = 'cairn/plan';

export type ReviewEvent =
  | { kind: 'pull_request'; forge: ReviewForge; repository: string; number: number; headSha: string }
  | { kind: 'comment'; forge: ReviewForge; repository: string; number: number; command: 'plan' | 'apply'; comment: { id: string; body: string; authorId: string; authorLogin: string } }
  | { kind: 'ping' }
  | { kind: 'other'; what: string }
  | { kind: 'unreadable'; missing: string };

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
const field = (value: unknown, ...path: string[]): unknown => path.reduce<unknown>((v, k) => (isObject(v) ? v[k] : undefined), value);
const text = (value: unknown): string => (typeof value === 'string' ? value : '');
const idText = (value: unknown): string => (typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : text(value));
const count = (value: unknown): number | undefined => (typeof value === 'number' && Number.isSafeInteger(value) && value > 0 ? value : undefined);

/** The command a comment gives: its first line, trimmed, exactly `/service plan` or `/service apply`. */
export function commentCommand(body: string): 'plan' | 'apply' | undefined {
  const first = body.split(/\r?\n/, 1)[0].trim();
  return first === '/service plan' ? 'plan' : first === '/service apply' ? 'apply' : undefined;
}

const PR_ACTIONS = ['opened', 'synchronize', 'synchronized', 'reopened'];

/** Reads a delivery to a review trigger. */
export function readReviewDelivery(headers: DeliveryHeaders, body: unknown): ReviewEvent {
  const object = isObject(body) ? body : {};
  const { forge, event } = forgeEvent(headers, object);
  if (forge === 'github' && event === 'ping') return { kind: 'ping' };
  if (forge === 'bitbucket') return { kind: 'other', what: 'bitbucket deliveries' };
  const read: ReviewForge = forge ?? 'github';
  if (read === 'gitlab') return readGitlab(event, object);
  const repository = text(field(object, 'repository', 'full_name'));
  if (event === 'pull_request') {
    const action = text(object.action);
    if (!PR_ACTIONS.includes(action)) return { kind: 'other', what: `pull_request ${action || 'events without an action'}` };
    const number = count(object.number) ?? count(field(object, 'pull_request', 'number'));
    const headSha = text(field(object, 'pull_request', 'head', 'sha'));
    if (!number) return { kind: 'unreadable', missing: 'number' };
    if (!headSha) return { kind: 'unreadable', missing: 'pull_request.head.sha' };
    if (!repository) return { kind: 'unreadable', missing: 'repository.full_name' };
    return { kind: 'pull_request', forge: read, repository, number, headSha };
  }
  if (event === 'issue_comment') {
    if (text(object.action) !== 'created') return { kind: 'other', what: `issue_comment ${text(object.action) || 'events without an action'}` };
    const onPull = field(object, 'issue', 'pull_request') !== undefined && field(object, 'issue', 'pull_request') !== null || object.is_pull === true;
    if (!onPull) return { kind: 'other', what: 'comments on issues' };
    return commentEvent(read, repository, count(field(object, 'issue', 'number')), field(object, 'comment', 'id'), field(object, 'comment', 'body'), field(object, 'comment', 'user', 'id'), field(object, 'comment', 'user', 'login'));
  }
  return { kind: 'other', what: `${read} ${event} events` };
}

function readGitlab(event: string, object: Record<string, unknown>): ReviewEvent {
  const repository = text(field(object, 'project', 'path_with_namespace'));
  if (event === 'Merge Request Hook' || event === 'merge_request') {
    const action = text(field(object, 'object_attributes', 'action'));
    if (!['open', 'reopen', 'update'].includes(action)) return { kind: 'other', what: `merge request ${action || 'events without an action'}` };
    const number = count(field(object, 'object_attributes', 'iid'));
    const headSha = text(field(object, 'object_attributes', 'last_commit', 'id'));
    if (!number) return { kind: 'unreadable', missing: 'object_attributes.iid' };
    if (!headSha) return { kind: 'unreadable', missing: 'object_attributes.last_commit.id' };
    if (!repository) return { kind: 'unreadable', missing: 'project.path_with_namespace' };
    return { kind: 'pull_request', forge: 'gitlab', repository, number, headSha };
  }
  if (event === 'Note Hook' || event === 'note') {
    if (text(field(object, 'object_attributes', 'noteable_type')) !== 'MergeRequest') return { kind: 'other', what: 'notes on anything but a merge request' };
    return commentEvent('gitlab', repository, count(field(object, 'merge_request', 'iid')), field(object, 'object_attributes', 'id'), field(object, 'object_attributes', 'note'), field(object, 'user', 'id'), field(object, 'user', 'username'));
  }
  return { kind: 'other', what: `gitlab ${event} events` };
}

function commentEvent(forge: ReviewForge, repository: string, number: number | undefined, id: unknown, body: unknown, authorId: unknown, authorLogin: unknown): ReviewEvent {
  const commentBody = text(body);
  const command = commentCommand(commentBody);
  if (!command) return { kind: 'other', what: 'comments that are not /service plan or /service apply' };
  if (!number) return { kind: 'unreadable', missing: 'the pull request number' };
  if (!repository) return { kind: 'unreadable', missing: 'the repository' };
  if (!idText(id) || !idText(authorId)) return { kind: 'unreadable', missing: 'the comment id or its author' };
  return { kind: 'comment', forge, repository, number, command, comment: { id: idText(id), body: commentBody, authorId: idText(authorId), authorLogin: text(authorLogin).slice(0, 255) } };
}

/** The REST API base of a forge at a web base address, as its documentation names it. */
export function defaultApiUrl(forge: ReviewForge, baseUrl: string): string {
  const base = baseUrl.replace(/\/+$/, '');
  if (forge === 'github') return new URL(base).hostname === 'github.com' ? 'https://api.github.com' : `${base}/api/v3`;
  return forge === 'gitlab' ? `${base}/api/v4` : `${base}/api/v1`;
}

/** One forge write: a commit status or a comment, as the forge's REST API takes it. */
export interface ForgeCall {
  method: 'POST';
  path: string;
  body: Record<string, unknown>;
}

const GITLAB_STATES: Record<string, string> = { pending: 'running', success: 'success', failure: 'failed', error: 'failed' };

export function statusCall(forge: ReviewForge, repository: string, sha: string, state: 'pending' | 'success' | 'failure' | 'error', description: string): ForgeCall {
  const desc = description.slice(0, 140);
  if (forge === 'gitlab') return { method: 'POST', path: `/projects/${encodeURIComponent(repository)}/statuses/${sha}`, body: { state: GITLAB_STATES[state], name: STATUS_CONTEXT, description: desc } };
  return { method: 'POST', path: `/repos/${repository}/statuses/${sha}`, body: { state, context: STATUS_CONTEXT, description: desc } };
}

export function commentCall(forge: ReviewForge, repository: string, number: number, body: string): ForgeCall {
  if (forge === 'gitlab') return { method: 'POST', path: `/projects/${encodeURIComponent(repository)}/merge_requests/${number}/notes`, body: { body } };
  return { method: 'POST', path: `/repos/${repository}/issues/${number}/comments`, body: { body } };
}

/** The authorization header each forge's API takes a token in. */
export function forgeAuthHeader(forge: ReviewForge, token: string): Record<string, string> {
  if (forge === 'gitlab') return { 'private-token': token };
  return { authorization: forge === 'github' ? `Bearer ${token}` : `token ${token}` };
}
