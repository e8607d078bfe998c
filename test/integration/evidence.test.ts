import { opensCommitment } from '../../core/audit/reason-commitment';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

let users = 0;

/** A fresh account in the role and a user token for it, minted by the admin. */
async function tokenFor(role: 'admin' | 'operator' | 'viewer') {
  const username = `evidence-${role}-${++users}-${Date.now()}`;
  const user = await t.api.post('/v1/users', { username, role });
  if (user.status !== 201) throw new Error(`creating ${username} failed: ${user.status} ${user.text}`);
  const minted = await t.api.post('/v1/tokens', { name: 'test', username });
  if (minted.status !== 201) throw new Error(`minting for ${username} failed: ${minted.status} ${minted.text}`);
  return { id: user.body.id as string, username, token: minted.body.token as string };
}

/**
 * A launch of a template of `owner`'s that `reader` may read, as it stands when launched: below
 * admin, a run is read by its requester and by whoever may read its template (docs/api.md, Access).
 */
async function launchReadableBy(owner: string, reader: string, command: string) {
  const template = await t.as(owner).post('/v1/templates', { name: `evidence-${++users}-${Date.now()}`, tool: 'bash', command });
  expect(template.status).toBe(201);
  expect((await t.as(owner).post('/v1/grants', { object: template.body.id, permission: 'read', user_id: reader })).status).toBe(201);
  const launched = await t.as(owner).post(`/v1/templates/${template.body.id}/launch`, {});
  expect(launched.status).toBe(201);
  return launched.body;
}

async function finishedRun(command: string) {
  const { status, body } = await t.api.post('/v1/runs', { tool: 'bash', command });
  expect(status).toBe(201);
  return waitForRunEnd(t.api, body.id);
}

/** Text of an HTML document with its tags dropped and the five escapes undone, for comparing content. */
const unescape = (html: string) =>
  html.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');

test('the HTML and JSON dossiers carry the same run, log and events, with the log escaped in the HTML', async () => {
  const run = await finishedRun(`echo; echo '<script>alert("owned")</script>'; echo 'a & b' >&2; echo done`);
  expect(run.status).toBe('succeeded');
  const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(log).toBe('\n<script>alert("owned")</script>\na & b\ndone\n');
  const events = (await t.api.get(`/v1/runs/${run.id}/events?limit=1000`)).body.events;

  const json = await t.api.get(`/v1/runs/${run.id}/evidence?format=json`);
  expect(json.status).toBe(200);
  expect(json.headers.get('content-type')).toMatch(/^application\/json/);
  expect(json.headers.get('cache-control')).toBe('private, no-store');
  expect(json.body).toMatchObject({
    version: 1,
    run,
    log,
    log_bytes: Buffer.byteLength(log),
    log_truncated: false,
    log_omitted_bytes: 0,
    events,
    hosts: [],
    tasks: [],
    decisions: [],
    reasons_disclosed: true,
    separation_of_duties: null,
  });
  expect(json.body.install_id).toMatch(/^ins_/);
  expect(Date.parse(json.body.generated_at)).not.toBeNaN();
  expect(Array.isArray(json.body.chain)).toBe(true);

  const html = await t.api.get(`/v1/runs/${run.id}/evidence`);
  expect(html.status).toBe(200);
  expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
  expect(html.headers.get('content-disposition')).toBe(`inline; filename="${run.id}-evidence.html"`);
  expect(html.headers.get('content-security-policy')).toBe("default-src 'none'; style-src 'unsafe-inline'");
  expect(html.text).not.toContain('<script');
  expect(html.text).toContain('&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;');
  // The newline right after <pre> is the one an HTML parser drops; the log's own leading newline follows it.
  const logPre = /<pre class="log">\n([\s\S]*?)<\/pre>/.exec(html.text);
  expect(logPre && unescape(logPre[1])).toBe(log);
  for (const event of events) expect(html.text).toContain(`<span class="mono">${event.event}</span>`);
  for (const text of [run.id, run.status, json.body.install_id, run.started_at, run.finished_at]) expect(html.text).toContain(text);
  expect(html.text).not.toContain('id="hosts"');
  expect(html.text).not.toContain('id="tasks"');

  // format=html is the default spelled out.
  const explicit = await t.api.get(`/v1/runs/${run.id}/evidence?format=html`);
  expect(explicit.headers.get('content-type')).toBe('text/html; charset=utf-8');
});

test('a viewer reads a run\'s evidence', async () => {
  const { id, token } = await tokenFor('viewer');
  const run = await waitForRunEnd(t.api, (await launchReadableBy(t.adminToken, id, 'echo for-the-viewer')).id);
  const json = await t.as(token).get(`/v1/runs/${run.id}/evidence?format=json`);
  expect(json.status).toBe(200);
  expect(json.body).toMatchObject({ run: { id: run.id }, log: 'for-the-viewer\n', reasons_disclosed: false });
  const html = await t.as(token).get(`/v1/runs/${run.id}/evidence`);
  expect(html.status).toBe(200);
  expect(html.text).toContain('for-the-viewer');
  expect((await t.as(null).get(`/v1/runs/${run.id}/evidence`)).status).toBe(401);
});

