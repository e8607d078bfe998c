import { person } from '../support/access';
import { launchBrowser } from '../support/browser';
import { testLicense } from '../support/license';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * The period change register (spec part A 4.15, 1.2; part B 8): Team only (403 naming the
 * feature on Community), admin only; every run of the period grouped by change label, with its
 * decisions (a redacted reason not shown), outcomes and chain positions that match the chain; the
 * period's default and its `from`/`to` forms; the document opened offline in Chromium (it asks
 * for nothing) and printed to PDF.
 */

let t: TestServer;

async function submit(api: ReturnType<TestServer['as']>, body: Record<string, unknown>) {
  const res = await api.post('/v1/runs', { tool: 'bash', ...body });
  if (res.status !== 201) throw new Error(`submit: ${res.status} ${res.text}`);
  return res.body;
}

beforeAll(async () => {
  const license = await testLicense('team');
  t = await startTestServer({ CAIRN_LICENSE_FILE: license.file }, { licenseKeys: [license.publicJwk] });
}, 60_000);
afterAll(() => t?.stop());

test('Community answers 403 naming the feature', async () => {
  const community = await startTestServer();
  try {
    const refused = await community.api.get('/v1/audit/register');
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ feature: 'audit_register', tier: 'community' });
    expect(refused.body.error).toBe('the period change register (GET /v1/audit/register) needs the Team tier; this install runs Community');
  } finally {
    await community.stop();
  }
}, 60_000);

test('the register: changes grouped by label with outcomes, decisions with the reasons that may be shown, chain positions; period bounds', async () => {
  const operator = await person(t.api, 'operator');
  const op = t.as(operator.token);
  expect((await t.api.post('/v1/policies', { name: 'hold marked runs', effect: 'require_approval', command_contains: 'NEEDS-OK' })).status).toBe(201);

  const first = await submit(op, { command: 'echo one', change: 'CHG-7001' });
  const failing = await submit(t.api, { command: 'exit 3', change: 'CHG-7001' });
  const held = await submit(op, { command: 'echo "NEEDS-OK <b>"', change: 'CHG-7002' });
  const rejected = await submit(op, { command: 'echo NEEDS-OK again', change: 'CHG-7002' });
  const unlabelled = await submit(op, { command: 'echo plain' });
  const approve = await t.api.post(`/v1/runs/${held.id}/approve`, { reason: 'window <CHG-7002> agreed with the on-call lead', state_digest: held.state_digest });
  expect(approve.status).toBe(200);
  const reject = await t.api.post(`/v1/runs/${rejected.id}/reject`, { reason: 'approved for Alice Example' });
  expect(reject.status).toBe(200);
  expect((await t.api.post(`/v1/runs/${rejected.id}/decisions/${reject.body.decision.id}/redact`, { category: 'personal_data' })).status).toBe(200);
  for (const run of [first, failing, held, unlabelled]) await waitForRunEnd(t.api, run.id);

  expect((await op.get('/v1/audit/register')).status).toBe(403);
  const res = await t.api.get('/v1/audit/register');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
  expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
  expect(res.headers.get('content-disposition')).toMatch(/^inline; filename="change-register-\d{4}-\d{2}-\d{2}-\d{4}-\d{2}-\d{2}\.html"$/);
  const html = res.text;
  expect(html).toContain('(the last 90 days)');
  // Grouped by label, labelled changes first by their first run, unlabelled runs last; each with its outcome.
  const at = (text: string) => html.indexOf(text);
  expect(at('<code>CHG-7001</code> <span class="outcome partial">partly failed</span>')).toBeGreaterThan(0);
  expect(at('<code>CHG-7002</code> <span class="outcome partial">partly failed</span>')).toBeGreaterThan(at('<code>CHG-7001</code> <span'));
  expect(at('<em>Runs without a change label</em> <span class="outcome succeeded">')).toBeGreaterThan(at('<code>CHG-7002</code> <span'));
  for (const run of [first, failing, held, rejected, unlabelled]) expect(html).toContain(`<code>${run.id}</code>`);
  // A reason that may be shown is shown (escaped); a redacted one is not, its redaction is.
  expect(html).toContain('reason: <span class="reason">window &lt;CHG-7002&gt; agreed with the on-call lead</span>');
  expect(html).not.toContain('Alice Example');
  expect(html).toContain('reason redacted as personal data by admin');
  expect(html).toContain(`commitment <code>${reject.body.decision.commitment}</code>`);
  // Chain positions are the chain's: the approval's entry and the held run's entries.
  const entries = (await t.api.get('/v1/audit?limit=1000&order=asc')).body.entries as { seq: number; id: string; hash: string }[];
  const approval = entries.find((e) => e.id === approve.body.decision.id)!;
  expect(html).toContain(`at <time datetime="${approve.body.decision.at}">`);
  expect(html).toContain(`, chain #${approval.seq}: reason:`);
  expect(html).toMatch(new RegExp(`#${approval.seq} <code>run.decision</code>`));
  const head = entries[entries.length - 1];
  expect(html).toContain(`head hash <code>${head.hash}</code>`);

  // Periods: dates (a whole day, to inclusive), RFC 3339, one bound alone; a period with nothing in it.
  const today = new Date().toISOString().slice(0, 10);
  const day = await t.api.get(`/v1/audit/register?from=${today}&to=${today}`);
  expect(day.text).toContain(`<code>${first.id}</code>`);
  expect(day.headers.get('content-disposition')).toContain(`change-register-${today}-`);
  const past = await t.api.get('/v1/audit/register?from=2020-01-01T00:00:00Z&to=2020-02-01T00:00:00%2B02:00');
  expect(past.status).toBe(200);
  expect(past.text).toContain('No run was created in this period.');
  expect((await t.api.get(`/v1/audit/register?from=${today}`)).text).toContain(`<code>${first.id}</code>`);
  for (const [query, field] of [
    ['from=yesterday', 'from'],
    ['to=2026-02-30', 'to'],
    ['from=2026-01-02&to=2026-01-01', 'to'],
    ['from=2026-01-01T00:00:00', 'from'],
    ['since=2026-01-01', 'since'],
  ]) {
    const bad = await t.api.get(`/v1/audit/register?${query}`);
    expect([query, bad.status, bad.body.field]).toEqual([query, 400, field]);
  }

  // Opened offline: it loads nothing, and it prints.
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    const requests: string[] = [];
    await page.route('**/*', (route) => (requests.push(route.request().url()), route.abort()));
    await page.setContent(html, { waitUntil: 'load' });
    expect(await page.title()).toMatch(/^Change register, /);
    expect(await page.locator('section[id^="change-"]').count()).toBe(3);
    const pdf = await page.pdf({ format: 'A4', printBackground: true });
    expect(pdf.subarray(0, 5).toString()).toBe('%PDF-');
    expect(pdf.length).toBeGreaterThan(10_000);
    expect(requests).toEqual([]);
  } finally {
    await browser.close();
  }
}, 90_000);
