import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger, type RunningServer } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { loadJose } from '../../core/jose';
import { createTestDatabase } from '../support/database';
import { apiClient, type ApiClient } from '../support/http';
import { person } from '../support/access';
import { expectNoSecrets, runReads } from '../support/leaks';
import { startServerInProcess, testSettings, waitForRunEnd } from '../support/server';

/**
 * Cairn as an OpenID issuer for runs (spec part A 1.1, 2.14, 3.4, 4.10; part B 5.4), against a
 * real server started with --federation-issuer. A relying party in this test stands where a
 * cloud's token exchange does: it reads the discovery document and the key set over HTTP from the
 * issuer the token names, as AWS STS, Google's STS and Azure AD do, and verifies each token a real
 * bash run sends it from the file its credential's variables name. The run prints only what the
 * relying party answered, never its token.
 */

const lines: string[] = [];
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let running: RunningServer;
let api: ApiClient;
let issuer: string;
let relyingParty: Server;
let rpUrl: string;

/** Each token the relying party was sent, by the audience it checked it for. */
const received: { audience: string; token: string }[] = [];

const AUDIENCES: Record<string, string> = {
  aws: 'sts.amazonaws.com',
  gcp: '//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/cairn/providers/cairn',
  azure: 'api://AzureADTokenExchange',
  vault: 'https://vault.example.com',
};