test('an unknown run is 404; a format other than html or json is 400 naming it', async () => {
  for (const query of ['', '?format=json']) {
    const missing = await t.api.get(`/v1/runs/run_doesnotexist/evidence${query}`);
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe('run run_doesnotexist not found');
  }
  const run = await finishedRun('true');
  const bad = await t.api.get(`/v1/runs/${run.id}/evidence?format=pdf`);
  expect(bad.status).toBe(400);
  expect(bad.body).toMatchObject({ field: 'format' });
  expect(bad.body.error).toBe('format: format must be html or json, not "pdf"');
  const unknown = await t.api.get(`/v1/runs/${run.id}/evidence?fmt=json`);
  expect(unknown.status).toBe(400);
  expect(unknown.body.error).toMatch(/unknown field: fmt/);
});

test('a log over 4 MiB is embedded from its end and the dossier says how much was left out', async () => {
  const size = 4 * 1024 * 1024 + 1000;
  const run = await finishedRun(`head -c ${size} /dev/zero | tr '\\0' a; printf '\\nEND\\n'`);
  expect(run.status).toBe('succeeded');
  expect(run.log_bytes).toBe(size + 5);
  const { body } = await t.api.get(`/v1/runs/${run.id}/evidence?format=json`);
  expect(body).toMatchObject({ log_bytes: size + 5, log_truncated: true, log_omitted_bytes: size + 5 - 4 * 1024 * 1024 });
  expect(Buffer.byteLength(body.log)).toBe(4 * 1024 * 1024);
  expect(body.log.endsWith('aaa\nEND\n')).toBe(true);
  const html = await t.api.get(`/v1/runs/${run.id}/evidence`);
  expect(html.text).toContain(`The first ${size + 5 - 4 * 1024 * 1024} bytes are left out`);
});

test('a held run\'s decision reason is shown to the admin and the requester and withheld from another viewer', async () => {
  const policy = await t.api.post('/v1/policies', { command_contains: 'rm -rf' });
  expect(policy.status).toBe(201);
  const requester = await tokenFor('operator');
  const other = await tokenFor('viewer');

  const submitted = { body: await launchReadableBy(requester.token, other.id, 'mkdir -p scratch && rm -rf scratch && echo cleaned') };
  await waitForRun(t.api, submitted.body.id, (r) => r.status === 'held');
  const reason = `Scratch cleanup approved <b>by</b> the change board ${Date.now()}`;
  const approved = await t.api.post(`/v1/runs/${submitted.body.id}/approve`, { reason });
  expect(approved.status).toBe(200);
  const run = await waitForRunEnd(t.api, submitted.body.id);
  expect(run.status).toBe('succeeded');

  const forAdmin = (await t.api.get(`/v1/runs/${run.id}/evidence?format=json`)).body;
  expect(forAdmin.reasons_disclosed).toBe(true);
  expect(forAdmin.decisions).toHaveLength(1);
  const decision = forAdmin.decisions[0];
  expect(decision).toMatchObject({ kind: 'approve', actor: 'admin', reason, withheld: false, redaction: null });
  expect(decision.random).toMatch(/^[0-9a-f]{64}$/);
  expect(opensCommitment(decision.commitment, { event: decision.id, random: decision.random, reason })).toBe(true);
  // The decision's chain entry is in the dossier: the decision id is its id.
  expect(forAdmin.chain.map((e: { id: string }) => e.id)).toContain(decision.id);
  expect(forAdmin.log).toBe('cleaned\n');

  const forRequester = (await t.as(requester.token).get(`/v1/runs/${run.id}/evidence?format=json`)).body;
  expect(forRequester.reasons_disclosed).toBe(true);
  expect(forRequester.decisions).toEqual(forAdmin.decisions);
  const requesterHtml = (await t.as(requester.token).get(`/v1/runs/${run.id}/evidence`)).text;
  expect(requesterHtml).toContain(reason.replace('<b>', '&lt;b&gt;').replace('</b>', '&lt;/b&gt;'));
  expect(requesterHtml).toContain(decision.random);

  const otherJson = await t.as(other.token).get(`/v1/runs/${run.id}/evidence?format=json`);
  expect(otherJson.status).toBe(200);
  expect(otherJson.body.reasons_disclosed).toBe(false);
  expect(otherJson.body.decisions).toEqual([{ ...decision, reason: null, random: null, withheld: true }]);
  expect(otherJson.text).not.toContain('change board');
  expect(otherJson.text).not.toContain(decision.random);
  const otherHtml = (await t.as(other.token).get(`/v1/runs/${run.id}/evidence`)).text;
  expect(otherHtml).not.toContain('change board');
  expect(otherHtml).not.toContain(decision.random);
  expect(otherHtml).toContain(decision.commitment);
  expect(otherHtml).toContain('withheld');
});
