import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { seedDemo, type DemoSeed } from '../../cli/demo-seed';
import { buildConsole, launchBrowser, newConsolePage, screenshot, signIn, startReceiver } from '../support/browser';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

// The console as operators and approvers use it: one server, one browser, a person's clicks.
let t: TestServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let seed: DemoSeed;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
const problems: string[] = [];
const password = randomBytes(12).toString('base64url');

beforeAll(async () => {
  buildConsole();
  receiver = await startReceiver();
  [t, browser] = await Promise.all([
    startTestServer({
      SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
      SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
      SERVICE_EGRESS_ALLOW: '127.0.0.1/32',
    }),
    launchBrowser(),
  ]);
  seed = await seedDemo(t.url, t.adminToken, { receiverUrl: receiver.url, password });
  // A browser in Berlin: the schedule preview must show a schedule's own zone, not the browser's.
  context = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US', timezoneId: 'Europe/Berlin' });
  page = await newConsolePage(context, problems);
});

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.stop();
  await receiver?.stop();
});

afterEach(() => {
  // No Content-Security-Policy violation, script error or console error on any page.
  expect(problems.splice(0)).toEqual([]);
});

/** Polls until the check passes. */
async function eventually<T>(check: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

test('a person signs in with a password and lands on the runs list', async () => {
  await page.goto(`${t.url}/`);
  await page.getByRole('heading', { name: 'Sign in to Cairn' }).waitFor();
  await screenshot(page, 'sign-in');
  await page.getByLabel('Username').fill('demo');
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByText('username or password is wrong').waitFor();
  // By keyboard alone: the username has the focus, Tab moves on, Enter signs in.
  await page.getByLabel('Username').fill('');
  await page.getByLabel('Password').fill('');
  await page.getByLabel('Username').focus();
  await page.keyboard.type('demo');
  await page.keyboard.press('Tab');
  await page.keyboard.type(password);
  await page.keyboard.press('Enter');
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  expect(page.url()).toBe(`${t.url}/ui/`);
  // The first Tab reaches the skip link, drawn with a visible focus ring; the nav works by keyboard.
  await page.keyboard.press('Tab');
  const focused = await page.evaluate(() => ({ text: document.activeElement?.textContent, outline: getComputedStyle(document.activeElement!).outlineStyle }));
  expect(focused).toEqual({ text: 'Skip to the page', outline: 'solid' });
  await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'Schedules' }).focus();
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Schedules', level: 1 }).waitFor();
  await page.goBack();
  await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
  await page.getByRole('table', { name: 'Runs' }).getByRole('link').first().waitFor();
  await page.reload();
  // The session survives a reload: the cookie, not anything the page keeps.
  await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
  await screenshot(page, 'runs');
});

test('the run list filters by status and template and counts what matches', async () => {
  await page.goto(`${t.url}/ui/runs`);
  await page.getByLabel('Status').selectOption('held');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.getByText('1 run matches').waitFor();
  await page.getByRole('link', { name: seed.heldRunId }).waitFor();
  expect(page.url()).toContain('status=held');
  await page.getByRole('button', { name: 'Clear' }).click();
  await page.getByLabel('Template').selectOption({ label: 'hello' });
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.getByText('1 run matches').waitFor();
});

