import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { pluginsDir } from '../support/plugins';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';

/**
 * The official postgres secrets plugin (sdk/go/plugins/postgres), built with `go build` and loaded
 * by a real server through --plugins-dir, against a real PostgreSQL: a credential's secret read
 * from a secrets table (static), and a login role minted per run (dynamic), used by the run to
 * connect and dropped when the run ends.
 */
const STATIC_SECRET = 'table-Secret-in-postgres-7c1e9a';
const suffix = randomBytes(4).toString('hex');
const STORE = `cairn_secret_store_${suffix}`;
const GROUP = `cairn_deployers_${suffix}`;
let t: TestServer;
/** The cluster's administrator (the tests' own PostgreSQL) and the store database. */
let admin: postgres.Sql;
let storeUrl: URL;

beforeAll(async () => {
  const clusterUrl = new URL(process.env.CAIRN_TEST_DATABASE_URL!);
  admin = postgres(clusterUrl.toString(), { max: 1, onnotice: () => undefined });
  // What an operator sets up: a database holding secrets, and a group role holding a run's privileges.
  await admin.unsafe(`CREATE DATABASE ${STORE}`);
  await admin.unsafe(`CREATE ROLE ${GROUP} NOLOGIN`);
  storeUrl = new URL(clusterUrl);
  storeUrl.pathname = `/${STORE}`;
  const store = postgres(storeUrl.toString(), { max: 1, onnotice: () => undefined });
  await store`CREATE TABLE cairn_secrets (name text PRIMARY KEY, value text NOT NULL)`;
  await store`INSERT INTO cairn_secrets VALUES ('deploy/token', ${STATIC_SECRET})`;
  await store.unsafe(`GRANT CONNECT ON DATABASE ${STORE} TO ${GROUP}`);
  await store.end();

  const parent = tempDir('pg-plugin-server');
  await fs.chmod(parent, 0o755);
  const dir = await pluginsDir(path.join(parent, 'plugins'), { '30-postgres': 'postgres' });
  // The plugin's settings: SERVICE_PLUGIN_* variables of the server's environment (spec part A 1.3 rule 7).
  process.env.SERVICE_PLUGIN_PG_URL = storeUrl.toString();
  process.env.SERVICE_PLUGIN_PG_ROLE_TTL = '10m';
  try {
    // The run reaches PostgreSQL on loopback.
    t = await startTestServer({ CAIRN_PLUGINS_DIR: dir, CAIRN_RUN_NETWORK: 'host' });
  } finally {
    delete process.env.SERVICE_PLUGIN_PG_URL;
    delete process.env.SERVICE_PLUGIN_PG_ROLE_TTL;
  }
}, 180_000);
afterAll(async () => {
  await t?.stop();
  await admin?.unsafe(`DROP DATABASE IF EXISTS ${STORE} WITH (FORCE)`);
  await admin?.unsafe(`DROP ROLE IF EXISTS ${GROUP}`);
  await admin?.end();
});

/** A bash run given the credential; its end and its log. */
async function runWith(credentialId: string, command: string) {
  const submitted = await t.api.post('/v1/runs', { tool: 'bash', command, credentials: [credentialId] });
  expect(submitted.status).toBe(201);
  const ended = await waitForRunEnd(t.api, submitted.body.id);
  return { ended, log: (await t.api.get(`/v1/runs/${submitted.body.id}/logs`)).text as string };
}

test('postgres-table: a credential reads its secret from the table at run time, masked in the output and stored nowhere in Cairn', async () => {
  const credential = await t.api.post('/v1/credentials', {
    name: 'deploy token from the secrets table',
    kind: 'hashicorp_token',
    inputs: { url: 'https://vault.example' },
    secret_sources: { token: { source: 'postgres-table', ref: 'deploy/token' } },
  });
  expect(credential.status).toBe(201);
  expect(credential.body).toMatchObject({ status: 'ready', secret_sources: { token: { source: 'postgres-table', ref: 'deploy/token' } } });

  const { ended, log } = await runWith(credential.body.id, 'echo "token=$VAULT_TOKEN"\nprintf %s "$VAULT_TOKEN" | sha256sum | cut -c1-64');
  expect(ended).toMatchObject({ status: 'succeeded', exit_code: 0 });
  // The very value stored reached the run (its digest), and the output shows it masked.
  expect(log).toBe(`token=[masked]\n${createHash('sha256').update(STATIC_SECRET).digest('hex')}\n`);

  // Nothing of Cairn's database holds it: not the credential, the run, its log or events, the audit chain.
  // Every row of every table, read as text (what a data-only dump holds; the embedded PostgreSQL
  // may be newer than the machine's pg_dump).
  expect(await rowsHolding(credential.body.id)).toBeGreaterThan(0);
  expect(await rowsHolding(STATIC_SECRET)).toBe(0);
});

