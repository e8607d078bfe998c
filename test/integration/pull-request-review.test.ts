import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { findIacBinary, OPENTOFU } from '../../embedded/iac-binaries';
import { grant, person, type Person } from '../support/access';
import { forgeHeaders, githubPullRequest, githubPullRequestComment, type PullRequestFacts } from '../support/forge-deliveries';
import { startForgePeer, type ForgePeer, type ForgeUser } from '../support/forge-peer';
import type { ApiClient } from '../support/http';
import { reservePort } from '../support/oidc';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';
import { git } from '../support/git';
import { FIRST_BUILD_TIMEOUT_MS } from '../support/timeouts';

/**
 * Pull request review triggers (docs/api.md, Pull request review) against a local forge peer
 * implementing GitHub's documented webhooks (pull_request and issue_comment, signed with
 * X-Hub-Signature-256), its OAuth for forge links and its REST commit status and comment APIs,
 * which records what Cairn posts. Plans and applies run the real OpenTofu binary on terraform_data.
 */

const CLIENT = { id: 'cairn-review-test', secret: `forge-secret-${randomBytes(12).toString('hex')}` };
let peer: ForgePeer;
let t: TestServer;
let anonymous: ApiClient;
let gitRoot: string;

beforeAll(async () => {
  await findIacBinary(OPENTOFU, (line) => process.stderr.write(`${line}\n`));
  const port = await reservePort();
  const callback = `http://127.0.0.1:${port}/auth/forge/callback`;
  peer = await startForgePeer({ ...CLIENT, redirectUri: callback });
  gitRoot = tempDir('cairn-review-git');
  // The run account reads the repository in its sandbox.
  chmodSync(gitRoot, 0o755);
  t = await startTestServer({
    CAIRN_PROJECT_LOCAL_ROOTS: gitRoot,
    CAIRN_LISTEN: `127.0.0.1:${port}`,
    SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    CAIRN_FORGE_REDIRECT_URL: callback,
    CAIRN_FORGE_GITHUB_URL: peer.url,
    CAIRN_FORGE_GITHUB_CLIENT_ID: CLIENT.id,
    CAIRN_FORGE_GITHUB_CLIENT_SECRET: CLIENT.secret,
  });
  anonymous = t.as(null);
}, FIRST_BUILD_TIMEOUT_MS);
afterAll(async () => {
  await t?.stop();
  await peer?.stop();
});

/** Links `who`'s Cairn account to `user` at the peer by the real OAuth flow. */
async function link(who: Person, user: ForgeUser): Promise<void> {
  peer.signIn(user);
  const started = await t.as(who.token).post('/v1/me/forge-links', { forge: 'github' });
  expect(started.status).toBe(201);
  const cookie = (started.headers.get('set-cookie') ?? '').split(';')[0];
  const atForge = await fetch(started.body.authorize_url, { redirect: 'manual' });
  const back = await fetch(atForge.headers.get('location')!, { headers: { cookie }, redirect: 'manual' });
  expect(back.status).toBeLessThan(400);
}

function deliver(hookPath: string, secret: string, event: string, payload: unknown) {
  const raw = JSON.stringify(payload);
  return anonymous.request('POST', hookPath, { rawBody: raw, headers: forgeHeaders('github', raw, secret, { event }) });
}

const config = 'resource "terraform_data" "db" {\n  input = "database"\n}\nresource "terraform_data" "web" {\n  input = "web"\n}\n';
const commentsOn = (pr: PullRequestFacts) => peer.posts.filter((p) => p.kind === 'comment' && p.repository === pr.repository && p.subject === String(pr.number));