test('a run page follows the live log as it is written, in colour, searchable', async () => {
  const { body: run } = await t.api.post('/v1/runs', {
    tool: 'bash',
    command: 'for i in 1 2 3 4 5 6; do printf "\\033[32mtick\\033[0m %s\\n" "$i"; sleep 0.6; done; echo finished',
  });
  await page.goto(`${t.url}/ui/runs/${run.id}`);
  const log = page.getByLabel('Run output');
  await log.getByText('tick 1').waitFor();
  // Live: the first line shows while the run is still writing.
  expect(await log.textContent()).not.toContain('finished');
  expect(await log.locator('.ansi-fg-32', { hasText: 'tick' }).count()).toBeGreaterThan(0);
  await log.getByText('finished').waitFor({ timeout: 20_000 });
  await page.getByText('succeeded', { exact: true }).first().waitFor();
  await page.getByLabel('Search the log').fill('tick 3');
  await page.getByRole('status').filter({ hasText: '1 line matches' }).waitFor();
  expect((await log.textContent())?.trim()).toBe('tick 3');
  await page.getByLabel('Search the log').fill('');
  await page.getByRole('tab', { name: /Events/ }).click();
  await page.getByRole('table', { name: 'Structured events' }).getByText('run.finished').waitFor();
  await page.getByRole('tab', { name: 'Log' }).click();
  await screenshot(page, 'run');
  const download = page.waitForEvent('download');
  await page.getByRole('button', { name: 'Download log' }).click();
  expect((await download).suggestedFilename()).toBe(`${run.id}.log`);
});

test('a template launches through its survey form; the API’s refusal shows beside the field', async () => {
  await page.goto(`${t.url}/ui/launch`);
  await page.getByRole('link', { name: 'deploy web' }).click();
  await page.getByRole('heading', { name: 'Launch deploy web' }).waitFor();
  await page.getByLabel('Environment').selectOption('production');
  await page.getByLabel('Version').fill('1.4');
  const secret = `tok-${randomBytes(8).toString('hex')}`;
  await page.getByLabel('API token').fill(secret);
  await page.getByRole('button', { name: 'Launch' }).click();
  // The server's message, next to the field it names.
  const version = page.getByLabel('Version');
  await eventually(async () => expect(await version.getAttribute('aria-invalid')).toBe('true'));
  const describedBy = (await version.getAttribute('aria-describedby')) ?? '';
  const messages = await Promise.all(describedBy.split(' ').filter(Boolean).map((id) => page.locator(`[id="${id}"]`).textContent()));
  expect(messages.join(' ')).toContain('answers.version');
  await screenshot(page, 'launch');
  await version.fill('1.4.2');
  await page.getByRole('button', { name: 'Launch' }).click();
  await page.waitForURL(/\/ui\/runs\/run_/);
  const runId = page.url().split('/').pop()!;
  const log = page.getByLabel('Run output');
  await log.getByText('deployed 1.4.2').waitFor({ timeout: 20_000 });
  // The secret answer reached the run, masked in its log, and is nowhere in the page.
  expect(await log.textContent()).toContain('using api token [masked]');
  expect(await page.content()).not.toContain(secret);
  const { body } = await t.api.get(`/v1/runs/${runId}`);
  expect(body).toMatchObject({ template_id: seed.templates.deploy, extra_vars: { environment: 'production', version: '1.4.2' }, secret_vars: ['api_token'] });
});

