import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { connectDatabase } from '../../store/db';
import type { ApiClient } from '../support/http';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';
import { git } from '../support/git';

/**
 * Git projects end to end (spec part A 4.5): a bare repository made here, under a directory of
 * --project-local-roots, fetched by git in the sandbox, browsed from git's objects without
 * escaping the tree, run from by a template whose runs record the commit, and refused deletion
 * while a template uses it.
 */

let t: TestServer;
let viewer: ApiClient;
let viewerId: string;
let bare: string;
let work: string;

function commitAndPush(message: string): string {
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', message);
  git(work, 'push', '-q', 'origin', 'HEAD:main');
  return git(work, 'rev-parse', 'HEAD');
}

async function waitForProject(id: string, predicate: (p: any) => boolean, timeoutMs = 20_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await t.api.get(`/v1/projects/${id}`);
    if (predicate(body)) return body;
    if (Date.now() > deadline) throw new Error(`project ${id} did not settle: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const settled = (p: any) => !p.update_pending && (p.status === 'successful' || p.status === 'failed');

let root: string;

beforeAll(async () => {
  root = tempDir('cairn-git');
  // The run account reads the repositories in its sandbox.
  chmodSync(root, 0o755);
  // Sweeps every 250 ms rather than every 2 s, for the update the sweeper takes over.
  t = await startTestServer({ CAIRN_PROJECT_LOCAL_ROOTS: root }, { sweepIntervalMs: 250 });
  bare = path.join(root, 'repo.git');
  work = path.join(root, 'work');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', bare]);
  mkdirSync(work);
  git(work, 'init', '-q', '-b', 'main');
  git(work, 'remote', 'add', 'origin', bare);
  writeFileSync(path.join(work, 'hello.txt'), 'hello from the first commit\n');
  mkdirSync(path.join(work, 'sub'));
  writeFileSync(path.join(work, 'sub', 'a.txt'), 'a\n');
  symlinkSync('/etc/passwd', path.join(work, 'link-out'));
  symlinkSync('../../../../../../../../etc', path.join(work, 'dir-out'));
  symlinkSync('hello.txt', path.join(work, 'link-in'));
  writeFileSync(
    path.join(work, 'site.yml'),
    '- hosts: localhost\n  gather_facts: false\n  tasks:\n    - debug:\n        msg: "{{ lookup(\'file\', \'hello.txt\') }} via the playbook"\n',
  );
  commitAndPush('first');

  expect((await t.api.post('/v1/users', { username: 'vic', role: 'viewer' })).status).toBe(201);
  const token = await t.api.post('/v1/tokens', { name: 'v', username: 'vic' });
  viewer = t.as(token.body.token);
  viewerId = token.body.account_id ?? (await viewer.get('/v1/auth/me')).body.id;
});
afterAll(async () => {
  await t?.stop();
});

test('a repository address that could run a command or be read as an option is refused, naming url', async () => {
  for (const url of ['ext::sh -c touch% /tmp/pwned', '--upload-pack=touch /tmp/pwned', '-oProxyCommand=x', 'http://example.com/r.git', 'relative/path', 'fd::3']) {
    const res = await t.api.post('/v1/projects', { name: `bad ${url}`, url });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe('url');
  }
  expect((await t.api.post('/v1/projects', { name: 'cred', url: bare, credential_id: 'cred_1' })).body.field).toBe('credential_id');
});

test('a project clones, records its commit, is browsed within its checkout, runs in a copy, updates, and is kept while used', async () => {
  const first = git(work, 'rev-parse', 'HEAD');
  const created = await t.api.post('/v1/projects', { name: 'site', url: bare });
  expect(created.status).toBe(201);
  expect(created.headers.get('location')).toBe(`/v1/projects/${created.body.id}`);
  const id = created.body.id;
  const project = await waitForProject(id, settled);
  expect(project).toMatchObject({ status: 'successful', commit: first, last_error: null, url: bare, branch: null });

  // The tree, without .git; symlinks listed, not followed.
  const files = await t.api.get(`/v1/projects/${id}/files`);
  expect(files.status).toBe(200);
  expect(files.body.commit).toBe(first);
  const byPath = Object.fromEntries(files.body.files.map((f: any) => [f.path, f.type]));
  expect(byPath).toMatchObject({ 'hello.txt': 'file', sub: 'dir', 'sub/a.txt': 'file', 'link-out': 'symlink', 'link-in': 'symlink' });
  expect(Object.keys(byPath).some((p) => p.startsWith('.git'))).toBe(false);
  expect((await t.api.get(`/v1/projects/${id}/files?path=sub`)).body.files).toEqual([{ path: 'sub/a.txt', type: 'file', size: 2 }]);

  const file = await t.api.get(`/v1/projects/${id}/file?path=hello.txt`);
  expect(file.status).toBe(200);
  expect(file.body).toMatchObject({ path: 'hello.txt', content: 'hello from the first commit\n', commit: first });
  expect((await t.api.get(`/v1/projects/${id}/file?path=link-in`)).body.content).toBe('hello from the first commit\n');

  // No path leaves the checkout: `..`, absolute paths, symlinks pointing out, the .git directory.
  for (const escape of ['../../../../etc/passwd', 'sub/../../x', '/etc/passwd', 'link-out', 'dir-out/passwd', '.git/config', '.git']) {
    const res = await t.api.get(`/v1/projects/${id}/file?path=${encodeURIComponent(escape)}`);
    expect([escape, res.status, res.body.field]).toEqual([escape, 400, 'path']);
    expect(res.text).not.toContain('root:');
  }
  expect((await t.api.get(`/v1/projects/${id}/files?path=dir-out`)).status).toBe(400);
  expect((await t.api.get(`/v1/projects/${id}/file?path=hello.txt%00`)).status).toBe(400);
  expect((await t.api.get(`/v1/projects/${id}/file?path=missing.txt`)).status).toBe(404);
  expect((await t.api.get(`/v1/projects/${id}/file?path=sub`)).status).toBe(400);

  // A template naming the project: its runs work in a copy of the checkout and record the commit.
  const template = await t.api.post('/v1/templates', { name: 'from git', tool: 'bash', command: 'cat hello.txt; echo x > hello.txt; ls sub', project_id: id });
  expect(template.status).toBe(201);
  expect(template.body.project_id).toBe(id);
  const launched = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  expect(launched.status).toBe(201);
  expect(launched.body.project).toEqual({ id, commit: first });
  const ran = await waitForRunEnd(t.api, launched.body.id);
  expect(ran.status).toBe('succeeded');
  expect(ran.project).toEqual({ id, commit: first });
  const log = await t.api.get(`/v1/runs/${launched.body.id}/logs`);
  expect(log.text).toContain('hello from the first commit');
  expect(log.text).toContain('a.txt');
  // The run wrote to its copy, never the checkout.
  expect((await t.api.get(`/v1/projects/${id}/file?path=hello.txt`)).body.content).toBe('hello from the first commit\n');

  // A new commit: a PUT fetches again, and the next run records the new commit.
  writeFileSync(path.join(work, 'hello.txt'), 'hello from the second commit\n');
  const second = commitAndPush('second');
  const put = await t.api.request('PUT', `/v1/projects/${id}`, { body: { ...project } });
  expect(put.status).toBe(200);
  const updated = await waitForProject(id, (p) => settled(p) && p.commit === second);
  expect(updated.status).toBe('successful');
  expect((await t.api.get(`/v1/projects/${id}/file?path=hello.txt`)).body.content).toBe('hello from the second commit\n');
  const again = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  expect((await waitForRunEnd(t.api, again.body.id)).project).toEqual({ id, commit: second });
  expect((await t.api.get(`/v1/runs/${again.body.id}/logs`)).text).toContain('hello from the second commit');
  // A rerun of the first run runs its own commit again.
  const rerun = await t.api.post(`/v1/runs/${launched.body.id}/rerun`, {});
  expect(rerun.status).toBe(201);
  expect((await waitForRunEnd(t.api, rerun.body.id)).project).toEqual({ id, commit: first });
  expect((await t.api.get(`/v1/runs/${rerun.body.id}/logs`)).text).toContain('hello from the first commit');

  // Kept while a template uses it.
  const refused = await t.api.request('DELETE', `/v1/projects/${id}`);
  expect(refused.status).toBe(409);
  expect(refused.body.templates).toEqual([template.body.id]);
  expect(refused.body.error).toContain(template.body.id);
  expect((await t.api.request('DELETE', `/v1/templates/${template.body.id}`)).status).toBe(204);
  expect((await t.api.request('DELETE', `/v1/projects/${id}`)).status).toBe(204);
  expect((await t.api.get(`/v1/projects/${id}`)).status).toBe(404);
  // Its repository leaves the project cache of the worker its last update ran on.
  const deadline = Date.now() + 20_000;
  while (existsSync(path.join(t.config.dataDir, 'projects', id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(existsSync(path.join(t.config.dataDir, 'projects', id))).toBe(false);

  // The chain recorded the create, each update's outcome and the delete.
  const audit = await t.api.get('/v1/audit?limit=1000');
  expect(audit.status).toBe(200);
  const kinds = audit.body.entries.filter((e: any) => e.body?.project_id === id).map((e: any) => e.body.kind);
  expect(kinds).toEqual(expect.arrayContaining(['project.created', 'project.update', 'project.updated', 'project.deleted']));
});

test('an update that fails records the error; a viewer reads only what it is granted', async () => {
  // A repository with no commit yet: its HEAD cannot be fetched.
  const empty = path.join(root, 'empty.git');
  execFileSync('git', ['init', '-q', '--bare', empty]);
  const created = await t.api.post('/v1/projects', { name: 'gone', url: empty });
  expect(created.status).toBe(201);
  const failed = await waitForProject(created.body.id, settled);
  expect(failed.status).toBe('failed');
  expect(failed.commit).toBeNull();
  expect(failed.last_error).toMatch(/^git fetch exited with code \d+: .*HEAD/);
  expect(failed.last_error).not.toContain(t.config.dataDir);
  expect((await t.api.get(`/v1/projects/${created.body.id}/files`)).status).toBe(409);
  // A template may not launch from a project without a checkout: a configuration error naming it.
  const template = await t.api.post('/v1/templates', { name: 'no checkout', tool: 'bash', command: 'true', project_id: created.body.id });
  const launch = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  expect(launch.status).toBe(400);
  expect(launch.body.error).toContain(created.body.id);

  expect((await viewer.get(`/v1/projects/${created.body.id}`)).status).toBe(404);
  expect((await viewer.get('/v1/projects')).body.total).toBe(0);
  expect((await viewer.post('/v1/projects', { name: 'v', url: bare })).status).toBe(403);
  const grant = await t.api.post('/v1/grants', { object: created.body.id, permission: 'read', user_id: viewerId });
  expect(grant.status).toBe(201);
  expect((await viewer.get(`/v1/projects/${created.body.id}`)).status).toBe(200);
  expect((await viewer.get('/v1/projects')).body.total).toBe(1);
  expect((await viewer.request('DELETE', `/v1/projects/${created.body.id}`)).status).toBe(403);
  // An operator without use on the project may not name it on a template.
  expect((await t.api.post('/v1/users', { username: 'oscar', role: 'operator' })).status).toBe(201);
  const operator = t.as((await t.api.post('/v1/tokens', { name: 'o', username: 'oscar' })).body.token);
  const named = await operator.post('/v1/templates', { name: 'not mine', tool: 'bash', command: 'true', project_id: created.body.id });
  expect([named.status, named.body.field]).toEqual([400, 'project_id']);
});

test('an update a stopped server left owed in the outbox is carried out by another dispatcher', async () => {
  const created = await t.api.post('/v1/projects', { name: 'owed', url: `file://${bare}` });
  expect(created.status).toBe(201);
  const done = await waitForProject(created.body.id, settled);
  expect(done.status).toBe('successful');
  writeFileSync(path.join(work, 'owed.txt'), 'owed\n');
  const next = commitAndPush('owed');
  // As a server that committed a save and died before starting its update would leave it: owed,
  // with the effect past the writer's grace.
  const sql = connectDatabase(t.databaseUrl, { max: 1 });
  try {
    await sql.begin(async (tx) => {
      await tx`UPDATE projects SET update_requested_at = now() WHERE id = ${created.body.id}`;
      await tx`INSERT INTO outbox (effect, subject, due_at) VALUES ('project.update', ${created.body.id}, now())`;
    });
  } finally {
    await sql.end();
  }
  const taken = await waitForProject(created.body.id, (p) => settled(p) && p.commit === next);
  expect(taken).toMatchObject({ status: 'successful', update_pending: false, last_error: null });
});

