import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createLogger } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { processTable } from '../../embedded/process-cpu';
import { processAlive } from '../../embedded/state';
import { connectDatabase } from '../../store/db';
import { createTestDatabase } from '../support/database';
import { startCairn } from '../support/processes';
import { startServerInProcess, startTestServer, testSettings, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';
import type { PolicyFileSet } from '../../services/runs/policy-file';

/**
 * Policy-language policies (spec part A 2.10, 4.13): a `--policy-file` of Rego modules evaluated by
 * a real Open Policy Agent (built from its Go module into the machine cache on first use), on one
 * real server. Each policy reacts to a marker in the run's command, so each test meets one.
 */

const dir = tempDir('cairn-policy-file');
const write = (name: string, text: string) => {
  writeFileSync(path.join(dir, name), text);
  return path.join(dir, name);
};

write(
  'hold.rego',
  `package cairn.prod

import data.cairn.prod.lib

hold contains msg if {
  contains(input.command, "HOLD-ME")
  msg := sprintf("%s asked %s to run a marked command", [input.account, lib.tool_name])
}
`,
);
write('lib.rego', 'package cairn.prod.lib\n\ntool_name := input.tool\n');
// to_number of a command that is not a number is a builtin error: the policy errs.
write('err.rego', 'package cairn.erring\n\nhold if {\n  contains(input.command, "ERR-ME")\n  to_number(input.command) > 0\n}\n');
// Ten billion steps: never done within its 200 ms.
write(
  'slow.rego',
  `package cairn.slow

hold if {
  contains(input.command, "SLOW-ME")
  some i in numbers.range(1, 100000)
  some j in numbers.range(1, 100000)
  i * j == -1
}
`,
);
// Rego v0 syntax; warnings noted, never holding.
write('note.rego', 'package cairn.noting\n\nwarn["the command asks to be noted"] { contains(input.command, "NOTE-ME") }\n');

const policyFile = write(
  'policies.yaml',
  `policies:
  - name: marked-commands
    modules: [hold.rego, lib.rego]
    require_reason: true
  - name: erring
    modules: [err.rego]
  - name: slow
    modules: [slow.rego]
    timeout: 200ms
  - name: noting
    modules: [note.rego]
    syntax: v0
    warn: note
`,
);

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ CAIRN_POLICY_FILE: policyFile });
}, 600_000);
afterAll(async () => {
  await t?.stop();
});

const submit = async (command: string) => {
  const res = await t.api.post('/v1/runs', { tool: 'bash', command });
  if (res.status !== 201) throw new Error(`submitting failed: ${res.status} ${res.text}`);
  return res.body;
};
const attentionItem = async (runId: string) => (await t.api.get('/v1/attention')).body.items.find((i: any) => i.id === runId);
const byName = async (name: string) => (await t.api.get('/v1/policies')).body.policies.find((p: any) => p.name === name);

test('GET /v1/policies lists the file policies with their rego, and the API cannot change them', async () => {
  const { body } = await t.api.get('/v1/policies');
  expect(body.policies.map((p: any) => p.name)).toEqual(['marked-commands', 'erring', 'slow', 'noting']);
  const marked = body.policies[0];
  expect(marked).toMatchObject({ effect: 'require_approval', require_reason: true, created_by: 'cairn' });
  expect(marked.rego).toEqual({
    package: 'cairn.prod',
    syntax: 'v1',
    bundle_sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    modules: [
      { path: 'hold.rego', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) },
      { path: 'lib.rego', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) },
    ],
    warn: 'hold',
    timeout: 1,
  });
  expect(body.policies[2].rego).toMatchObject({ package: 'cairn.slow', timeout: 0.2, warn: 'hold' });
  expect(body.policies[3].rego).toMatchObject({ package: 'cairn.noting', syntax: 'v0', warn: 'note' });

  const put = await t.api.request('PUT', `/v1/policies/${marked.id}`, { body: { name: 'x', tool: 'bash' } });
  expect(put.status).toBe(409);
  expect(put.body.error).toMatch(/comes from the policy file/);
  expect((await t.api.request('DELETE', `/v1/policies/${marked.id}`)).status).toBe(409);
  const written = await t.api.post('/v1/policies', { name: 'mine', rego: { package: 'x' } });
  expect(written.status).toBe(400);
  expect(written.body.field).toBe('rego');
});

test('a matching Rego policy holds the run like any approval policy, with its reasons on the attention item', async () => {
  const run = await submit('echo HOLD-ME');
  const policy = await byName('marked-commands');
  expect(run.status).toBe('held');
  expect(run.hold).toMatchObject({ policies: [policy.id], agent_hold: false, require_reason: true });
  expect(run.hold.rego).toEqual([{ policy: policy.id, name: 'marked-commands', outcome: 'hold', reasons: ['admin asked bash to run a marked command'] }]);
  const item = await attentionItem(run.id);
  expect(item).toMatchObject({ blocker: 'approval_needed', rego: run.hold.rego });
  expect(item.reason).toMatch(/policy marked-commands holds it \(admin asked bash to run a marked command\)/);
  // Approving it (with the reason the policy requires) releases it, as for a stored policy.
  const approved = await t.api.post(`/v1/runs/${run.id}/approve`, { reason: 'checked', state_digest: run.state_digest });
  expect(approved.status).toBe(200);
  expect((await waitForRunEnd(t.api, run.id)).status).toBe('succeeded');
});

