import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { buildConsole, launchBrowser, newConsolePage, signIn } from '../support/browser';
import { startTestServer, type TestServer } from '../support/server';

// An attacker's pass over the console: what the page keeps, what a forged request gets, framing,
// and the Content-Security-Policy, against one real server and one browser.
let t: TestServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let attacker: { url: string; stop(): Promise<void> };
const problems: string[] = [];
const password = randomBytes(12).toString('base64url');

/** A page on another origin (another port of the same host: same-site, so a Strict cookie is still sent). */
async function startAttacker(consoleUrl: string): Promise<{ url: string; stop(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    if (req.url === '/frame') res.end(`<!doctype html><title>framing</title><iframe id="victim" src="${consoleUrl}/ui/" width="800" height="600"></iframe>`);
    else res.end('<!doctype html><title>attacker</title><p>attacker</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, stop: () => new Promise((resolve) => server.close(() => resolve())) };
}

beforeAll(async () => {
  buildConsole();
  [t, browser] = await Promise.all([startTestServer(), launchBrowser()]);
  attacker = await startAttacker(t.url);
  const { body: me } = await t.api.get('/v1/auth/me');
  await t.api.request('PUT', `/v1/users/${me.id}`, { body: { password } });
  context = await browser.newContext();
  page = await newConsolePage(context, problems);
});

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await attacker?.stop();
  await t?.stop();
});

afterEach(() => {
  expect(problems.splice(0)).toEqual([]);
});

async function sessionCookie(): Promise<string> {
  const cookie = (await context.cookies(t.url)).find((c) => c.name === 'cairn_session');
  if (!cookie) throw new Error('no session cookie');
  return cookie.value;
}

const runTotal = async () => (await t.api.get('/v1/runs?limit=1')).body.total as number;

test('every console answer carries a strict CSP, no framing, and no sniffing', async () => {
  const page = await fetch(`${t.url}/ui/`);
  const html = await page.text();
  const asset = /src="(\/ui\/assets\/[^"]+\.js)"/.exec(html)![1];
  for (const path of ['/ui/', '/ui/runs/run_anything', asset]) {
    const res = await fetch(`${t.url}${path}`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    const directives = Object.fromEntries(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name, values]));
    expect(directives['default-src']).toEqual(["'none'"]);
    expect(directives['script-src']).toEqual(["'self'"]);
    expect(directives['style-src']).toEqual(["'self'"]);
    expect(directives['frame-ancestors']).toEqual(["'none'"]);
    expect(directives['base-uri']).toEqual(["'none'"]);
    // No inline code, no eval, no other origin anywhere in the policy.
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:|\*/);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  }
  // The page has no inline script or style to allow.
  expect(html).not.toMatch(/<script>|<style|style=/);
});

test('another origin cannot frame the console', async () => {
  const framing = await context.newPage();
  await framing.goto(`${attacker.url}/frame`);
  await framing.waitForTimeout(1000);
  const frame = framing.frames().find((f) => f !== framing.mainFrame());
  // Chromium refuses the frame (frame-ancestors 'none', X-Frame-Options DENY): it never shows the console.
  expect(frame?.url() ?? '').not.toContain('/ui/');
  expect(await frame?.locator('text=Sign in to Cairn').count().catch(() => 0)).toBe(0);
  await framing.close();
});

test('signing in keeps the session in an HttpOnly cookie only: nothing in storage, the DOM or a URL', async () => {
  const login = page.waitForResponse((r) => r.url().endsWith('/v1/auth/login'));
  await signIn(page, t.url, 'admin', password);
  const answer = await (await login).json();
  expect(answer).toMatchObject({ session: 'cookie', username: 'admin', role: 'admin' });
  expect(answer.token).toBeUndefined();

  const cookies = await context.cookies(t.url);
  const session = cookies.find((c) => c.name === 'cairn_session')!;
  expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/', secure: false });
  expect(session.value).toMatch(/^cairn_/);

  const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo visible' });
  for (const path of ['/ui/runs', `/ui/runs/${run.id}`, '/ui/approvals', '/ui/admin', '/ui/audit']) {
    await page.goto(`${t.url}${path}`);
    await page.getByRole('heading', { level: 1 }).first().waitFor();
    await page.waitForLoadState('networkidle');
    const seen = await page.evaluate(() => ({
      cookie: document.cookie,
      local: JSON.stringify({ ...localStorage }),
      session: JSON.stringify({ ...sessionStorage }),
      url: location.href,
      html: document.documentElement.outerHTML,
    }));
    expect(seen.cookie).not.toContain('cairn_session');
    for (const where of [seen.cookie, seen.local, seen.session, seen.url, seen.html]) {
      expect(where).not.toContain(session.value);
      expect(where).not.toContain(t.adminToken);
      expect(where).not.toMatch(/cairn_[A-Za-z0-9_-]{30,}/);
    }
  }
});

