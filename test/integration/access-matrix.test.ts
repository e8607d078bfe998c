import { randomBytes } from 'node:crypto';
import { connectDatabase, type Sql } from '../../store/db';
import { grant, org, person, quiet, team, template, tokenOf, type Person } from '../support/access';
import type { ApiClient, ApiResponse } from '../support/http';
import { testLicense } from '../support/license';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * The role-and-grant matrix of docs/api.md (Access), generated from one table: every route below,
 * called by each kind of caller, is allowed or refused as its row says, and a refused call writes
 * nothing (no row in any table, no audit chain entry).
 *
 * The subject objects are made by an operator, `owner`, in organization `org`; each is granted use
 * to the `use` operator and to the agent's account, and manage to the `manage` operator and to
 * team `team`.
 */

const ACTORS = ['admin', 'operator', 'viewer', 'agent', 'use', 'manage', 'orgAdminViewer', 'teamMember'] as const;
type Actor = (typeof ACTORS)[number];

/** What a row's call needs made first: fresh objects for a call that changes them, shared ones otherwise. */
interface Made {
  [name: string]: string;
}

interface Row {
  route: string;
  /** The callers allowed; every other caller is refused. */
  allowed: Actor[];
  /** Objects made afresh for each caller (beyond the shared ones), before anything is counted. */
  fresh?: () => Promise<Made>;
  call: (api: ApiClient, made: Made) => Promise<ApiResponse>;
  /** For a list: whether the answer shows the object (allowed) or leaves it out (refused); it answers 200 either way. */
  shows?: (res: ApiResponse, made: Made) => boolean;
}

let t: TestServer;
let sql: Sql;
let owner: Person;
let bystander: Person;
const tokens = {} as Record<Actor, string>;
/** Shared objects: templates, runs, the team, the organization, a grant. */
const shared: Made = {};

const ANYONE: Actor[] = [...ACTORS];
const OPERATORS: Actor[] = ['admin', 'operator', 'agent', 'use', 'manage', 'teamMember'];
const READERS: Actor[] = ['admin', 'agent', 'use', 'manage', 'orgAdminViewer', 'teamMember'];
const USERS: Actor[] = ['admin', 'agent', 'use', 'manage', 'teamMember'];
const MANAGERS: Actor[] = ['admin', 'manage', 'teamMember'];
const ADMIN: Actor[] = ['admin'];

const owned = () => t.as(owner.token);
const lists = (name: string, id: (made: Made) => string) => (res: ApiResponse, made: Made) =>
  res.status === 200 && (res.body[name] as { id?: string; user_id?: string }[]).some((row) => (row.id ?? row.user_id) === id(made));

/** A template made by the owner in the organization, with the matrix's grants on it. */
async function subject(body: Record<string, unknown> = {}): Promise<string> {
  const made = await template(owned(), { org_id: shared.org, ...body });
  await grant(owned(), made.id, 'use', { user_id: shared.useAccount });
  await grant(owned(), made.id, 'use', { user_id: shared.agentAccount });
  await grant(owned(), made.id, 'manage', { user_id: shared.manageAccount });
  await grant(owned(), made.id, 'manage', { team_id: shared.team });
  return made.id;
}

/** A credential made by the owner in the organization, with the same grants as a subject template. */
async function credentialSubject(): Promise<string> {
  const res = await owned().post('/v1/credentials', { name: `cred-${Math.random()}`, kind: 'aws_oidc', inputs: { role_arn: 'arn:aws:iam::1:role/matrix' }, org_id: shared.org });
  if (res.status !== 201) throw new Error(`making a credential: ${res.status} ${res.text}`);
  await grant(owned(), res.body.id, 'use', { user_id: shared.useAccount });
  await grant(owned(), res.body.id, 'use', { user_id: shared.agentAccount });
  await grant(owned(), res.body.id, 'manage', { user_id: shared.manageAccount });
  await grant(owned(), res.body.id, 'manage', { team_id: shared.team });
  return res.body.id;
}

