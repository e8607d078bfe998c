import { createHmac, randomUUID } from 'node:crypto';

/**
 * Push deliveries as the major forges send them: the payload's shape (trimmed to the fields a
 * push always carries and a few around them) and the headers, signed the way each forge signs.
 * The HMACs are computed here with node:crypto, independently of Cairn's own check.
 */

export type ForgeName = 'github' | 'gitlab' | 'gitea' | 'bitbucket';

export interface PushFacts {
  ref: string;
  commit: string;
  repository: string;
  pusher: string;
}

export const SAMPLE_PUSH: PushFacts = {
  ref: 'refs/heads/main',
  commit: '6113728f27ae82c7b1a177c8d03f9e96e0adf246',
  repository: 'acme/web',
  pusher: 'octocat',
};

/** The extra vars a GitHub push of SAMPLE_PUSH gives its run, as docs/api.md lists them. */
export const SAMPLE_PUSH_VARS = {
  git_forge: 'github',
  git_ref: 'refs/heads/main',
  git_branch: 'main',
  git_tag: '',
  git_commit: SAMPLE_PUSH.commit,
  git_repository: 'acme/web',
  git_pusher: 'octocat',
};

export function githubPush(facts: PushFacts = SAMPLE_PUSH, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ref: facts.ref,
    before: '0000000000000000000000000000000000000001',
    after: facts.commit,
    created: false,
    deleted: false,
    forced: false,
    compare: `https://github.com/${facts.repository}/compare/abc...def`,
    commits: [{ id: facts.commit, message: 'Update README.md', author: { name: 'Mona', email: 'mona@example.com', username: facts.pusher } }],
    head_commit: { id: facts.commit, message: 'Update README.md' },
    repository: { id: 1296269, name: facts.repository.split('/')[1], full_name: facts.repository, private: false, clone_url: `https://github.com/${facts.repository}.git` },
    pusher: { name: facts.pusher, email: `${facts.pusher}@example.com` },
    sender: { login: facts.pusher, id: 1 },
    ...extra,
  };
}

export function gitlabPush(facts: PushFacts = SAMPLE_PUSH, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const tag = facts.ref.startsWith('refs/tags/');
  return {
    object_kind: tag ? 'tag_push' : 'push',
    event_name: tag ? 'tag_push' : 'push',
    before: '95790bf891e76fee5e1747ab589903a6a1f80f22',
    after: facts.commit,
    ref: facts.ref,
    checkout_sha: facts.commit,
    user_id: 4,
    user_name: 'John Smith',
    user_username: facts.pusher,
    user_email: '',
    project_id: 15,
    project: { id: 15, name: facts.repository.split('/')[1], path_with_namespace: facts.repository, default_branch: 'main' },
    commits: [{ id: facts.commit, message: 'Update Catalan translation', author: { name: 'Jordi', email: 'jordi@example.com' } }],
    total_commits_count: 1,
    repository: { name: facts.repository.split('/')[1], homepage: `https://gitlab.example.com/${facts.repository}` },
    ...extra,
  };
}

export function giteaPush(facts: PushFacts = SAMPLE_PUSH, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ref: facts.ref,
    before: '28e1879d029cb852e4844d9c718537df08844e03',
    after: facts.commit,
    compare_url: `http://localhost:3000/${facts.repository}/compare/28e1879...bffeb74`,
    commits: [{ id: facts.commit, message: 'Webhooks Yay!', author: { name: 'Gitea', email: 'someone@gitea.io', username: facts.pusher } }],
    repository: { id: 140, owner: { id: 1, login: facts.repository.split('/')[0] }, name: facts.repository.split('/')[1], full_name: facts.repository },
    pusher: { id: 1, login: facts.pusher, full_name: 'Gitea', email: 'someone@gitea.io', username: facts.pusher },
    sender: { id: 1, login: facts.pusher, username: facts.pusher },
    ...extra,
  };
}

/**
 * A Bitbucket Cloud `repo:push` payload (its documented shape: `actor`, `repository`, and
 * `push.changes[]`, each with the ref's `new` and `old` state; `new` is null when the push
 * deleted the ref).
 */
