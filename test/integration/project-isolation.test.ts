import { execFileSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';
import { git } from '../support/git';

/**
 * What a project's repository and address can reach (spec part A 4.5; part B 5.2, 5.3): as an
 * operator would try it. A repository's links at the names Cairn writes for a tool never make the
 * server write outside the sandbox; a path on the server is a repository only within
 * --project-local-roots and never the install's own; a remote is checked against the egress rule,
 * and every address that cannot be reached reads the same.
 */

/** A bare repository under `root` holding `files` (a string is a file's content, `{ link }` a symlink). */
function repository(root: string, name: string, files: Record<string, string | { link: string }>): string {
  const bare = path.join(root, `${name}.git`);
  const work = path.join(root, `${name}-work`);
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', bare]);
  mkdirSync(work);
  git(work, 'init', '-q', '-b', 'main');
  for (const [file, content] of Object.entries(files)) {
    if (typeof content === 'string') writeFileSync(path.join(work, file), content);
    else symlinkSync(content.link, path.join(work, file));
  }
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'tree');
  git(work, 'push', '-q', bare, 'HEAD:main');
  return bare;
}

async function settledProject(t: TestServer, id: string): Promise<any> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { body } = await t.api.get(`/v1/projects/${id}`);
    if (!body.update_pending && (body.status === 'successful' || body.status === 'failed')) return body;
    if (Date.now() > deadline) throw new Error(`project ${id} did not settle: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

let root: string;
let t: TestServer;

beforeAll(async () => {
  root = tempDir('cairn-git-attack');
  chmodSync(root, 0o755);
  t = await startTestServer({ CAIRN_PROJECT_LOCAL_ROOTS: root });
});
afterAll(async () => {
  await t?.stop();
});

test("a repository's links at the tool's file names write nothing outside the sandbox: the run fails naming the file", async () => {
  // The file an attacker aims at: a host file the server (root) could write.
  const victimDir = tempDir('cairn-victim');
  const victim = path.join(victimDir, 'cron-job');
  writeFileSync(victim, 'original\n');
  const names = ['script.sh', 'script.py', 'playbook.yml', 'extra_vars.json', 'cairn_results.py', '.cairn-ansible-results.jsonl', 'inventory.ini'];
  const bare = repository(root, 'links', Object.fromEntries(names.map((n) => [n, { link: victim }])));
  const project = await t.api.post('/v1/projects', { name: 'links', url: bare });
  expect(project.status).toBe(201);
  expect((await settledProject(t, project.body.id)).status).toBe('successful');

  for (const [tool, command, named] of [
    ['bash', 'echo "* * * * * root touch /pwned" > script.sh', 'script.sh'],
    ['python', 'print("pwned")', 'script.py'],
    ['ansible', '- hosts: localhost\n  gather_facts: false\n  tasks: []\n', 'playbook.yml'],
  ]) {
    const template = await t.api.post('/v1/templates', { name: `links ${tool}`, tool, command, project_id: project.body.id });
    expect(template.status).toBe(201);
    const launched = await t.api.post(`/v1/templates/${template.body.id}/launch`, {});
    expect(launched.status).toBe(201);
    const run = await waitForRunEnd(t.api, launched.body.id, 60_000);
    expect(run.status).toBe('failed');
    expect(run.error).toContain(`"${named}"`);
    expect(run.error).toMatch(/which Cairn writes for the run's tool; rename it in the repository \(nothing was run\)/);
  }
  // The host file is as it was, and still the server's.
  expect(readFileSync(victim, 'utf8')).toBe('original\n');
  expect(lstatSync(victim).uid).toBe(process.getuid!());
});

test('a path on the server is a repository only within --project-local-roots, and never the install\'s own files', async () => {
  const bare = repository(root, 'plain', { 'hello.txt': 'hi\n' });
  const elsewhere = tempDir('cairn-not-a-root');
  chmodSync(elsewhere, 0o755);
  const outside = repository(elsewhere, 'outside', { 'hello.txt': 'hi\n' });
  symlinkSync(outside, path.join(root, 'link-to-outside.git'));

  // No roots set: no local path at all, as a path or as file://.
  const closed = await startTestServer();
  try {
    for (const url of [bare, `file://${bare}`]) {
      const res = await closed.api.post('/v1/projects', { name: `local ${url}`, url });
      expect([res.status, res.body.field]).toEqual([400, 'url']);
      expect(res.body.error).toMatch(/--project-local-roots \(none is set\)/);
    }
  } finally {
    await closed.stop();
  }

  // Outside the roots, directly or through a link inside them.
  for (const url of [outside, path.join(root, 'link-to-outside.git'), '/etc', `${root}/../${path.basename(elsewhere)}/outside.git`]) {
    const res = await t.api.post('/v1/projects', { name: `outside ${url}`, url });
    expect([url, res.status, res.body.field]).toEqual([url, 400, 'url']);
  }

  // An admin who opens the whole disk still cannot name another project's repository or the data dir.
  const open = await startTestServer({ CAIRN_PROJECT_LOCAL_ROOTS: '/' });
  try {
    const first = await open.api.post('/v1/projects', { name: 'first', url: bare });
    expect((await settledProject(open, first.body.id)).status).toBe('successful');
    const projectsDir = path.join(open.config.dataDir, 'projects');
    for (const url of [path.join(projectsDir, first.body.id, '.git'), `file://${projectsDir}/${first.body.id}/.git`, open.config.dataDir]) {
      const res = await open.api.post('/v1/projects', { name: `own ${url}`, url });
      expect([url, res.status, res.body.field]).toEqual([url, 400, 'url']);
      expect(res.body.error).toMatch(/--project-local-roots/);
    }
  } finally {
    await open.stop();
  }
});