/** A run of the held template, launched by the owner: held by the approval policy, so it never runs. */
async function heldRun(): Promise<Made> {
  const res = await owned().post(`/v1/templates/${shared.held}/launch`, {});
  if (res.status !== 201 || res.body.status !== 'held') throw new Error(`held launch: ${res.status} ${res.text}`);
  return { run: res.body.id };
}

async function freshGroup(kind: 'teams' | 'orgs'): Promise<Made> {
  const id = kind === 'teams' ? await team(t.api, [bystander]) : await org(t.api, [[bystander, 'member']]);
  return { group: id };
}

const ROWS: Row[] = [
  // Templates.
  { route: 'GET /v1/templates (the template listed)', allowed: READERS, call: (api) => api.get('/v1/templates'), shows: lists('templates', () => shared.template) },
  { route: 'GET /v1/templates/{id}', allowed: READERS, call: (api) => api.get(`/v1/templates/${shared.template}`) },
  { route: 'POST /v1/templates', allowed: OPERATORS, call: (api) => api.post('/v1/templates', { name: `made-${Math.random()}`, tool: 'bash', command: 'true' }) },
  {
    route: 'PUT /v1/templates/{id}',
    allowed: MANAGERS,
    fresh: async () => ({ template: await subject() }),
    call: async (api, made) => {
      const read = (await t.api.get(`/v1/templates/${made.template}`)).body;
      return api.request('PUT', `/v1/templates/${made.template}`, { body: { ...read, command: 'echo edited' } });
    },
  },
  { route: 'DELETE /v1/templates/{id}', allowed: MANAGERS, fresh: async () => ({ template: await subject() }), call: (api, made) => api.request('DELETE', `/v1/templates/${made.template}`) },
  { route: 'POST /v1/templates/{id}/launch', allowed: USERS, call: (api) => api.post(`/v1/templates/${shared.held}/launch`, {}) },
  // Runs of the template, and another account's plain run.
  { route: 'GET /v1/runs (a run of the template listed)', allowed: READERS, call: (api) => api.get('/v1/runs?limit=1000'), shows: lists('runs', () => shared.run) },
  { route: "GET /v1/runs (another account's plain run listed)", allowed: ADMIN, call: (api) => api.get('/v1/runs?limit=1000'), shows: lists('runs', () => shared.plain) },
  { route: 'GET /v1/runs/{id}', allowed: READERS, call: (api) => api.get(`/v1/runs/${shared.run}`) },
  { route: "GET /v1/runs/{id} (another account's plain run)", allowed: ADMIN, call: (api) => api.get(`/v1/runs/${shared.plain}`) },
  { route: 'GET /v1/runs/{id}/shards', allowed: READERS, call: (api) => api.get(`/v1/runs/${shared.run}/shards`) },
  { route: 'GET /v1/runs/{id}/logs', allowed: READERS, call: (api) => api.get(`/v1/runs/${shared.run}/logs`) },
  { route: 'GET /v1/runs/{id}/events', allowed: READERS, call: (api) => api.get(`/v1/runs/${shared.run}/events`) },
  { route: 'GET /v1/runs/{id}/evidence', allowed: READERS, call: (api) => api.get(`/v1/runs/${shared.run}/evidence?format=json`) },
  { route: 'GET /v1/runs/{id}/receipt', allowed: READERS, call: (api) => api.get(`/v1/runs/${shared.run}/receipt`) },
  { route: 'GET /v1/runs/{id}/decisions', allowed: ADMIN, call: (api) => api.get(`/v1/runs/${shared.run}/decisions`) },
  { route: 'POST /v1/runs/{id}/stream-ticket', allowed: READERS, call: (api) => api.post(`/v1/runs/${shared.run}/stream-ticket`) },
  { route: 'POST /v1/runs/{id}/cancel', allowed: MANAGERS, fresh: heldRun, call: (api, made) => api.post(`/v1/runs/${made.run}/cancel`) },
  { route: 'POST /v1/runs/{id}/rerun', allowed: USERS, call: (api) => api.post(`/v1/runs/${shared.run}/rerun`) },
  { route: 'POST /v1/runs/{id}/retry', allowed: USERS, call: (api) => api.post(`/v1/runs/${shared.run}/retry`) },
  { route: "POST /v1/runs/{id}/rerun (another account's plain run)", allowed: ADMIN, call: (api) => api.post(`/v1/runs/${shared.plain}/rerun`) },
  { route: 'POST /v1/runs/{id}/approve', allowed: ADMIN, fresh: heldRun, call: (api, made) => api.post(`/v1/runs/${made.run}/approve`, {}) },
  { route: 'POST /v1/runs/{id}/reject', allowed: ADMIN, fresh: heldRun, call: (api, made) => api.post(`/v1/runs/${made.run}/reject`, {}) },
  {
    route: 'POST /v1/runs/{id}/decisions/{decision}/corrections',
    allowed: ADMIN,
    fresh: async () => {
      const { run } = await heldRun();
      const decided = await t.api.post(`/v1/runs/${run}/reject`, {});
      return { run, decision: decided.body.decision.id };
    },
    call: (api, made) => api.post(`/v1/runs/${made.run}/decisions/${made.decision}/corrections`, { text: 'the ticket was CHG-2' }),
  },
  { route: 'GET /v1/approvals (the waiting step listed)', allowed: READERS, call: (api) => api.get('/v1/approvals'), shows: lists('approvals', () => shared.step) },
  { route: 'POST /v1/runs', allowed: OPERATORS, call: (api) => api.post('/v1/runs', { tool: 'bash', command: 'true' }) },
  { route: 'POST /v1/runs (named queue gpu)', allowed: USERS, call: (api) => api.post('/v1/runs', { tool: 'bash', command: 'true', queue: 'gpu', timeout: 1 }) },
  { route: 'POST /v1/pipelines', allowed: OPERATORS, call: (api) => api.post('/v1/pipelines', { steps: [{ tool: 'bash', command: 'true' }] }) },
  // Schedules and triggers follow the template they fire (made by the owner on the shared template).
  ...(['schedules', 'triggers'] as const).flatMap((kind): Row[] => {
    const body = () => (kind === 'schedules' ? { name: `made-${Math.random()}`, cron: '0 5 1 1 *', template_id: shared.held } : { name: `made-${Math.random()}`, template_id: shared.held });
    const made = async (): Promise<Made> => {
      const res = await owned().post(`/v1/${kind}`, body());
      if (res.status !== 201) throw new Error(`making ${kind}: ${res.status} ${res.text}`);
      return { follower: res.body.id };
    };
    return [
      { route: `POST /v1/${kind} (on the template)`, allowed: USERS, call: (api) => api.post(`/v1/${kind}`, body()) },
      { route: `GET /v1/${kind} (one on the template listed)`, allowed: READERS, fresh: made, call: (api) => api.get(`/v1/${kind}?limit=1000`), shows: lists(kind, (m) => m.follower) },
      { route: `GET /v1/${kind}/{id}`, allowed: READERS, fresh: made, call: (api, m) => api.get(`/v1/${kind}/${m.follower}`) },
      { route: `DELETE /v1/${kind}/{id}`, allowed: MANAGERS, fresh: made, call: (api, m) => api.request('DELETE', `/v1/${kind}/${m.follower}`) },
    ];
  }),
  // Teams and organizations.
  ...(['teams', 'orgs'] as const).flatMap((kind): Row[] => {
    const member: Actor = kind === 'teams' ? 'teamMember' : 'orgAdminViewer';
    const group = () => (kind === 'teams' ? shared.team : shared.org);
    return [
      { route: `POST /v1/${kind}`, allowed: ADMIN, call: (api) => api.post(`/v1/${kind}`, { name: `made-${Math.random()}` }) },
      { route: `GET /v1/${kind} (the ${kind.slice(0, -1)} listed)`, allowed: ['admin', member], call: (api) => api.get(`/v1/${kind}`), shows: lists(kind, group) },
      { route: `DELETE /v1/${kind}/{id}`, allowed: ADMIN, fresh: () => freshGroup(kind), call: (api, made) => api.request('DELETE', `/v1/${kind}/${made.group}`) },
      {
        route: `POST /v1/${kind}/{id}/members`,
        allowed: ADMIN,
        fresh: async () => ({ group: kind === 'teams' ? await team(t.api) : await org(t.api) }),
        call: (api, made) => api.post(`/v1/${kind}/${made.group}/members`, { user_id: bystander.id }),
      },
      { route: `GET /v1/${kind}/{id}/members`, allowed: ['admin', member], call: (api) => api.get(`/v1/${kind}/${group()}/members`) },
      {
        route: `DELETE /v1/${kind}/{id}/members/{userID}`,
        allowed: ADMIN,
        fresh: () => freshGroup(kind),
        call: (api, made) => api.request('DELETE', `/v1/${kind}/${made.group}/members/${bystander.id}`),
      },
    ];
  }),
  // Grants.
  { route: 'POST /v1/grants (on the template)', allowed: MANAGERS, call: (api) => api.post('/v1/grants', { object: shared.template, permission: 'read', user_id: bystander.id }) },
  { route: 'POST /v1/grants (on queue:gpu)', allowed: MANAGERS, call: (api) => api.post('/v1/grants', { object: 'queue:gpu', permission: 'read', user_id: bystander.id }) },
  { route: 'GET /v1/grants (a grant on the template listed)', allowed: MANAGERS, call: (api) => api.get('/v1/grants'), shows: lists('grants', () => shared.grant) },
  {
    route: 'DELETE /v1/grants/{id}',
    allowed: MANAGERS,
    fresh: async () => ({ grant: await grant(t.api, shared.template, 'use', { user_id: bystander.id }) }),
    call: (api, made) => api.request('DELETE', `/v1/grants/${made.grant}`),
  },
  // Credentials follow the same rule as templates; naming one (a template, a run) needs use on it; custom types are admin only.
  { route: 'GET /v1/credentials (the credential listed)', allowed: READERS, call: (api) => api.get('/v1/credentials'), shows: lists('credentials', () => shared.credential) },
  { route: 'GET /v1/credentials/{id}', allowed: READERS, call: (api) => api.get(`/v1/credentials/${shared.credential}`) },
  { route: 'POST /v1/credentials', allowed: OPERATORS, call: (api) => api.post('/v1/credentials', { name: `made-${Math.random()}`, kind: 'oidc_token', inputs: { audience: 'sts' } }) },
  {
    route: 'PUT /v1/credentials/{id}',
    allowed: MANAGERS,
    fresh: async () => ({ credential: await credentialSubject() }),
    call: async (api, made) => {
      const read = (await t.api.get(`/v1/credentials/${made.credential}`)).body;
      return api.request('PUT', `/v1/credentials/${made.credential}`, { body: { ...read, description: 'edited' } });
    },
  },
  { route: 'DELETE /v1/credentials/{id}', allowed: MANAGERS, fresh: async () => ({ credential: await credentialSubject() }), call: (api, made) => api.request('DELETE', `/v1/credentials/${made.credential}`) },
  { route: 'POST /v1/templates (naming the credential)', allowed: USERS, call: (api) => api.post('/v1/templates', { name: `made-${Math.random()}`, tool: 'bash', command: 'true', credentials: [shared.credential] }) },
  { route: 'POST /v1/runs (naming the credential)', allowed: USERS, call: (api) => api.post('/v1/runs', { tool: 'bash', command: 'true', credentials: [shared.credential] }) },
  { route: 'GET /v1/credential-kinds', allowed: ANYONE, call: (api) => api.get('/v1/credential-kinds') },
  { route: 'POST /v1/credential-types', allowed: ADMIN, call: (api) => api.post('/v1/credential-types', { name: `made-${Math.random()}`, fields: [{ id: 'token', secret: true }] }) },
  { route: 'GET /v1/credential-types', allowed: ADMIN, call: (api) => api.get('/v1/credential-types') },
  // What no grant reaches: accounts, tokens, the audit trail (a manage grant never delegates /v1/users).
  { route: 'GET /v1/users', allowed: ADMIN, call: (api) => api.get('/v1/users') },
  { route: 'POST /v1/users', allowed: ADMIN, call: (api) => api.post('/v1/users', { username: `made-${Math.random()}`, role: 'viewer' }) },
  { route: 'PUT /v1/users/{id}', allowed: ADMIN, call: (api) => api.request('PUT', `/v1/users/${bystander.id}`, { body: { role: 'viewer' } }) },
  { route: 'GET /v1/tokens', allowed: ADMIN, call: (api) => api.get('/v1/tokens') },
  { route: 'GET /v1/audit', allowed: ADMIN, call: (api) => api.get('/v1/audit?limit=1') },
  { route: 'GET /v1/audit/register', allowed: ADMIN, call: (api) => api.get('/v1/audit/register?from=2026-01-01&to=2026-01-02') },
  { route: 'GET /v1/policies', allowed: OPERATORS, call: (api) => api.get('/v1/policies') },
  { route: 'POST /v1/policies', allowed: ADMIN, call: (api) => api.post('/v1/policies', { effect: 'deny', command_contains: `never-${Math.random()}` }) },
  { route: 'POST /v1/import/{format}', allowed: ADMIN, call: (api) => api.post(`/v1/import/manifest?apply=true&name=fleet-${Math.random()}`, [{ certname: 'imported.example.net' }]) },
  { route: 'POST /v1/tokens (its own)', allowed: ANYONE, call: (api) => api.post('/v1/tokens', { name: 'own', kind: 'agent' }) },
  { route: 'GET /v1/workers', allowed: ANYONE, call: (api) => api.get('/v1/workers') },
];