/** Verifies a token as a cloud does: discovery from the configured issuer, its `jwks_uri`, fresh keys each time. */
async function verifyAsACloud(token: string, audience: string) {
  const jose = await loadJose();
  const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as { issuer: string; jwks_uri: string };
  expect(discovery.issuer).toBe(issuer);
  const keys = jose.createRemoteJWKSet(new URL(discovery.jwks_uri));
  return jose.jwtVerify(token, keys, { issuer: discovery.issuer, audience, algorithms: ['RS256'] });
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

beforeAll(async () => {
  // The relying party: POST /<audience name> with the token as the body answers what it verified.
  relyingParty = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const audience = AUDIENCES[req.url!.slice(1)];
      const token = Buffer.concat(chunks).toString().trim();
      received.push({ audience, token });
      try {
        const { payload, protectedHeader } = await verifyAsACloud(token, audience);
        res.end(`verified ${req.url!.slice(1)} sub=${payload.sub} kid=${protectedHeader.kid}\n`);
      } catch (err) {
        res.statusCode = 401;
        res.end(`refused ${req.url!.slice(1)}: ${(err as Error).name}\n`);
      }
    });
  });
  await new Promise<void>((resolve) => relyingParty.listen(0, '127.0.0.1', resolve));
  rpUrl = `http://127.0.0.1:${(relyingParty.address() as AddressInfo).port}`;

  // The issuer is this server's own address, so its port is chosen before it starts.
  const port = await freePort();
  issuer = `http://127.0.0.1:${port}`;
  database = await createTestDatabase();
  const config = loadConfig(
    {},
    testSettings(database.url, {
      CAIRN_LISTEN: `127.0.0.1:${port}`,
      CAIRN_FEDERATION_ISSUER: `${issuer}/`,
      // The run reaches the relying party on this host's loopback.
      CAIRN_RUN_NETWORK: 'host',
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
  await new Promise((resolve) => relyingParty?.close(resolve));
});

async function created(res: { status: number; text: string; body: any }) {
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`);
  return res.body;
}

const keysNow = async () => (await api.get('/v1/federation/keys')).body.keys as any[];

test('the discovery document and key set are public, name the issuer and hold public keys only', async () => {
  const anonymous = apiClient(running.url);
  const discovery = await anonymous.get('/.well-known/openid-configuration');
  expect(discovery.status).toBe(200);
  expect(discovery.body).toMatchObject({
    issuer,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    id_token_signing_alg_values_supported: ['RS256'],
    response_types_supported: ['id_token'],
    subject_types_supported: ['public'],
  });
  expect(discovery.body.claims_supported).toEqual(expect.arrayContaining(['sub', 'aud', 'run_id', 'template_id', 'project_id', 'requested_by']));
  const jwks = await anonymous.get('/.well-known/jwks.json');
  expect(jwks.status).toBe(200);
  expect(jwks.body.keys).toHaveLength(1);
  const [key] = jwks.body.keys;
  expect(Object.keys(key).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use']);
  expect(key).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig' });

  // The key list is the admin's: no token is a 401.
  expect((await anonymous.get('/v1/federation/keys')).status).toBe(401);
  const keys = await keysNow();
  expect(keys).toEqual([
    { id: key.kid, state: 'signing', published: true, created: expect.any(String), activated: expect.any(String), retired: null, removed: null },
  ]);
});

test('a run given each federated kind gets a token a cloud verifies, placed as each SDK reads it, never shown', async () => {
  const credential = (body: object) => api.post('/v1/credentials', body).then(created);
  const aws = await credential({ name: 'aws', kind: 'aws_oidc', inputs: { role_arn: 'arn:aws:iam::123456789012:role/deploy', region: 'eu-west-1' } });
  const gcp = await credential({
    name: 'gcp',
    kind: 'gcp_oidc',
    inputs: { workload_identity_provider: 'projects/123456/locations/global/workloadIdentityPools/cairn/providers/cairn', service_account_email: 'deploy@proj.iam.gserviceaccount.com' },
  });
  // Azure matches a subject exactly: this one's names the template, the same for every run of it.
  const azure = await credential({ name: 'azure', kind: 'azure_oidc', inputs: { tenant: 'tenant-1', client: 'client-1', subject: 'template' } });
  const vault = await credential({ name: 'vault', kind: 'oidc_token', inputs: { audience: AUDIENCES.vault } });
  const post = (file: string, name: string) => `curl -sS --data-binary @"${file}" ${rpUrl}/${name}`;
  const template = await created(
    await api.post('/v1/templates', {
      name: 'federated',
      tool: 'bash',
      credentials: [aws.id, gcp.id, azure.id, vault.id],
      command: [
        'echo "aws role=$AWS_ROLE_ARN file=$AWS_WEB_IDENTITY_TOKEN_FILE"',
        'echo "azure client=$AZURE_CLIENT_ID tenant=$AZURE_TENANT_ID file=$AZURE_FEDERATED_TOKEN_FILE"',
        'echo "mode=$(stat -c %a "$AWS_WEB_IDENTITY_TOKEN_FILE")"',
        // Google's client libraries read the token file the external-account file names.
        'GCP_TOKEN_FILE=$(grep -o \'"file": "[^"]*"\' "$GOOGLE_APPLICATION_CREDENTIALS" | cut -d\'"\' -f4)',
        'grep -o \'"type": "[^"]*"\\|"audience": "[^"]*"\\|"service_account_impersonation_url": "[^"]*"\' "$GOOGLE_APPLICATION_CREDENTIALS"',
        post('$AWS_WEB_IDENTITY_TOKEN_FILE', 'aws'),
        post('$GCP_TOKEN_FILE', 'gcp'),
        post('$AZURE_FEDERATED_TOKEN_FILE', 'azure'),
        post('$CAIRN_OIDC_TOKEN_FILE', 'vault'),
        // Printed as it is, the token is masked.
        'echo "token=$(cat "$CAIRN_OIDC_TOKEN_FILE")"',
      ].join('\n'),
    }),
  );
  const launched = await created(await api.post(`/v1/templates/${template.id}/launch`, {}));
  const run = await waitForRunEnd(api, launched.id);
  const log = (await api.get(`/v1/runs/${run.id}/logs`)).text;
  expect([run.status, log]).toEqual(['succeeded', expect.any(String)]);

  const [signing] = await keysNow();
  const subject = `project:none:template:${template.id}:run:${run.id}`;
  for (const name of ['aws', 'gcp', 'vault']) expect(log).toContain(`verified ${name} sub=${subject} kid=${signing.id}`);
  expect(log).toContain(`verified azure sub=project:none:template:${template.id} kid=${signing.id}`);
  expect(log).toMatch(new RegExp(`aws role=arn:aws:iam::123456789012:role/deploy file=/\\S*${run.id}\\S*identity_token`));
  expect(log).toMatch(/azure client=client-1 tenant=tenant-1 file=\/\S+identity_token/);
  expect(log).toContain('mode=600');
  expect(log).toContain('"type": "external_account"');
  expect(log).toContain(`"audience": "${AUDIENCES.gcp}"`);
  expect(log).toContain('"service_account_impersonation_url": "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/deploy@proj.iam.gserviceaccount.com:generateAccessToken"');
  expect(log).toContain('token=[masked]');

  // What the relying party verified: the run, its template and requester, a lifetime of at most an hour.
  const fromRun = received.filter((r) => r.audience === AUDIENCES.vault);
  expect(fromRun).toHaveLength(1);
  const { payload } = await verifyAsACloud(fromRun[0].token, AUDIENCES.vault);
  expect(payload).toMatchObject({ iss: issuer, sub: subject, aud: AUDIENCES.vault, run_id: run.id, template_id: template.id, project_id: null, requested_by: 'admin', credential_id: vault.id });
  expect(payload.exp! - payload.iat!).toBeLessThanOrEqual(3600);
  // A token for one audience is refused for another.
  await expect(verifyAsACloud(fromRun[0].token, AUDIENCES.aws)).rejects.toThrow();

  // No token is in any read of the run, its events, evidence or receipt, the audit trail or the server log.
  const tokens = Object.fromEntries(received.map((r, i) => [`token ${i} (${r.audience})`, r.token]));
  expectNoSecrets([...(await runReads(api, [run.id])), await api.get('/v1/audit?limit=1000')], lines, tokens);
}, 60_000);

test('a normal rotation publishes the new key ahead of signing and a second is refused; an emergency rotation removes every other key and the tokens it signed stop verifying', async () => {
  const before = await keysNow();
  const oldKey = before.find((k) => k.state === 'signing');
  const issued = received.find((r) => r.audience === AUDIENCES.vault)!;
  expect((await verifyAsACloud(issued.token, AUDIENCES.vault)).protectedHeader.kid).toBe(oldKey.id);

  const rotated = await api.post('/v1/federation/keys/rotate');
  expect(rotated.status).toBe(201);
  const next = rotated.body.keys.find((k: any) => k.state === 'next');
  expect(next).toMatchObject({ published: true, activated: null });
  expect(rotated.body.keys.find((k: any) => k.id === oldKey.id)).toMatchObject({ state: 'signing' });
  // Published now, so relying parties hold it before it signs; the old key still signs.
  const jwks = (await apiClient(running.url).get('/.well-known/jwks.json')).body.keys.map((k: any) => k.kid).sort();
  expect(jwks).toEqual([oldKey.id, next.id].sort());
  await verifyAsACloud(issued.token, AUDIENCES.vault);

  const second = await api.post('/v1/federation/keys/rotate');
  expect(second.status).toBe(409);
  expect(second.body.error).toMatch(/rotation is under way/);

  const emergency = await api.post('/v1/federation/keys/rotate/emergency');
  expect(emergency.status).toBe(201);
  const signing = emergency.body.keys.filter((k: any) => k.state === 'signing');
  expect(signing).toHaveLength(1);
  expect([oldKey.id, next.id]).not.toContain(signing[0].id);
  for (const id of [oldKey.id, next.id]) {
    expect(emergency.body.keys.find((k: any) => k.id === id)).toMatchObject({ state: 'removed', published: false, removed: expect.any(String) });
  }
  expect((await apiClient(running.url).get('/.well-known/jwks.json')).body.keys.map((k: any) => k.kid)).toEqual([signing[0].id]);
  // The run's token, signed by a removed key, no longer verifies.
  await expect(verifyAsACloud(issued.token, AUDIENCES.vault)).rejects.toMatchObject({ code: 'ERR_JWKS_NO_MATCHING_KEY' });
  // The private halves are erased.
  const rows = await running.context.sql`SELECT id, private_jwk_sealed FROM federation_keys WHERE state = 'removed'`;
  expect(rows.map((r) => [r.id, r.private_jwk_sealed]).sort()).toEqual([[oldKey.id, null], [next.id, null]].sort());

  // With no rotation under way, a normal one may start again.
  expect((await api.post('/v1/federation/keys/rotate')).status).toBe(201);
  expect((await api.post('/v1/federation/keys/rotate')).status).toBe(409);
}, 60_000);

test('keys and rotations are the admin\'s alone', async () => {
  const operator = apiClient(running.url, (await person(api, 'operator')).token);
  expect((await operator.get('/v1/federation/keys')).status).toBe(403);
  expect((await operator.post('/v1/federation/keys/rotate')).status).toBe(403);
  expect((await operator.post('/v1/federation/keys/rotate/emergency')).status).toBe(403);
}, 30_000);
