import { loadConfig } from '../../core/config';
import { createLogger, type RunningServer } from '../../cli/serve';
import { opensCommitment } from '../../core/audit/reason-commitment';
import { Faults } from '../../services/context';
import { connectDatabase, type Sql } from '../../store/db';
import { apiClient, type ApiClient } from '../support/http';
import { startServerInProcess, startTestServer, testSettings, waitForRun, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
let sql: Sql;
let operator: ApiClient;
let operatorToken: string;
let otherOperator: ApiClient;

async function tokenFor(username: string, role: string, kind: 'user' | 'agent' = 'user'): Promise<string> {
  const user = await t.api.post('/v1/users', { username, role });
  if (user.status !== 201 && user.status !== 409) throw new Error(`user create: ${user.status} ${user.text}`);
  const token = await t.api.post('/v1/tokens', { name: `${username} ${kind} token`, username, kind });
  if (token.status !== 201) throw new Error(`token create: ${token.status} ${token.text}`);
  return token.body.token;
}

/** Replaces every stored policy with this one (Community holds one). */
async function onlyPolicy(policy: Record<string, unknown>): Promise<string> {
  for (const existing of (await t.api.get('/v1/policies')).body.policies) {
    expect((await t.api.request('DELETE', `/v1/policies/${existing.id}`)).status).toBe(204);
  }
  const created = await t.api.post('/v1/policies', policy);
  expect(created.status).toBe(201);
  return created.body.id;
}

async function heldRun(client: ApiClient, command = 'echo cleaning; rm -rf ./nothing-here') {
  const { status, body } = await client.post('/v1/runs', { tool: 'bash', command });
  expect(status).toBe(201);
  expect(body.status).toBe('held');
  return body;
}

async function decisionCount(runId: string): Promise<number> {
  const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM decision_records WHERE run_id = ${runId} AND kind <> 'correction'`;
  return n;
}

beforeAll(async () => {
  // Sweeps every 250 ms rather than every 2 s, for the test of a hand-off the sweeper repairs.
  t = await startTestServer({}, { sweepIntervalMs: 250 });
  sql = connectDatabase(t.databaseUrl, { max: 2 });
  operatorToken = await tokenFor('olivia', 'operator');
  operator = t.as(operatorToken);
  otherOperator = t.as(await tokenFor('oscar', 'operator'));
  await onlyPolicy({ name: 'destructive deletes', command_contains: 'rm -rf' });
});
afterAll(async () => {
  await sql?.end();
  await t?.stop();
});

test('a matching run is held before the submission answers, then approved with a reason and run', async () => {
  const run = await heldRun(operator);
  expect(run.blocker).toBe('approval_needed');
  expect(run.hold).toMatchObject({ agent_hold: false, require_reason: false });
  expect(run.state_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  const events = (await t.api.get(`/v1/runs/${run.id}/events`)).body.events.map((e: any) => e.event);
  expect(events).toEqual(['run.created', 'run.held']);
  // Held means held: nothing starts it while it waits.
  await new Promise((r) => setTimeout(r, 700));
  expect((await t.api.get(`/v1/runs/${run.id}`)).body.status).toBe('held');
  expect((await t.api.get('/v1/runs?status=held')).body.runs.map((r: any) => r.id)).toContain(run.id);

  const reason = 'change window CHG-1042 approved by the on-call lead';
  const approved = await t.api.post(`/v1/runs/${run.id}/approve`, { reason, state_digest: run.state_digest });
  expect(approved.status).toBe(200);
  expect(approved.body.run.status).toBe('pending');
  expect(approved.body.decision).toMatchObject({ kind: 'approve', actor: 'admin', reason });
  const ended = await waitForRunEnd(t.api, run.id);
  expect(ended.status).toBe('succeeded');
  expect(ended.blocker).toBeNull();
  expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text).toBe('cleaning\n');

  // The decision's chain entry is the decision: same id, committing to the reason without holding it.
  const decision = approved.body.decision;
  const [entry] = await sql`SELECT id, body, fingerprint FROM audit_entries WHERE id = ${decision.id}`;
  expect(entry.body).toMatchObject({ kind: 'run.decision', decision: 'approve', decision_id: decision.id, commitment: decision.commitment });
  expect(opensCommitment(entry.body.commitment, { event: decision.id, random: decision.random, reason })).toBe(true);
  const leaks = await sql`SELECT seq FROM audit_entries WHERE body::text LIKE ${'%CHG-1042%'} OR fingerprint LIKE ${'%CHG-1042%'}`;
  expect(leaks).toHaveLength(0);
  const runEvents = await sql`SELECT kind FROM run_events WHERE run_id = ${run.id} AND body::text LIKE ${'%CHG-1042%'}`;
  expect(runEvents).toHaveLength(0);
});

test('a rejected run ends rejected with the fixed error, never the reason, and cannot be decided again', async () => {
  const run = await heldRun(operator);
  const rejected = await t.api.post(`/v1/runs/${run.id}/reject`, { reason: 'not during the freeze' });
  expect(rejected.status).toBe(200);
  expect(rejected.body.run).toMatchObject({ status: 'rejected', error: 'rejected by an approver' });
  expect(rejected.body.run.finished_at).not.toBeNull();
  const kinds = (await t.api.get(`/v1/runs/${run.id}/events`)).body.events.map((e: any) => e.event);
  expect(kinds).toEqual(['run.created', 'run.held', 'run.rejected', 'run.finished']);

  const again = await t.api.post(`/v1/runs/${run.id}/approve`, {});
  expect(again.status).toBe(409);
  expect(again.body.error).toMatch(/no longer waiting/);
  expect((await t.api.post(`/v1/runs/${run.id}/reject`, {})).status).toBe(409);
  expect(await decisionCount(run.id)).toBe(1);
});

test('a canceled held run is settled: a later approve answers 409 and records nothing', async () => {
  const run = await heldRun(operator);
  const canceled = await operator.post(`/v1/runs/${run.id}/cancel`);
  expect(canceled.status).toBe(200);
  expect(canceled.body.status).toBe('canceled');
  expect((await t.api.post(`/v1/runs/${run.id}/approve`, {})).status).toBe(409);
  expect(await decisionCount(run.id)).toBe(0);
});

test('two servers approving the same runs at once record exactly one decision each', async () => {
  let second: RunningServer | undefined;
  try {
    second = await startServerInProcess(loadConfig({}, testSettings(t.databaseUrl)), createLogger({ logLevel: 'silent' }));
    const other = apiClient(second.url, t.adminToken);
    for (let i = 0; i < 5; i++) {
      const run = await heldRun(operator);
      const answers = await Promise.all([
        t.api.post(`/v1/runs/${run.id}/approve`, { reason: 'first server' }),
        other.post(`/v1/runs/${run.id}/${i % 2 ? 'reject' : 'approve'}`, { reason: 'second server' }),
      ]);
      expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
      expect(await decisionCount(run.id)).toBe(1);
      const entries = await sql`SELECT count(*)::int AS n FROM audit_entries WHERE run_id = ${run.id} AND body->>'kind' = 'run.decision'`;
      expect(entries[0].n).toBe(1);
    }
  } finally {
    await second?.stop();
  }
});

test('an agent is never an approver, and its own runs are held by the built-in hold', async () => {
  const agentToken = await tokenFor('deploy-bot', 'admin', 'agent');
  const agent = t.as(agentToken);
  const { body: run } = await agent.post('/v1/runs', { tool: 'bash', command: 'echo from an agent' });
  expect(run.status).toBe('held');
  expect(run.hold).toMatchObject({ agent_hold: true, policies: [] });

  const refused = await agent.post(`/v1/runs/${run.id}/approve`, { reason: 'self approval' });
  expect(refused.status).toBe(403);
  expect(refused.body.error).toMatch(/agent never approves/);
  expect((await agent.post(`/v1/runs/${run.id}/reject`, {})).status).toBe(403);
  expect(await decisionCount(run.id)).toBe(0);

  expect((await t.api.post(`/v1/runs/${run.id}/approve`, {})).status).toBe(200);
  expect((await waitForRunEnd(t.api, run.id)).status).toBe('succeeded');
  const decisions = await t.api.get(`/v1/runs/${run.id}/decisions`);
  expect(decisions.body.separation_of_duties).toMatchObject({ requester: 'deploy-bot', approver: 'admin', satisfied: true, held_by_agent_hold: true });

  // An exemption lets the agent's matching runs past the built-in hold, and only those.
  await onlyPolicy({ effect: 'exempt', tool: 'bash', command_contains: 'echo status', account: 'deploy-bot', actor: 'deploy-bot agent token' });
  try {
    const exempt = await agent.post('/v1/runs', { tool: 'bash', command: 'echo status ok' });
    expect(exempt.body.status).toBe('pending');
    expect((await waitForRunEnd(t.api, exempt.body.id)).status).toBe('succeeded');
    expect((await agent.post('/v1/runs', { tool: 'bash', command: 'echo other' })).body.status).toBe('held');
    // A person's runs are not held by the agent hold.
    expect((await operator.post('/v1/runs', { tool: 'bash', command: 'echo other' })).body.status).toBe('pending');
  } finally {
    await onlyPolicy({ name: 'destructive deletes', command_contains: 'rm -rf' });
  }
});

test('a reason the masker changes answers 409 with the kept text and goes through when confirmed', async () => {
  const run = await heldRun(operator);
  const reason = 'ok to run, db password=Hunter2Secret was rotated';
  const first = await t.api.post(`/v1/runs/${run.id}/approve`, { reason });
  expect(first.status).toBe(409);
  expect(first.body.masked_reason).toBe('ok to run, db password=[masked] was rotated');
  expect(await decisionCount(run.id)).toBe(0);
  const wrong = await t.api.post(`/v1/runs/${run.id}/approve`, { reason, masked_reason: 'something else' });
  expect(wrong.status).toBe(409);

  const confirmed = await t.api.post(`/v1/runs/${run.id}/approve`, { reason, masked_reason: first.body.masked_reason });
  expect(confirmed.status).toBe(200);
  expect(confirmed.body.decision.reason).toBe(first.body.masked_reason);
  const stored = await sql`SELECT reason FROM decision_records WHERE run_id = ${run.id}`;
  expect(stored[0].reason).not.toContain('Hunter2Secret');
  const leaks = await sql`SELECT seq FROM audit_entries WHERE body::text LIKE '%Hunter2Secret%'`;
  expect(leaks).toHaveLength(0);
});

test('bounds and bindings: a stale state_digest, a long reason, a required reason, a non-admin approver', async () => {
  const run = await heldRun(operator);
  const stale = await t.api.post(`/v1/runs/${run.id}/approve`, { state_digest: 'sha256:' + '0'.repeat(64) });
  expect(stale.status).toBe(409);
  expect(stale.body.state_digest).toBe(run.state_digest);
  const long = await t.api.post(`/v1/runs/${run.id}/approve`, { reason: 'x'.repeat(1001) });
  expect(long.status).toBe(400);
  expect(long.body.error).toMatch(/reason must be at most 1000 characters/);
  expect((await t.api.post(`/v1/runs/${run.id}/approve`, { reason: 'x'.repeat(1000) })).status).toBe(200);

  const byOperator = await heldRun(operator);
  const refused = await otherOperator.post(`/v1/runs/${byOperator.id}/approve`, {});
  expect(refused.status).toBe(403);
  expect(refused.body.error).toMatch(/admin role/);
  expect((await t.api.post(`/v1/runs/no-such-run/approve`, {})).status).toBe(404);

  await onlyPolicy({ command_contains: 'rm -rf', require_reason: true });
  try {
    const needsReason = await heldRun(operator);
    expect(needsReason.hold.require_reason).toBe(true);
    const bare = await t.api.post(`/v1/runs/${needsReason.id}/approve`, {});
    expect(bare.status).toBe(400);
    expect(bare.body).toMatchObject({ field: 'reason' });
    expect((await t.api.post(`/v1/runs/${needsReason.id}/reject`, { reason: 'no' })).status).toBe(200);
  } finally {
    await onlyPolicy({ name: 'destructive deletes', command_contains: 'rm -rf' });
  }
});

test('decision records: the requester reads them, corrections append, redactions remove the text and keep the commitment', async () => {
  const run = await heldRun(operator);
  const { body: approved } = await t.api.post(`/v1/runs/${run.id}/approve`, { reason: 'approved for Alice Example' });
  const decisionId = approved.decision.id;

  expect((await operator.get(`/v1/runs/${run.id}/decisions`)).status).toBe(200);
  // Another operator may not read a plain run it did not ask for, so it is not found (docs/api.md, Access).
  expect((await otherOperator.get(`/v1/runs/${run.id}/decisions`)).status).toBe(404);

  expect((await operator.post(`/v1/runs/${run.id}/decisions/${decisionId}/corrections`, { text: 'x' })).status).toBe(403);
  const correction = await t.api.post(`/v1/runs/${run.id}/decisions/${decisionId}/corrections`, { text: 'the ticket was CHG-2001' });
  expect(correction.status).toBe(201);
  expect(correction.body).toMatchObject({ kind: 'correction', decision_id: decisionId, reason: 'the ticket was CHG-2001' });
  expect(opensCommitment(correction.body.commitment, { event: correction.body.id, random: correction.body.random, reason: 'the ticket was CHG-2001' })).toBe(true);
  expect((await t.api.post(`/v1/runs/${run.id}/decisions/nope/corrections`, { text: 'x' })).status).toBe(404);

  const redacted = await t.api.post(`/v1/runs/${run.id}/decisions/${decisionId}/redact`, { category: 'personal_data' });
  expect(redacted.status).toBe(200);
  expect(redacted.body).toMatchObject({ reason: null, random: null, commitment: approved.decision.commitment });
  expect(redacted.body.redaction).toMatchObject({ by: 'admin', category: 'personal_data' });
  expect((await t.api.post(`/v1/runs/${run.id}/decisions/${decisionId}/redact`, { category: 'other' })).status).toBe(409);
  expect((await t.api.post(`/v1/runs/${run.id}/decisions/${decisionId}/redact`, { category: 'gossip' })).status).toBe(400);

  const records = (await operator.get(`/v1/runs/${run.id}/decisions`)).body.decisions;
  expect(records.map((r: any) => r.kind)).toEqual(['approve', 'correction']);
  expect(records[0].reason).toBeNull();
  const stored = await sql`SELECT count(*)::int AS n FROM decision_records WHERE reason LIKE '%Alice%'`;
  expect(stored[0].n).toBe(0);
  const [entry] = await sql`SELECT actor, body FROM audit_entries WHERE body->>'kind' = 'run.redaction' AND run_id = ${run.id}`;
  expect(entry).toMatchObject({ actor: 'admin', body: { record_id: decisionId, category: 'personal_data', commitment: approved.decision.commitment } });
});

test('exclude_dry_run lets a change-free dry run through, which parses the script and runs none of it', async () => {
  await onlyPolicy({ command_contains: 'rm -rf', exclude_dry_run: true });
  try {
    const command = 'echo the script ran; rm -rf ./nothing-here';
    const dry = await operator.post('/v1/runs', { tool: 'bash', command, dry_run: true });
    expect(dry.body).toMatchObject({ status: 'pending', dry_run: true });
    expect((await waitForRunEnd(t.api, dry.body.id)).status).toBe('succeeded');
    expect((await t.api.get(`/v1/runs/${dry.body.id}/logs`)).text).not.toContain('the script ran');
    const broken = await operator.post('/v1/runs', { tool: 'bash', command: 'if then fi', dry_run: true });
    expect((await waitForRunEnd(t.api, broken.body.id)).status).toBe('failed');
    // The real run is still held.
    expect((await operator.post('/v1/runs', { tool: 'bash', command })).body.status).toBe('held');
  } finally {
    await onlyPolicy({ name: 'destructive deletes', command_contains: 'rm -rf' });
  }
});

test('an approved run whose hand-off to Temporal failed is started by the sweeper', async () => {
  const run = await heldRun(operator);
  t.server.context.faults = new Faults(['workflow-start-once']);
  expect((await t.api.post(`/v1/runs/${run.id}/approve`, {})).status).toBe(200);
  const ended = await waitForRun(t.api, run.id, (r) => r.status === 'succeeded', 30_000);
  expect(ended.status).toBe('succeeded');
});