/** Every table a call could write, and the audit chain's length. */
const TABLES = ['accounts', 'tokens', 'runs', 'run_events', 'stream_tickets', 'rate_limit_windows', 'templates', 'policies', 'decision_records', 'teams', 'team_members', 'orgs', 'org_members', 'grants', 'schedules', 'triggers', 'credentials', 'credential_types'];

/** Every table's row count, read in one statement (one snapshot), and the audit chain's length. */
async function writes(): Promise<Record<string, number>> {
  const columns = TABLES.map((table) => `(SELECT count(*)::int FROM ${table}) AS ${table}`).join(', ');
  const [counts] = await sql.unsafe<Record<string, number>[]>(`SELECT ${columns}`);
  return { ...counts, audit: (await t.api.get('/v1/audit?limit=1')).body.total };
}

/** A refusal: a role or grant too low (403), an object the caller may not see (404, or 400 naming a body's `object` or `template_id`). */
const refused = (res: ApiResponse) => res.status === 403 || res.status === 404 || (res.status === 400 && ['object', 'template_id', 'credentials[0]'].includes(res.body?.field));

beforeAll(async () => {
  const license = await testLicense('team');
  t = await startTestServer(
    // Triggers seal their signing secrets under the install key.
    { CAIRN_LICENSE_FILE: license.file, SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'), SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url') },
    { licenseKeys: [license.publicJwk] },
  );
  sql = connectDatabase(t.databaseUrl, { max: 2 });
  expect((await t.api.post('/v1/policies', { name: 'hold marked runs', effect: 'require_approval', command_contains: 'HOLD-ME' })).status).toBe(201);

  owner = await person(t.api, 'operator', 'user', 'owner');
  bystander = await person(t.api, 'viewer', 'user', 'bystander');
  const operator = await person(t.api, 'operator');
  const viewer = await person(t.api, 'viewer');
  const agentAccount = await person(t.api, 'operator', 'user', 'agent-account');
  const use = await person(t.api, 'operator', 'user', 'use');
  const manage = await person(t.api, 'operator', 'user', 'manage');
  const orgAdminViewer = await person(t.api, 'viewer', 'user', 'org-admin');
  const teamMember = await person(t.api, 'operator', 'user', 'team-member');
  Object.assign(tokens, {
    admin: t.adminToken,
    operator: operator.token,
    viewer: viewer.token,
    agent: await tokenOf(t.api, agentAccount, 'agent'),
    use: use.token,
    manage: manage.token,
    orgAdminViewer: orgAdminViewer.token,
    teamMember: teamMember.token,
  });
  Object.assign(shared, {
    useAccount: use.id,
    agentAccount: agentAccount.id,
    manageAccount: manage.id,
    team: await team(t.api, [teamMember]),
    org: await org(t.api, [[orgAdminViewer, 'admin'], [owner, 'member']]),
  });
  for (const [account, permission] of [
    [use.id, 'use'],
    [agentAccount.id, 'use'],
    [manage.id, 'manage'],
  ] as const) {
    await grant(t.api, 'queue:gpu', permission, { user_id: account });
  }
  await grant(t.api, 'queue:gpu', 'manage', { team_id: shared.team });

  // A split whose second shard fails, so it can be retried; a template whose runs are held; a workflow waiting at an approval step.
  shared.template = await subject({ command: 'exit "$CAIRN_SHARD_INDEX"', shards: 2 });
  shared.held = await subject({ command: 'echo HOLD-ME' });
  const split = await owned().post(`/v1/templates/${shared.template}/launch`, {});
  shared.run = split.body.id;
  const plain = await owned().post('/v1/runs', { tool: 'bash', command: 'echo plain' });
  shared.plain = plain.body.id;
  await waitForRunEnd(t.api, shared.run);
  await waitForRunEnd(t.api, shared.plain);
  const workflow = await subject({ tool: undefined, command: undefined, steps: [{ name: 'gate', type: 'approval' }] });
  const waiting = await owned().post(`/v1/templates/${workflow}/launch`, {});
  shared.workflowRun = waiting.body.id;
  for (const deadline = Date.now() + 30_000; !shared.step && Date.now() < deadline; ) {
    const step = (await t.api.get('/v1/approvals')).body.approvals.find((a: any) => a.workflow_run_id === waiting.body.id);
    if (step) shared.step = step.id;
    else await new Promise((r) => setTimeout(r, 100));
  }
  shared.grant = await grant(t.api, shared.template, 'read', { user_id: bystander.id });
  shared.credential = await credentialSubject();
});

afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

test('the matrix names every caller of every row, and the subjects exist', () => {
  for (const row of ROWS) for (const actor of row.allowed) expect(ACTORS).toContain(actor);
  expect(shared.step).toBeDefined();
});

describe.each(ROWS.map((row) => [row.route, row] as const))('%s', (_route, row) => {
  test.each(ACTORS.map((actor) => [actor, row.allowed.includes(actor) ? 'allowed' : 'refused'] as const))('%s: %s', async (actor, verdict) => {
    const made = row.fresh ? await row.fresh() : {};
    const api = t.as(tokens[actor]);
    if (verdict === 'allowed') {
      const res = await row.call(api, made);
      const ok = row.shows ? row.shows(res, made) : res.status >= 200 && res.status < 300;
      expect([res.status, ok, ok ? '' : res.text.slice(0, 300)]).toEqual([res.status, true, '']);
      return;
    }
    // Nothing else may write while the call is counted: runs made by earlier calls end first.
    await quiet(t.api, [shared.workflowRun]);
    const before = await writes();
    const res = await row.call(api, made);
    const after = await writes();
    if (row.shows) expect([res.status, row.shows(res, made)]).toEqual([200, false]);
    else expect([res.status, refused(res), res.text.slice(0, 300)]).toEqual([res.status, true, res.text.slice(0, 300)]);
    expect(after).toEqual(before);
  });
});