test('a pull request is planned and reported; an apply by comment as a linked operator applies exactly the saved plan; one without rights gets one reply', async () => {
  const tpl = await t.api.post('/v1/templates', { name: `review-${randomBytes(3).toString('hex')}`, tool: 'opentofu', command: config });
  expect(tpl.status).toBe(201);
  const created = await t.api.post('/v1/triggers', { name: 'plan pull requests', template_id: tpl.body.id, review: { forge: 'github', token: peer.apiToken } });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ kind: 'review', review: { forge: 'github', api_url: null, token_set: true } });
  expect(JSON.stringify((await t.api.get(`/v1/triggers/${created.body.id}`)).body)).not.toContain(peer.apiToken);
  const { hook_path: hook, secret } = created.body;
  const pr: PullRequestFacts = { repository: 'octo/infra', number: 7, headSha: createHash('sha1').update(randomBytes(8)).digest('hex') };

  // Opening the pull request plans its head and reports a status and a comment.
  const opened = await deliver(hook, secret, 'pull_request', githubPullRequest(pr));
  expect(opened.status).toBe(201);
  const plan = await waitForRunEnd(t.api, opened.body.run_id, 120_000);
  expect(plan.status).toBe('succeeded');
  const planned = await peer.waitForPost((p) => p.kind === 'status' && p.subject === pr.headSha && p.body.state === 'success');
  expect(planned.body).toMatchObject({ context: 'cairn/plan', description: 'plan: 2 to create, 0 to update, 0 to replace, 0 to delete' });
  expect(planned.authorization).toBe(`Bearer ${peer.apiToken}`);
  const planComment = await peer.waitForPost((p) => p.kind === 'comment' && p.subject === '7');
  const planView = (await t.api.get(`/v1/runs/${plan.id}`)).body;
  expect(planView.plan).toMatchObject({ verdict: 'dry_run', kept: true });
  expect(planComment.body.body).toContain(planView.plan.digest);
  expect(planComment.body.body).toContain('/service apply');
  await waitFor(async () => (await t.api.get(`/v1/runs/${plan.id}`)).body.pull_request_report?.comment_posted === true);
  expect((await t.api.get(`/v1/runs/${plan.id}`)).body.pull_request_report).toMatchObject({
    forge: 'github', repository: 'octo/infra', number: 7, head_sha: pr.headSha, purpose: 'plan', phase: 'planned', state: 'success', failure: null,
  });

  // A linked operator with no right to the template: one reply, never quoting the comment, nothing applied.
  const outsider = await person(t.api, 'operator');
  await link(outsider, { id: 4101, login: 'outsider' });
  const before = commentsOn(pr).length;
  const marker = `do-not-echo-${randomBytes(4).toString('hex')}`;
  const refused = await deliver(hook, secret, 'issue_comment', githubPullRequestComment(pr, { id: 9001, body: `/service apply\n${marker}`, user: { id: 4101, login: 'outsider' } }));
  expect(refused.status).toBe(200);
  expect(refused.body.refused).toBe(true);
  const reply = await peer.waitForPost((p) => p.kind === 'comment' && p.subject === '7' && p.body.body.includes('did not apply'));
  expect(reply.body.body).toContain('Nothing was applied');
  expect(JSON.stringify(peer.posts)).not.toContain(marker);
  // An unlinked commenter is refused alike.
  const stranger = await deliver(hook, secret, 'issue_comment', githubPullRequestComment(pr, { id: 9002, body: '/service apply', user: { id: 4999, login: 'stranger' } }));
  expect(stranger.body.reason).toContain('is not linked to a Cairn account');
  await peer.waitForPost((p) => p.kind === 'comment' && p.body.body.includes('stranger'));
  expect(commentsOn(pr).length).toBe(before + 2);

  // `/service plan` plans the head again; the apply takes the latest plan.
  const replanned = await deliver(hook, secret, 'issue_comment', githubPullRequestComment(pr, { id: 9010, body: '/service plan', user: { id: 4999, login: 'stranger' } }));
  expect(replanned.status).toBe(201);
  expect(replanned.body.run_id).not.toBe(plan.id);
  expect((await waitForRunEnd(t.api, replanned.body.run_id, 120_000)).status).toBe('succeeded');
  const latestPlan = (await t.api.get(`/v1/runs/${replanned.body.run_id}`)).body.plan;
  await peer.waitForPost((p) => p.kind === 'comment' && p.body.body.includes(replanned.body.run_id));

  // A linked operator with use on the template applies by comment, through a forge outage.
  const operator = await person(t.api, 'operator');
  await grant(t.api, tpl.body.id, 'use', { user_id: operator.id });
  await link(operator, { id: 4102, login: 'maintainer' });
  peer.failNext(3);
  const body = '/service apply';
  const applied = await deliver(hook, secret, 'issue_comment', githubPullRequestComment(pr, { id: 9003, body, user: { id: 4102, login: 'maintainer' } }));
  expect(applied.status).toBe(201);
  expect(applied.body.applied_by).toBe(operator.username);
  // The failing forge shows on the report while it is retried.
  await waitFor(async () => ((await t.api.get(`/v1/runs/${applied.body.run_id}`)).body.pull_request_report?.failure?.attempts ?? 0) >= 1);
  const failing = (await t.api.get(`/v1/runs/${applied.body.run_id}`)).body.pull_request_report.failure;
  expect(failing.error).toContain('status 502');
  const done = await waitForRunEnd(t.api, applied.body.run_id, 120_000);
  expect(done.status).toBe('succeeded');
  const log = (await t.api.get(`/v1/runs/${done.id}/logs`)).text;
  expect(log).toContain(`applying the saved plan ${latestPlan.digest}`);
  expect(log).toContain('Apply complete! Resources: 2 added, 0 changed, 0 destroyed.');
  const decisions = (await t.api.get(`/v1/runs/${done.id}/decisions`)).body;
  const record = (decisions.records ?? decisions.decisions ?? decisions)[0];
  expect(record).toMatchObject({
    kind: 'approve',
    actor: operator.username,
    comment: {
      forge: 'github', repository: 'octo/infra', pull_request: 7, comment_id: '9003', author: { id: '4102', login: 'maintainer' },
      body_sha256: `sha256:${createHash('sha256').update(body).digest('hex')}`, plan_digest: latestPlan.digest,
    },
  });
  await peer.waitForPost((p) => p.kind === 'comment' && p.body.body.includes('applied the saved plan'));
  await waitFor(async () => (await t.api.get(`/v1/runs/${done.id}`)).body.pull_request_report?.comment_posted === true);
  expect((await t.api.get(`/v1/runs/${done.id}`)).body.pull_request_report).toMatchObject({ purpose: 'apply', phase: 'applied', state: 'success', failure: null });
}, 240_000);

