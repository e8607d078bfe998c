import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createLogger, type RunningServer } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { runAccountDir } from '../../runtime/sandbox-setup';
import { createTestDatabase } from '../support/database';
import { apiClient, type ApiClient } from '../support/http';
import { expectNoSecrets, runReads } from '../support/leaks';
import { startServerInProcess, testSettings, waitForRunEnd } from '../support/server';
import { tempDir } from '../support/temp';
import { git } from '../support/git';

/**
 * A machine credential reaches the ansible tool (spec part B 5.3): a real ansible-playbook run in
 * the sandbox connects over SSH to a throwaway sshd on loopback, as the credential's user with its
 * private key. The key is passphrase-protected in one run (ssh-agent inside the sandbox) and plain
 * in the other (the 0600 key file); the become password reaches ansible as
 * `ansible_become_password` and prints masked; a vault credential decrypts a vaulted variable.
 * No secret is found in any API read, event, log, audit entry, evidence, receipt, the server log,
 * or the run's work dir afterwards.
 *
 * A run's default network (`isolated`) closes the host's loopback by design, so this install runs
 * with `--run-network host` (CAIRN_RUN_NETWORK=host) to reach the sshd on 127.0.0.1.
 */

const hex = (n: number) => randomBytes(n).toString('hex');
const SECRETS = {
  passphrase: `key-pass-${hex(8)}`,
  become: `become-pw-${hex(8)}`,
  vault: `vault-pw-${hex(8)}`,
};
const SSHD = ['/usr/sbin/sshd', '/usr/bin/sshd'].find((p) => existsSync(p));

const lines: string[] = [];
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let running: RunningServer;
let api: ApiClient;
/** Where the install's runs get their work dirs. */
let workRoot: string;
let sshd: ChildProcess | undefined;
let port = 0;
let dir: string;
let encryptedKey: string;
let plainKey: string;
let vaulted: string;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port: p } = server.address() as net.AddressInfo;
      server.close(() => resolve(p));
    });
  });
}