export function bitbucketPush(facts: PushFacts = SAMPLE_PUSH, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const tag = facts.ref.startsWith('refs/tags/');
  const name = facts.ref.replace(/^refs\/(heads|tags)\//, '');
  const state = (hash: string) => ({
    type: tag ? 'tag' : 'branch',
    name,
    target: { type: 'commit', hash, date: '2025-03-01T09:00:00+00:00', message: 'Update README.md\n', author: { type: 'author', raw: 'Mona <mona@example.com>' } },
    links: { html: { href: `https://bitbucket.org/${facts.repository}/branch/${name}` } },
  });
  return {
    push: {
      changes: [
        {
          new: state(facts.commit),
          old: state('e0d1b2a3c4f5e6d7c8b9a0f1e2d3c4b5a6978899'),
          created: false,
          forced: false,
          closed: false,
          truncated: false,
          commits: [{ type: 'commit', hash: facts.commit, message: 'Update README.md\n' }],
        },
      ],
    },
    repository: {
      type: 'repository',
      full_name: facts.repository,
      name: facts.repository.split('/')[1],
      uuid: '{3b6f2c1e-8f2d-4d55-9f8e-0c1d2e3f4a5b}',
      is_private: true,
      scm: 'git',
    },
    actor: { type: 'user', display_name: 'Mona Lisa', nickname: facts.pusher, account_id: '557058:0f1e2d3c', uuid: '{d301aafa-d676-4ee0-88be-962be7417567}' },
    ...extra,
  };
}

export const hmacHex = (body: string | Buffer, secret: string) => createHmac('sha256', secret).update(body).digest('hex');

export interface SignOptions {
  /** A delivery id; a fresh one when absent. */
  delivery?: string;
  /** Leave the signature (or token) off. */
  unsigned?: boolean;
  /** The event name the forge would send; its push event when absent. */
  event?: string;
}

/** The headers each forge sends with a delivery of `body`, signed with `secret` as that forge signs. */
export function forgeHeaders(forge: ForgeName, body: string | Buffer, secret: string, options: SignOptions = {}): Record<string, string> {
  const delivery = options.delivery ?? randomUUID();
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  switch (forge) {
    case 'github':
      headers['x-github-event'] = options.event ?? 'push';
      headers['x-github-delivery'] = delivery;
      headers['x-github-hook-id'] = '292430182';
      headers['user-agent'] = 'GitHub-Hookshot/044aadd';
      if (!options.unsigned) {
        headers['x-hub-signature-256'] = `sha256=${hmacHex(body, secret)}`;
        headers['x-hub-signature'] = 'sha1=0000000000000000000000000000000000000000';
      }
      break;
    case 'gitlab':
      headers['x-gitlab-event'] = options.event ?? 'Push Hook';
      headers['x-gitlab-event-uuid'] = delivery;
      headers['x-gitlab-instance'] = 'https://gitlab.example.com';
      headers['user-agent'] = 'GitLab/17.0.0';
      if (!options.unsigned) headers['x-gitlab-token'] = secret;
      break;
    case 'gitea':
      // Gitea sends its own headers and GitHub's and Gogs' for compatibility.
      for (const prefix of ['gitea', 'gogs', 'github']) {
        headers[`x-${prefix}-event`] = options.event ?? 'push';
        headers[`x-${prefix}-delivery`] = delivery;
      }
      if (!options.unsigned) {
        headers['x-gitea-signature'] = hmacHex(body, secret);
        headers['x-gogs-signature'] = hmacHex(body, secret);
        headers['x-hub-signature-256'] = `sha256=${hmacHex(body, secret)}`;
      }
      break;
    case 'bitbucket':
      // Bitbucket Cloud: the event key, the hook's and the request's ids, and with a secret the
      // HMAC-SHA256 in X-Hub-Signature (GitHub's header name, with its SHA-256 value).
      headers['x-event-key'] = options.event ?? 'repo:push';
      headers['x-hook-uuid'] = '{1b2c3d4e-5f60-4718-9a2b-3c4d5e6f7a8b}';
      headers['x-request-uuid'] = delivery;
      headers['x-attempt-number'] = '1';
      headers['user-agent'] = 'Bitbucket-Webhooks/2.0';
      if (!options.unsigned) headers['x-hub-signature'] = `sha256=${hmacHex(body, secret)}`;
      break;
  }
  return headers;
}

export const PUSH_PAYLOADS: Record<ForgeName, (facts?: PushFacts, extra?: Record<string, unknown>) => Record<string, unknown>> = {
  github: githubPush,
  gitlab: gitlabPush,
  gitea: giteaPush,
  bitbucket: bitbucketPush,
};

/** A pull request as the review deliveries below describe it. */
export interface PullRequestFacts {
  repository: string;
  number: number;
  headSha: string;
}

/** GitHub's `pull_request` delivery (action opened, synchronize or reopened), trimmed to its documented core. */
export function githubPullRequest(facts: PullRequestFacts, action = 'opened'): Record<string, unknown> {
  const [owner, name] = facts.repository.split('/');
  return {
    action,
    number: facts.number,
    pull_request: {
      number: facts.number,
      state: 'open',
      title: 'Add the database',
      user: { login: 'octocat', id: 1 },
      head: { ref: 'feature', sha: facts.headSha, repo: { full_name: facts.repository } },
      base: { ref: 'main', sha: '6dcb09b5b57875f334f61aebed695e2e4193db5e', repo: { full_name: facts.repository } },
    },
    repository: { id: 1296269, name, full_name: facts.repository, owner: { login: owner } },
    sender: { login: 'octocat', id: 1 },
  };
}

/** GitHub's `issue_comment` delivery (action created) for a comment on a pull request. */
export function githubPullRequestComment(facts: PullRequestFacts, comment: { id: number; body: string; user: { id: number; login: string } }): Record<string, unknown> {
  const [owner, name] = facts.repository.split('/');
  return {
    action: 'created',
    issue: { number: facts.number, title: 'Add the database', pull_request: { url: `https://api.github.com/repos/${facts.repository}/pulls/${facts.number}` }, user: { login: 'octocat', id: 1 } },
    comment: { id: comment.id, body: comment.body, user: comment.user },
    repository: { id: 1296269, name, full_name: facts.repository, owner: { login: owner } },
    sender: comment.user,
  };
}