test('postgres-table: a name the table lacks fails the run before its tool starts, naming it', async () => {
  const credential = await t.api.post('/v1/credentials', {
    name: 'a missing secret',
    kind: 'hashicorp_token',
    inputs: { url: 'https://vault.example' },
    secret_sources: { token: { source: 'postgres-table', ref: 'deploy/nope' } },
  });
  expect(credential.status).toBe(201);
  const { ended, log } = await runWith(credential.body.id, 'echo started');
  expect(ended.status).toBe('failed');
  expect(log).not.toContain('started');
  expect(ended.error).toContain('secret source "postgres-table": cairn_secrets holds no secret named "deploy/nope"');
});

test('postgres-role: a run logs in with a role minted for it, which is dropped when the run ends', async () => {
  const type = await t.api.post('/v1/credential-types', {
    name: `postgresql url ${suffix}`,
    fields: [{ id: 'url', label: 'Connection URL', secret: true, required: true }],
    injectors: { env: { DATABASE_URL: '{{ url }}' } },
  });
  expect(type.status).toBe(201);
  const credential = await t.api.post('/v1/credentials', { name: 'a login per run', type_id: type.body.id, inputs: {}, secret_sources: { url: { source: 'postgres-role', ref: GROUP } } });
  expect(credential.status).toBe(201);
  expect(credential.body.status).toBe('ready');

  const query = `select current_user, rolvaliduntil > now() + interval '9 minutes', pg_has_role(current_user, '${GROUP}', 'member') from pg_roles where rolname = current_user`;
  const { ended, log } = await runWith(credential.body.id, `echo "url=$DATABASE_URL"\npsql "$DATABASE_URL" -Atc "${query}"`);
  expect(ended).toMatchObject({ status: 'succeeded', exit_code: 0 });
  // The run was connected as a login minted for it: in the group, expiring after the TTL.
  const [urlLine, whoLine] = log.trim().split('\n');
  expect(urlLine).toBe('url=[masked]');
  const [minted, expires, member] = whoLine.split('|');
  expect(minted).toMatch(/^cairn_run_[0-9a-f]{16}$/);
  expect([expires, member]).toEqual(['t', 't']);

  // The run has ended: the plugin that minted the login revoked it, and it is gone.
  expect(await admin`select rolname from pg_roles where rolname = ${minted}`).toHaveLength(0);
  expect(await admin`select rolname from pg_roles where rolname like 'cairn_run_%' and pg_has_role(rolname, ${GROUP}, 'member')`).toHaveLength(0);
});

test('postgres-role: a group role that does not exist fails the run naming the source, and leaves no login', async () => {
  const credential = await t.api.post('/v1/credentials', {
    name: 'no such group',
    kind: 'hashicorp_token',
    inputs: { url: 'https://vault.example' },
    secret_sources: { token: { source: 'postgres-role', ref: `${GROUP}_missing` } },
  });
  expect(credential.status).toBe(201);
  const { ended } = await runWith(credential.body.id, 'echo started');
  expect(ended.status).toBe('failed');
  expect(ended.error).toContain(`secret source "postgres-role": minting a login in group role "${GROUP}_missing"`);
});

/** How many rows of Cairn's tables hold `text` anywhere in them. */
async function rowsHolding(text: string): Promise<number> {
  const db = postgres(t.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const tables = await db<{ name: string }[]>`SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = 'public'`;
    let rows = 0;
    for (const { name } of tables) {
      const [{ n }] = await db.unsafe(`SELECT count(*)::int AS n FROM ${name} AS r WHERE strpos(r::text, $1) > 0`, [text]);
      rows += n;
    }
    return rows;
  } finally {
    await db.end();
  }
}
