import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createLogger, type RunningServer } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { createTestDatabase } from '../support/database';
import { apiClient, type ApiClient } from '../support/http';
import { expectNoSecrets, runReads } from '../support/leaks';
import { startServerInProcess, testSettings, waitForRunEnd } from '../support/server';

/**
 * Credentials reach runs (spec part A 2.9, part B 5.3): a real bash and python run given machine,
 * AWS and custom-typed credentials receives their environment variables, extra vars and files
 * (written 0600 in its work dir); what it prints of a secret is masked; the file is gone once the
 * run ends; and no secret is found in any API read, event, audit entry, evidence, receipt or the
 * captured server log.
 */

const hex = (n: number) => randomBytes(n).toString('hex');
const sha = (text: string) => createHash('sha256').update(text).digest('hex');

const SECRETS = {
  aws: `aws-secret-${hex(10)}`,
  become: `become-pw-${hex(8)}`,
  keyBody1: randomBytes(48).toString('base64'),
  keyBody2: randomBytes(48).toString('base64'),
  acme: `acme-token-${hex(10)}`,
};
const SSH_KEY = `-----BEGIN OPENSSH PRIVATE KEY-----\n${SECRETS.keyBody1}\n${SECRETS.keyBody2}\n-----END OPENSSH PRIVATE KEY-----\n`;

const lines: string[] = [];
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let running: RunningServer;
let api: ApiClient;

beforeAll(async () => {
  database = await createTestDatabase();
  const config = loadConfig(
    {},
    testSettings(database.url, {
      CAIRN_LOG_LEVEL: 'debug',
      SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
      SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
    }),
  );
  running = await startServerInProcess(config, createLogger(config, { write: (line: string) => void lines.push(line) }));
  api = apiClient(running.url, running.adminToken!);
}, 60_000);

afterAll(async () => {
  await running?.stop();
  await database?.drop();
});