test('a Rego policy that errs holds the run, naming the error', async () => {
  const run = await submit('echo ERR-ME');
  expect(run.status).toBe('held');
  expect(run.hold.rego).toEqual([
    { policy: (await byName('erring')).id, name: 'erring', outcome: 'error', reasons: [expect.stringMatching(/^policy erring could not decide: .*to_number/)] },
  ]);
  expect((await attentionItem(run.id)).reason).toMatch(/policy erring could not decide: .*to_number.*\(a policy that errs holds the run\)/);
});

test('a Rego policy that times out holds the run, within its timeout', async () => {
  const started = Date.now();
  const run = await submit('echo SLOW-ME');
  const took = Date.now() - started;
  expect(run.status).toBe('held');
  expect(run.hold.rego).toEqual([{ policy: (await byName('slow')).id, name: 'slow', outcome: 'timeout', reasons: ['policy slow could not decide: no decision within 200 ms'] }]);
  expect((await attentionItem(run.id)).reason).toMatch(/times out/);
  expect(took).toBeLessThan(5000);
});

test('a run no policy matches goes through; a noting policy records its warning without holding', async () => {
  const plain = await submit('echo plain');
  expect(plain.status).not.toBe('held');
  expect((await waitForRunEnd(t.api, plain.id)).status).toBe('succeeded');

  const noted = await submit('echo NOTE-ME');
  expect(noted.status).not.toBe('held');
  expect((await waitForRunEnd(t.api, noted.id)).status).toBe('succeeded');
  const sql = connectDatabase(t.databaseUrl, { max: 1 });
  try {
    const [entry] = await sql<{ body: any }[]>`SELECT body FROM audit_entries WHERE run_id = ${noted.id} AND body->>'kind' = 'run.submitted'`;
    expect(entry.body.policy_notes).toEqual([{ policy: (await byName('noting')).id, name: 'noting', notes: ['the command asks to be noted'] }]);
  } finally {
    await sql.end();
  }
});

test('a bad policy file stops the start, naming the file and what is wrong', async () => {
  const start = async (file: string) => {
    const config = loadConfig({}, testSettings(t.databaseUrl, { CAIRN_POLICY_FILE: file }));
    const server = await startServerInProcess(config, createLogger(config));
    await server.stop();
  };
  const unknown = write('unknown.yaml', 'policies:\n  - name: a\n    modules: [hold.rego]\n    effect: deny\n');
  await expect(start(unknown)).rejects.toThrow(`--policy-file (CAIRN_POLICY_FILE): ${unknown}: policies[0]: unknown field "effect"`);
  const badWarn = write('bad-warn.yaml', 'policies:\n  - name: a\n    modules: [hold.rego]\n    warn: loud\n');
  await expect(start(badWarn)).rejects.toThrow(`${badWarn}: policies[0].warn: expected hold or note`);
  write('broken.rego', 'package cairn.broken\n\nhold if {\n  input.tool ==\n}\n');
  const broken = write('broken.yaml', 'policies:\n  - name: broken\n    modules: [broken.rego]\n');
  await expect(start(broken)).rejects.toThrow(new RegExp(`${broken}: policies\\[0\\]\\.modules\\[0\\]: broken\\.rego is not Rego v1: .*rego_parse_error`));
  write('nothing.rego', 'package cairn.nothing\n\nallow := true\n');
  const nothing = write('nothing.yaml', 'policies:\n  - name: nothing\n    modules: [nothing.rego]\n');
  await expect(start(nothing)).rejects.toThrow(/policies\[0\] \(nothing\): package cairn.nothing of its first module defines neither a hold nor a warn rule/);
  // The running server's policies are untouched by the refused starts.
  expect((await t.api.get('/v1/policies')).body.policies).toHaveLength(4);
});

test('an OPA that dies holds what the policies judge until it is started again, then judges as before', async () => {
  const set = t.server.context.regoPolicies as PolicyFileSet;
  const pid = set.opaPid()!;
  process.kill(pid, 'SIGKILL');
  // Judged once OPA is gone, not while its socket is still closing (a reset mid-request).
  while (processAlive(pid)) await new Promise((r) => setTimeout(r, 20));
  const held = await submit('echo while-opa-is-down');
  expect(held.status).toBe('held');
  expect(held.hold.rego.map((r: any) => r.outcome)).toEqual(['error', 'error', 'error', 'error']);
  expect(held.hold.rego[0].reasons[0]).toMatch(/could not decide: (opa exited \(SIGKILL\)|connect ECONNREFUSED)/);
  const deadline = Date.now() + 30_000;
  while (set.opaPid() === pid || (await submit('echo after-restart')).status === 'held') {
    if (Date.now() > deadline) throw new Error('opa was not started again within 30 s');
    await new Promise((r) => setTimeout(r, 200));
  }
  expect((await submit('echo HOLD-ME again')).hold.rego[0].outcome).toBe('hold');
});

test('a server killed outright takes its OPA with it', async () => {
  const database = await createTestDatabase();
  const serve = startCairn(['serve'], { ...process.env, ...testSettings(database.url, { CAIRN_POLICY_FILE: policyFile, CAIRN_DATA_DIR: tempDir('cairn-opa-bound') }) });
  try {
    await serve.waitFor(/serving at/, 300_000);
    const [opa] = [...processTable()].filter(([, p]) => p.ppid === serve.child.pid && p.command === 'opa').map(([pid]) => pid);
    expect(opa).toBeGreaterThan(0);
    serve.child.kill('SIGKILL');
    await serve.exited;
    const deadline = Date.now() + 10_000;
    while (processAlive(opa) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(processAlive(opa)).toBe(false);
  } finally {
    await serve.stop();
    await database.drop();
  }
}, 300_000);