test('a request with the cookie but without the console header is refused 401 (CSRF), and changes nothing', async () => {
  const cookie = `cairn_session=${await sessionCookie()}`;
  const before = await runTotal();
  const forged = await fetch(`${t.url}/v1/runs`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify({ tool: 'bash', command: 'echo forged' }) });
  expect(forged.status).toBe(401);
  expect((await forged.json()).error).toContain('X-Cairn-Console: 1');
  expect((await fetch(`${t.url}/v1/auth/me`, { headers: { cookie } })).status).toBe(401);
  // The same cookie with the header is the console itself.
  const me = await fetch(`${t.url}/v1/auth/me`, { headers: { cookie, 'x-cairn-console': '1' } });
  expect(me.status).toBe(200);
  expect((await me.json()).username).toBe('admin');

  // From a browser on another origin: a form post carries the cookie (same site) but not the
  // header; a fetch that adds the header needs a CORS preflight, which Cairn never grants.
  const evil = await context.newPage();
  await evil.goto(attacker.url);
  const outcomes = await evil.evaluate(async (target) => {
    const results: string[] = [];
    const variants: Record<string, string>[] = [{ 'content-type': 'text/plain' }, { 'content-type': 'text/plain', 'x-cairn-console': '1' }];
    for (const headers of variants) {
      try {
        const res = await fetch(`${target}/v1/runs`, { method: 'POST', credentials: 'include', headers, body: JSON.stringify({ tool: 'bash', command: 'echo forged' }) });
        results.push(`answered ${res.type}`);
      } catch (err) {
        results.push(`refused ${(err as Error).name}`);
      }
    }
    return results;
  }, t.url);
  // Neither answer is readable across origins, and neither made a run.
  expect(outcomes).toEqual(['refused TypeError', 'refused TypeError']);
  await evil.close();
  expect(await runTotal()).toBe(before);

  // Asking for a cookie session without the header (a login CSRF) is refused and sets no cookie.
  const login = await fetch(`${t.url}/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password, cookie: true }) });
  expect(login.status).toBe(400);
  expect(await login.json()).toMatchObject({ field: 'cookie' });
  expect(login.headers.get('set-cookie')).toBeNull();
});

test('no API or agent token works as a console session', async () => {
  const { body: agent } = await t.api.post('/v1/tokens', { name: 'bot', kind: 'agent' });
  const { body: api } = await t.api.post('/v1/tokens', { name: 'script', kind: 'user' });
  for (const token of [agent.token, api.token, t.adminToken]) {
    const res = await fetch(`${t.url}/v1/auth/me`, { headers: { cookie: `cairn_session=${token}`, 'x-cairn-console': '1' } });
    expect(res.status).toBe(401);
    // The same token as a bearer still works, unchanged.
    expect((await t.as(token).get('/v1/auth/me')).status).toBe(200);
  }
  const other = await browser.newContext();
  await other.addCookies([{ name: 'cairn_session', value: agent.token, url: t.url, httpOnly: true, sameSite: 'Strict' }]);
  const agentPage = await newConsolePage(other, problems);
  await agentPage.goto(`${t.url}/ui/`);
  await agentPage.getByRole('heading', { name: 'Sign in to Cairn' }).waitFor();
  await other.close();
  problems.splice(0);
});

test('signing out revokes the session token and clears the cookie', async () => {
  await page.goto(`${t.url}/ui/runs`);
  const value = await sessionCookie();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in to Cairn' }).waitFor();
  expect((await context.cookies(t.url)).find((c) => c.name === 'cairn_session')).toBeUndefined();
  const res = await fetch(`${t.url}/v1/auth/me`, { headers: { cookie: `cairn_session=${value}`, 'x-cairn-console': '1' } });
  expect(res.status).toBe(401);
  await page.reload();
  await page.getByRole('heading', { name: 'Sign in to Cairn' }).waitFor();
  problems.splice(0);
});