test('a playbook from a project: the ansible tool runs a playbook of the checkout, at the recorded commit', async () => {
  const created = await t.api.post('/v1/projects', { name: 'playbooks', url: bare });
  const project = await waitForProject(created.body.id, settled);
  expect(project.status).toBe('successful');
  const template = await t.api.post('/v1/templates', { name: 'play from git', tool: 'ansible', playbook: 'site.yml', project_id: project.id });
  expect(template.status).toBe(201);
  const launched = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  expect(launched.status).toBe(201);
  const ran = await waitForRunEnd(t.api, launched.body.id, 60_000);
  const log = (await t.api.get(`/v1/runs/${launched.body.id}/logs`)).text;
  expect([ran.status, log]).toEqual(['succeeded', expect.stringMatching(/hello from the \w+ commit via the playbook/)]);
  expect(ran.project).toEqual({ id: project.id, commit: project.commit });
});

test("a split's shards each work in a copy of the split's commit", async () => {
  const created = await t.api.post('/v1/projects', { name: 'sharded', url: bare });
  const project = await waitForProject(created.body.id, settled);
  const template = await t.api.post('/v1/templates', { name: 'split from git', tool: 'bash', command: 'cat hello.txt', shards: 2, project_id: project.id });
  expect(template.status).toBe(201);
  const launched = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
  expect(launched.body).toMatchObject({ kind: 'split', project: { id: project.id, commit: project.commit } });
  expect((await waitForRunEnd(t.api, launched.body.id)).status).toBe('succeeded');
  const shards = (await t.api.get(`/v1/runs/${launched.body.id}/shards`)).body.shards;
  expect(shards).toHaveLength(2);
  for (const shard of shards) {
    expect(shard.project).toEqual({ id: project.id, commit: project.commit });
    expect((await t.api.get(`/v1/runs/${shard.id}/logs`)).text).toMatch(/hello from the \w+ commit/);
  }
});