test('a plan refused for its survey is 409 naming the questions, on the trigger and as a comment and error status on the pull request', async () => {
  const tpl = await t.api.post('/v1/templates', {
    name: `review-survey-${randomBytes(3).toString('hex')}`, tool: 'opentofu', command: config,
    survey: [{ var: 'region', type: 'text', required: true }],
  });
  expect(tpl.status).toBe(201);
  const created = await t.api.post('/v1/triggers', { name: 'surveyed', template_id: tpl.body.id, review: { forge: 'github', api_url: `${peer.url}/api/v3`, token: peer.apiToken } });
  const pr: PullRequestFacts = { repository: 'octo/surveyed', number: 8, headSha: createHash('sha1').update(randomBytes(8)).digest('hex') };
  const answer = await deliver(created.body.hook_path, created.body.secret, 'pull_request', githubPullRequest(pr));
  expect(answer.status).toBe(409);
  expect(answer.body.error).toContain('region');
  expect((await t.api.get(`/v1/triggers/${created.body.id}`)).body.last_error).toContain('region');
  const status = await peer.waitForPost((p) => p.kind === 'status' && p.subject === pr.headSha);
  expect(status.body.state).toBe('error');
  const comment = await peer.waitForPost((p) => p.kind === 'comment' && p.repository === 'octo/surveyed');
  expect(comment.body.body).toContain('survey asks region');
});

test("a project-backed template plans the pull request's head commit, not the tracked branch's", async () => {
  const bare = path.join(gitRoot, 'infra.git');
  const work = path.join(gitRoot, 'infra');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', bare]);
  execFileSync('git', ['init', '-q', '-b', 'main', work]);
  git(work, 'remote', 'add', 'origin', bare);
  writeFileSync(path.join(work, 'main.tf'), 'resource "terraform_data" "db" {\n  input = "database"\n}\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'one resource');
  git(work, 'push', '-q', 'origin', 'HEAD:main');
  // The pull request's branch adds two resources; the project tracks main.
  git(work, 'checkout', '-q', '-b', 'more');
  writeFileSync(path.join(work, 'main.tf'), `${config}resource "terraform_data" "cache" {\n  input = "cache"\n}\n`);
  git(work, 'commit', '-q', '-am', 'two more');
  git(work, 'push', '-q', 'origin', 'more');
  const head = git(work, 'rev-parse', 'HEAD');

  const project = await t.api.post('/v1/projects', { name: `infra-${randomBytes(3).toString('hex')}`, url: bare });
  expect(project.status).toBe(201);
  await waitFor(async () => (await t.api.get(`/v1/projects/${project.body.id}`)).body.status === 'successful');
  const tpl = await t.api.post('/v1/templates', { name: `review-project-${randomBytes(3).toString('hex')}`, tool: 'opentofu', command: '.', project_id: project.body.id });
  expect(tpl.status).toBe(201);
  const created = await t.api.post('/v1/triggers', { name: 'plan project pull requests', template_id: tpl.body.id, review: { forge: 'github', token: peer.apiToken } });
  const pr: PullRequestFacts = { repository: 'octo/project', number: 11, headSha: head };
  const opened = await deliver(created.body.hook_path, created.body.secret, 'pull_request', githubPullRequest(pr));
  expect(opened.status).toBe(201);
  const plan = await waitForRunEnd(t.api, opened.body.run_id, 120_000);
  expect(plan.status).toBe('succeeded');
  expect(plan.project).toMatchObject({ id: project.body.id, commit: head });
  const status = await peer.waitForPost((p) => p.kind === 'status' && p.subject === head && p.body.state === 'success');
  expect(status.body.description).toBe('plan: 3 to create, 0 to update, 0 to replace, 0 to delete');

  // A head that is no git object name never reaches git: the plan is refused, naming it.
  const forged = await deliver(created.body.hook_path, created.body.secret, 'pull_request', githubPullRequest({ ...pr, number: 12, headSha: '--upload-pack=touch /tmp/x' }));
  expect(forged.status).toBe(409);
  expect(forged.body.error).toContain('is not a git commit id');
}, 240_000);

async function waitFor(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}