async function listening(p: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(p, '127.0.0.1', () => (socket.end(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`sshd did not listen on ${p}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  if (!SSHD) throw new Error('this test needs sshd (Debian package openssh-server; .ci/run installs it)');
  dir = tempDir('cairn-sshd');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'host_key')]);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', SECRETS.passphrase, '-C', 'encrypted', '-f', path.join(dir, 'client_enc')]);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'plain', '-f', path.join(dir, 'client_plain')]);
  encryptedKey = readFileSync(path.join(dir, 'client_enc'), 'utf8');
  plainKey = readFileSync(path.join(dir, 'client_plain'), 'utf8');
  writeFileSync(path.join(dir, 'authorized_keys'), readFileSync(path.join(dir, 'client_enc.pub'), 'utf8') + readFileSync(path.join(dir, 'client_plain.pub'), 'utf8'));
  port = await freePort();
  writeFileSync(
    path.join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${dir}/host_key`,
      `AuthorizedKeysFile ${dir}/authorized_keys`,
      `PidFile ${dir}/sshd.pid`,
      'StrictModes no',
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  sshd = spawn(SSHD, ['-D', '-e', '-f', path.join(dir, 'sshd_config')], { stdio: 'ignore' });
  await listening(port);

  const vaultFile = path.join(dir, 'vault_pw');
  writeFileSync(vaultFile, SECRETS.vault, { mode: 0o600 });
  vaulted = execFileSync('ansible-vault', ['encrypt_string', '--vault-password-file', vaultFile, '--name', 'secret_word', 'open-sesame'], { encoding: 'utf8' });

  database = await createTestDatabase();
  const config = loadConfig(
    {},
    testSettings(database.url, {
      CAIRN_LOG_LEVEL: 'debug',
      CAIRN_RUN_NETWORK: 'host',
      // The sshd a project fetches from is on loopback.
      SERVICE_EGRESS_ALLOW: '127.0.0.0/8',
      SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
      SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    }),
  );
  running = await startServerInProcess(config, createLogger(config, { write: (line: string) => void lines.push(line) }));
  api = apiClient(running.url, running.adminToken!);
  workRoot = await runAccountDir(config, 'runs', () => undefined);
}, 60_000);

afterAll(async () => {
  sshd?.kill('SIGTERM');
  await running?.stop();
  await database?.drop();
});

async function created(res: { status: number; text: string; body: any }) {
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`);
  return res.body;
}

const playbook = () => `- hosts: target
  gather_facts: false
  vars:
${vaulted
  .split('\n')
  .filter(Boolean)
  .map((l) => `    ${l}`)
  .join('\n')}
  tasks:
    - name: who
      ansible.builtin.command: id -un
      register: who
    - name: report
      ansible.builtin.debug:
        msg: "remote={{ who.stdout }} via={{ ansible_user }} become={{ ansible_become_password }} vaulted={{ secret_word }}"
`;

test('an ansible run reaches an sshd with its machine credential (encrypted and plain keys), become and vault passwords masked, no secret anywhere', async () => {
  const inventory = await created(
    await api.post('/v1/inventories', {
      name: 'sshd on loopback',
      content: `[target]\nsshbox ansible_host=127.0.0.1 ansible_port=${port} ansible_python_interpreter=/usr/bin/python3 ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n`,
    }),
  );
  const encrypted = await created(
    await api.post('/v1/credentials', {
      name: 'root by encrypted key',
      kind: 'machine',
      inputs: { username: 'root', ssh_key_data: encryptedKey, ssh_key_unlock: SECRETS.passphrase, become_method: 'sudo', become_password: SECRETS.become },
    }),
  );
  const plain = await created(
    await api.post('/v1/credentials', {
      name: 'root by plain key',
      kind: 'machine',
      inputs: { username: 'root', ssh_key_data: plainKey, become_password: SECRETS.become },
    }),
  );
  const vault = await created(await api.post('/v1/credentials', { name: 'vault', kind: 'vault', inputs: { vault_password: SECRETS.vault } }));

  const runIds: string[] = [];
  for (const machine of [encrypted, plain]) {
    const run = await created(await api.post('/v1/runs', { tool: 'ansible', command: playbook(), inventory_id: inventory.id, credentials: [machine.id, vault.id] }));
    runIds.push(run.id);
    const ended = await waitForRunEnd(api, run.id, 90_000);
    const log = (await api.get(`/v1/runs/${run.id}/logs`)).text;
    if (ended.status !== 'succeeded') throw new Error(`run ${run.id} ${ended.status}: ${log}`);
    expect(log).toContain('remote=root via=root become=[masked] vaulted=open-sesame');
    // The run's work dir, with the key, passphrase and extra-vars files, is gone.
    expect(readdirSync(workRoot).filter((name) => name.startsWith(run.id))).toEqual([]);
  }

  // A wrong passphrase fails the run with a plain reason, and prints no secret.
  const wrong = await created(
    await api.post('/v1/credentials', { name: 'wrong passphrase', kind: 'machine', inputs: { username: 'root', ssh_key_data: encryptedKey, ssh_key_unlock: `not-${SECRETS.passphrase}` } }),
  );
  const failed = await created(await api.post('/v1/runs', { tool: 'ansible', command: playbook(), inventory_id: inventory.id, credentials: [wrong.id, vault.id] }));
  runIds.push(failed.id);
  expect((await waitForRunEnd(api, failed.id, 60_000)).status).toBe('failed');
  expect((await api.get(`/v1/runs/${failed.id}/logs`)).text).toContain("the machine credential's SSH key could not be unlocked with its passphrase");

  const reads = [
    await api.get('/v1/credentials'),
    ...(await Promise.all([encrypted, plain, vault, wrong].map((c) => api.get(`/v1/credentials/${c.id}`)))),
    await api.get('/v1/runs?limit=100'),
    await api.get('/v1/audit?limit=1000'),
    ...(await runReads(api, runIds)),
  ];
  const keyBody = (key: string) => key.split('\n').slice(1, 3).join('\n');
  expectNoSecrets(reads, lines, { ...SECRETS, encryptedKey: keyBody(encryptedKey), plainKey: keyBody(plainKey) });
}, 240_000);

test('a project clones over SSH with a source control credential (plain and passphrase keys); no secret anywhere', async () => {
  const bare = path.join(dir, 'site.git');
  const work = path.join(dir, 'site-work');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', bare]);
  mkdirSync(work);
  git(work, 'init', '-q', '-b', 'main');
  writeFileSync(path.join(work, 'site.yml'), '- hosts: localhost\n  gather_facts: false\n  tasks: []\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'first');
  git(work, 'push', '-q', bare, 'HEAD:main');
  const commit = git(work, 'rev-parse', 'HEAD');
  const url = `ssh://root@127.0.0.1:${port}${bare}`;

  const plain = await created(await api.post('/v1/credentials', { name: 'git plain', kind: 'scm', inputs: { ssh_key_data: plainKey } }));
  const locked = await created(await api.post('/v1/credentials', { name: 'git locked', kind: 'scm', inputs: { ssh_key_data: encryptedKey, ssh_key_unlock: SECRETS.passphrase } }));
  const machine = await created(await api.post('/v1/credentials', { name: 'not scm', kind: 'machine', inputs: { username: 'root', ssh_key_data: plainKey } }));
  const wrongKind = await api.post('/v1/projects', { name: 'wrong kind', url, credential_id: machine.id });
  expect([wrongKind.status, wrongKind.body.field]).toEqual([400, 'credential_id']);
  expect(wrongKind.body.error).toContain('scm');

  const settled = async (id: string) => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const { body } = await api.get(`/v1/projects/${id}`);
      if (!body.update_pending && (body.status === 'successful' || body.status === 'failed')) return body;
      if (Date.now() > deadline) throw new Error(`project ${id} did not settle: ${JSON.stringify(body)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const none = await created(await api.post('/v1/projects', { name: 'no credential', url }));
  const projects = [];
  for (const credential of [plain, locked]) {
    const project = await created(await api.post('/v1/projects', { name: `over ssh ${credential.name}`, url, credential_id: credential.id }));
    expect(project.credential_id).toBe(credential.id);
    const done = await settled(project.id);
    expect([done.status, done.last_error, done.commit]).toEqual(['successful', null, commit]);
    projects.push(project.id);
  }
  // Without the credential the server's own ssh has no key the sshd accepts.
  expect((await settled(none.id)).status).toBe('failed');
  // No credential file is left behind: each fetch's own dir is gone.
  expect(readdirSync(workRoot).filter((n) => n.startsWith('git-fetch-'))).toEqual([]);

  const reads = [
    ...(await Promise.all([...projects, none.id].map((id) => api.get(`/v1/projects/${id}`)))),
    await api.get('/v1/projects'),
    await api.get('/v1/audit?limit=1000'),
  ];
  const everything = [...reads.map((r) => r.text), ...lines].join('\n');
  for (const [name, secret] of Object.entries({ passphrase: SECRETS.passphrase, encryptedKey: encryptedKey.split('\n')[1], plainKey: plainKey.split('\n')[1] })) {
    if (everything.includes(secret)) throw new Error(`the secret ${name} was found in an API read or the server log`);
  }
}, 120_000);