async function created(res: { status: number; text: string; body: any }) {
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`);
  return res.body;
}

test('bash and python runs receive their credentials, masked, their files gone afterwards, and no secret is found anywhere', async () => {
  const machine = await created(
    await api.post('/v1/credentials', {
      name: 'web hosts',
      kind: 'machine',
      inputs: { username: 'deploy', ssh_key_data: SSH_KEY, become_method: 'sudo', become_password: SECRETS.become },
    }),
  );
  const aws = await created(await api.post('/v1/credentials', { name: 'aws', kind: 'aws', inputs: { access_key: 'AKIATESTING', secret_key: SECRETS.aws, region: 'eu-west-1' } }));
  const type = await created(
    await api.post('/v1/credential-types', {
      name: 'acme',
      fields: [
        { id: 'endpoint', label: 'Endpoint', required: true },
        { id: 'token', label: 'Token', secret: true, required: true },
      ],
      injectors: { env: { ACME_ENDPOINT: '{{ endpoint }}', ACME_TOKEN: '{{ token }}', ACME_CONFIG: '{{ file.config }}' }, extra_vars: { acme_token: '{{ token }}' }, files: { config: 'endpoint={{ endpoint }}\ntoken={{ token }}\n' } },
    }),
  );
  const acme = await created(await api.post('/v1/credentials', { name: 'acme', type_id: type.id, inputs: { endpoint: 'https://acme.example', token: SECRETS.acme } }));

  const template = await created(
    await api.post('/v1/templates', {
      name: 'uses credentials',
      tool: 'bash',
      credentials: [machine.id, aws.id, acme.id],
      command: [
        'echo "user=$CAIRN_MACHINE_USERNAME method=$CAIRN_BECOME_METHOD access=$AWS_ACCESS_KEY_ID region=$AWS_REGION endpoint=$ACME_ENDPOINT"',
        'echo "aws=$AWS_SECRET_ACCESS_KEY become=$CAIRN_BECOME_PASSWORD acme=$ACME_TOKEN"',
        'printf %s "$AWS_SECRET_ACCESS_KEY" | sha256sum | cut -c1-64 | sed "s/^/aws-sha=/"',
        'echo "keyfile=$CAIRN_SSH_KEY_FILE"',
        'echo "mode=$(stat -c %a "$CAIRN_SSH_KEY_FILE") $(stat -c %a "$ACME_CONFIG")"',
        'sha256sum "$CAIRN_SSH_KEY_FILE" | cut -c1-64 | sed "s/^/key-sha=/"',
        'cat "$CAIRN_SSH_KEY_FILE"',
        'cat "$ACME_CONFIG"',
        'echo "vars=$CAIRN_EXTRA_VARS"',
      ].join('\n'),
    }),
  );
  const launched = await created(await api.post(`/v1/templates/${template.id}/launch`, {}));
  const bashRun = await waitForRunEnd(api, launched.id);
  expect(bashRun.status).toBe('succeeded');
  const bashLog = (await api.get(`/v1/runs/${launched.id}/logs`)).text;
  expect(bashLog).toContain('user=deploy method=sudo access=AKIATESTING region=eu-west-1 endpoint=https://acme.example');
  expect(bashLog).toContain('aws=[masked] become=[masked] acme=[masked]');
  // The real values reached the tool: their digests match.
  expect(bashLog).toContain(`aws-sha=${sha(SECRETS.aws)}`);
  expect(bashLog).toContain(`key-sha=${sha(SSH_KEY)}`);
  expect(bashLog).toContain('mode=600 600');
  expect(bashLog).toContain('endpoint=https://acme.example\ntoken=[masked]');
  expect(bashLog).toMatch(/"acme_token":"\[masked\]"/);
  const keyFile = /keyfile=(\S+)/.exec(bashLog)![1];
  expect(keyFile).toContain(launched.id);
  // The key file, and the work dir holding it, are gone once the run has ended.
  expect(existsSync(keyFile)).toBe(false);
  expect(existsSync(keyFile.slice(0, keyFile.lastIndexOf('/')))).toBe(false);

  const python = await created(
    await api.post('/v1/runs', {
      tool: 'python',
      credentials: [aws.id, machine.id],
      command: [
        'import hashlib, os',
        "print('aws=' + os.environ['AWS_SECRET_ACCESS_KEY'])",
        "key = open(os.environ['CAIRN_SSH_KEY_FILE']).read()",
        "print('key-sha=' + hashlib.sha256(key.encode()).hexdigest())",
        "print('mode=' + oct(os.stat(os.environ['CAIRN_SSH_KEY_FILE']).st_mode & 0o777))",
        "print('keyfile=' + os.environ['CAIRN_SSH_KEY_FILE'])",
        'print(key)',
      ].join('\n'),
    }),
  );
  const pythonRun = await waitForRunEnd(api, python.id);
  expect(pythonRun.status).toBe('succeeded');
  const pythonLog = (await api.get(`/v1/runs/${python.id}/logs`)).text;
  expect(pythonLog).toContain('aws=[masked]');
  expect(pythonLog).toContain(`key-sha=${sha(SSH_KEY)}`);
  expect(pythonLog).toContain('mode=0o600');
  const pythonKeyFile = /keyfile=(\S+)/.exec(pythonLog)![1];
  expect(existsSync(pythonKeyFile)).toBe(false);

  // A rerun carries the credentials.
  const rerun = await api.post(`/v1/runs/${launched.id}/rerun`);
  expect(rerun.status).toBe(201);
  expect((await waitForRunEnd(api, rerun.body.id)).status).toBe('succeeded');
  expect((await api.get(`/v1/runs/${rerun.body.id}/logs`)).text).toContain(`aws-sha=${sha(SECRETS.aws)}`);

  // Every secret, looked for everywhere a user or an operator can see, and in the server log.
  const runIds = [launched.id, python.id, rerun.body.id];
  const reads = [
    await api.get('/v1/credentials'),
    await api.get(`/v1/credentials/${machine.id}`),
    await api.get(`/v1/credentials/${aws.id}`),
    await api.get(`/v1/credentials/${acme.id}`),
    await api.get('/v1/credential-types'),
    await api.get(`/v1/templates/${template.id}`),
    await api.get('/v1/runs?limit=100'),
    await api.get('/v1/audit?limit=1000'),
    ...(await runReads(api, runIds)),
  ];
  expectNoSecrets(reads, lines, SECRETS);
  expect(lines.length).toBeGreaterThan(0);
}, 120_000);

test('use on a credential is disclosure: a plain echo is masked, a transformed one is not, and every other path stays sealed', async () => {
  const secret = `disclosed-${hex(12)}`;
  const reversed = [...secret].reverse().join('');
  const encoded = Buffer.from(secret).toString('base64');
  const credential = await created(await api.post('/v1/credentials', { name: 'disclosed', kind: 'aws', inputs: { access_key: 'AKIADISCLOSED', secret_key: secret } }));
  const submitted = await created(
    await api.post('/v1/runs', {
      tool: 'bash',
      credentials: [credential.id],
      command: [
        'echo "plain=$AWS_SECRET_ACCESS_KEY"',
        // What docs/api.md says `use` means: a run may print the secret transformed, unmasked.
        'printf %s "$AWS_SECRET_ACCESS_KEY" | rev | sed "s/^/rev=/"; echo',
        'printf %s "$AWS_SECRET_ACCESS_KEY" | base64 -w0 | sed "s/^/b64=/"; echo',
        // The shell's own working directory is a path, not a password; a password assignment is masked.
        'echo "PWD=$PWD"',
        'DB_PASSWORD=hunter2-not-real; echo "DB_PASSWORD=$DB_PASSWORD"',
      ].join('\n'),
    }),
  );
  const run = await waitForRunEnd(api, submitted.id);
  expect(run.status).toBe('succeeded');
  const log = (await api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(log).toContain('plain=[masked]');
  expect(log).toContain(`rev=${reversed}`);
  expect(log).toContain(`b64=${encoded}`);
  expect(log).toMatch(new RegExp(`PWD=/\\S*${run.id}`));
  expect(log).toContain('DB_PASSWORD=[masked]');
  expect(log).not.toContain('hunter2-not-real');
  // The secret as stored appears nowhere: not in reads, events, evidence, receipts, the chain or the server log.
  const reads = [await api.get(`/v1/credentials/${credential.id}`), await api.get('/v1/audit?limit=1000'), ...(await runReads(api, [run.id]))];
  expectNoSecrets(reads, lines, { secret });
  // Nor in the error a refused write answers with.
  const refused = await api.request('PUT', `/v1/credentials/${credential.id}`, { body: { name: 'disclosed', kind: 'aws', inputs: { access_key: 'AKIADISCLOSED', secret_key: secret, bogus: secret } } });
  expect(refused).toMatchObject({ status: 400, body: { field: 'inputs.bogus' } });
  expect(refused.text).not.toContain(secret);
}, 60_000);

test('a run given a federated credential fails to start on a server without --federation-issuer, saying so', async () => {
  const credential = await created(await api.post('/v1/credentials', { name: 'aws through a token', kind: 'aws_oidc', inputs: { role_arn: 'arn:aws:iam::123456789012:role/deploy' } }));
  const submitted = await created(await api.post('/v1/runs', { tool: 'bash', credentials: [credential.id], command: 'echo should not run' }));
  const run = await waitForRunEnd(api, submitted.id);
  expect(run).toMatchObject({ status: 'failed', exit_code: null });
  expect(run.error).toBe(
    `credential ${credential.id} (aws_oidc) needs an identity token, and this server issues none: start it with --federation-issuer <its public URL>`,
  );
  expect((await api.get(`/v1/runs/${run.id}/logs`)).text).not.toContain('should not run');
}, 30_000);