test('a remote on a private or loopback address is refused at create, and every unreachable address reads the same', async () => {
  // An answering port (a plain HTTP server) and a closed one: an oracle would tell them apart.
  const answering = http.createServer((_req, res) => res.end('not git'));
  await new Promise<void>((resolve) => answering.listen(0, '127.0.0.1', resolve));
  const openPort = (answering.address() as net.AddressInfo).port;
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const closedPort = (probe.address() as net.AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  try {
    const refusals = new Set<string>();
    for (const url of [`https://127.0.0.1:${openPort}/r.git`, `https://127.0.0.1:${closedPort}/r.git`, `ssh://git@127.0.0.1:${openPort}/r.git`, 'git@10.0.0.1:r.git', 'https://169.254.169.254/latest', 'https://no-such-host.invalid/r.git']) {
      const res = await t.api.post('/v1/projects', { name: `remote ${url}`, url });
      expect([url, res.status, res.body.field]).toEqual([url, 400, 'url']);
      refusals.add(res.body.error);
    }
    expect([...refusals]).toEqual(['url: the repository could not be reached: its address is refused by the egress rule, or it did not answer as a git server']);

    // Allowed by the egress rule, a fetch that cannot reach a git server fails the same way whatever answered.
    const allowed = await startTestServer({ SERVICE_EGRESS_ALLOW: '127.0.0.0/8', CAIRN_RUN_NETWORK: 'host' });
    try {
      const errors = new Set<string>();
      for (const port of [openPort, closedPort]) {
        const created = await allowed.api.post('/v1/projects', { name: `port ${port}`, url: `https://127.0.0.1:${port}/r.git` });
        expect(created.status).toBe(201);
        const failed = await settledProject(allowed, created.body.id);
        expect(failed.status).toBe('failed');
        errors.add(failed.last_error);
      }
      expect([...errors]).toEqual(['the repository could not be reached: its address is refused by the egress rule, or it did not answer as a git server']);
    } finally {
      await allowed.stop();
    }
  } finally {
    answering.close();
  }
});