test('an admin approves a held run with a reason, confirming the masked text first', async () => {
  await page.goto(`${t.url}/ui/approvals`);
  const card = page.getByRole('article').filter({ has: page.getByRole('link', { name: seed.heldRunId }) });
  await card.getByText('rm -rf ./build-cache').waitFor();
  await card.getByText('an agent asked for it').waitFor();
  await screenshot(page, 'approvals');
  await card.getByRole('button', { name: `Approve run ${seed.heldRunId}` }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Reason').fill('cache is stale; password=Hunter2-Staging-Secret');
  await dialog.getByRole('button', { name: 'Approve', exact: true }).click();
  const kept = dialog.getByRole('alert').filter({ hasText: 'This is what will be kept; confirm' });
  await kept.waitFor();
  expect(await dialog.getByLabel('The reason as it will be kept').textContent()).toBe('cache is stale; password=[masked]');
  // Nothing is recorded until the approver confirms the masked text.
  expect((await t.api.get(`/v1/runs/${seed.heldRunId}`)).body.status).toBe('held');
  await screenshot(page, 'approve-masked-reason');
  await dialog.getByRole('button', { name: 'Confirm and approve' }).click();
  await card.waitFor({ state: 'detached' });
  const run = await waitForRunEnd(t.api, seed.heldRunId);
  expect(run.status).toBe('succeeded');
  const { body } = await t.api.get(`/v1/runs/${seed.heldRunId}/decisions`);
  expect(body.decisions).toEqual([expect.objectContaining({ kind: 'approve', actor: 'demo', reason: 'cache is stale; password=[masked]' })]);
});

test('an admin rejects a workflow’s approval step, and the workflow takes its deny path', async () => {
  const { body: workflow } = await t.api.post(`/v1/templates/${seed.workflowId}/launch`, {});
  await eventually(async () => {
    const { body } = await t.api.get('/v1/approvals');
    expect(body.approvals.map((a: { workflow_run_id: string }) => a.workflow_run_id)).toContain(workflow.id);
  }, 30_000);
  await page.goto(`${t.url}/ui/approvals`);
  const card = page.getByRole('article').filter({ hasText: `Step promote of workflow ${workflow.id}` });
  await card.getByText('Promote this build to production?').waitFor();
  await card.getByText('deploy-prod').waitFor();
  await card.getByText('rollback').waitFor();
  await card.getByRole('button', { name: `Reject step promote of ${workflow.id}` }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByLabel('Reason').fill('not this week');
  await dialog.getByRole('button', { name: 'Reject', exact: true }).click();
  await card.waitFor({ state: 'detached' });
  const ended = await waitForRunEnd(t.api, workflow.id, 30_000);
  const { body: steps } = await t.api.get(`/v1/runs/${workflow.id}/steps`);
  const byName = Object.fromEntries(steps.steps.map((s: { step_name: string; status: string; error: string | null }) => [s.step_name, s]));
  expect(byName.promote).toMatchObject({ status: 'rejected', error: 'denied by an approver' });
  expect(byName.rollback.status).toBe('succeeded');
  expect(byName['deploy-prod'].status).toBe('canceled');
  expect(ended.status).toBe('succeeded');
});

test('a schedule is made with a preview of its next fires in its own zone', async () => {
  await page.goto(`${t.url}/ui/schedules`);
  await page.getByRole('table', { name: 'Schedules' }).getByText('nightly hello').waitFor();
  await page.getByLabel('Name').fill('weekday report');
  await page.getByLabel('Template to launch').selectOption({ label: 'hello' });
  await page.getByLabel('Cron expression').fill('30 9 * * 1-5');
  await page.getByLabel('Time zone').fill('America/New_York');
  const fires = page.getByRole('list', { name: 'Next fire times' });
  // 09:30 in New York, whatever zone the browser is in; the UTC instant beside it.
  await eventually(async () => {
    expect(await fires.getByRole('listitem').count()).toBe(5);
    const first = await fires.getByRole('listitem').first().textContent();
    expect(first).toMatch(/9:30:00 AM E[SD]T/);
    expect(first).toMatch(/T1[34]:30:00\.000Z/);
  });
  await page.getByLabel('Cron expression').fill('61 * * * *');
  await eventually(async () => expect(await page.getByLabel('Cron expression').getAttribute('aria-invalid')).toBe('true'));
  await page.getByLabel('Cron expression').fill('30 9 * * 1-5');
  await fires.waitFor();
  await screenshot(page, 'schedules');
  await page.getByRole('button', { name: 'Save schedule' }).click();
  await page.getByRole('status').filter({ hasText: 'Saved weekday report' }).waitFor();
  await page.getByRole('table', { name: 'Schedules' }).getByText('weekday report').waitFor();
  const { body } = await t.api.get('/v1/schedules');
  expect(body.schedules.find((s: { name: string }) => s.name === 'weekday report')).toMatchObject({ cron: '30 9 * * 1-5', timezone: 'America/New_York', template_id: seed.templates.hello });
});

test('the audit chain verifies from the console, and a bundle downloads', async () => {
  await page.goto(`${t.url}/ui/audit`);
  await page.getByRole('button', { name: 'Verify the audit chain' }).click();
  const result = page.getByRole('status').filter({ hasText: 'The chain verifies' });
  await result.waitFor();
  const { body } = await t.api.get('/v1/audit/verify');
  expect(body.ok).toBe(true);
  expect(await result.textContent()).toContain(body.head_hash);
  await page.getByRole('table', { name: 'Audit entries' }).getByText('POST /v1/runs/', { exact: false }).first().waitFor();
  await screenshot(page, 'audit');
  const download = page.waitForEvent('download');
  await page.getByRole('button', { name: 'Download a signed bundle' }).click();
  expect((await download).suggestedFilename()).toBe('audit-bundle.json');
});

let waiting: { id: string };

test('the other pages render what the install holds', async () => {
  // An agent's run, held for a person: the attention and approvals pages have something to show.
  const { body: agent } = await t.api.post('/v1/tokens', { name: 'nightly agent', kind: 'agent', expires_in: 600 });
  ({ body: waiting } = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo rotating the logs' }, agent.token));
  const pages: [string, string, string][] = [
    ['runs', 'Runs', `${seed.heldRunId}`],
    ['attention', 'Attention', waiting.id],
    ['triggers', 'Triggers', 'deploy on push'],
    ['inventories', 'Inventories and hosts', 'local hosts'],
    ['projects', 'Projects', 'New project'],
    ['credentials', 'Credentials', 'web hosts'],
    ['notifications', 'Notification targets', 'local receiver'],
    ['admin', 'Admin', 'demo'],
  ];
  for (const [path, heading, shows] of pages) {
    await page.goto(`${t.url}/ui/${path}`);
    await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
    await page.getByText(shows, { exact: true }).first().waitFor();
    await screenshot(page, path);
  }
  // A stored secret is never filled into a form: editing starts from an empty, write-only field.
  await page.goto(`${t.url}/ui/credentials`);
  await page.getByRole('button', { name: 'Edit web hosts' }).click();
  const dialog = page.getByRole('dialog', { name: 'Edit web hosts' });
  expect(await dialog.getByLabel('Password (secret)', { exact: true }).inputValue()).toBe('');
  expect(await dialog.getByLabel('Password (secret)', { exact: true }).getAttribute('type')).toBe('password');
  await dialog.getByText('A value is stored; leave empty to keep it.', { exact: false }).first().waitFor();
  expect(await dialog.getByLabel('Username', { exact: true }).inputValue()).toBe('deploy');
  await dialog.getByRole('button', { name: 'Close the dialog' }).click();
  await page.goto(`${t.url}/ui/inventories/${seed.inventoryId}`);
  await page.getByRole('button', { name: 'Resolve hosts' }).click();
  await page.getByText('3 hosts', { exact: false }).waitFor();
  await screenshot(page, 'inventory');
});

test('on a phone, an approver opens the menu, reaches the approvals and approves', async () => {
  const held = (await t.api.get(`/v1/runs/${waiting.id}`)).body;
  expect(held.status).toBe('held');
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, locale: 'en-US', timezoneId: 'Europe/Berlin' });
  const small = await newConsolePage(phone, problems);
  await signIn(small, t.url, 'demo', password);
  await small.getByRole('button', { name: 'Open the menu' }).click();
  await small.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: /Approvals/ }).click();
  await small.getByRole('heading', { name: 'Approvals', level: 1 }).waitFor();
  const card = small.getByRole('article').filter({ has: small.getByRole('link', { name: held.id }) });
  await card.getByText('echo rotating the logs').waitFor();
  await screenshot(small, 'phone-approvals');
  await card.getByRole('button', { name: `Approve run ${held.id}` }).tap();
  await small.getByRole('dialog').getByLabel('Reason').fill('routine');
  await small.getByRole('dialog').getByRole('button', { name: 'Approve', exact: true }).tap();
  await card.waitFor({ state: 'detached' });
  expect((await waitForRunEnd(t.api, held.id)).status).toBe('succeeded');
  await phone.close();
});
