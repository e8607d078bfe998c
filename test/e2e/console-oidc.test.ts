import { randomBytes } from 'node:crypto';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { buildConsole, launchBrowser, newConsolePage } from '../support/browser';
import { reservePort, startTestProvider, type TestProvider } from '../support/oidc';
import { startTestServer, type TestServer } from '../support/server';

// The console's "Sign in with OpenID Connect" in a real browser, against the real provider. The
// console is reached as `localhost` and the provider as `127.0.0.1`: two sites, so the cookies cross
// a site boundary on the way out and back exactly as with a provider on its own domain.
let provider: TestProvider;
let t: TestServer;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let consoleUrl: string;
const problems: string[] = [];

beforeAll(async () => {
  buildConsole();
  const port = await reservePort();
  consoleUrl = `http://localhost:${port}`;
  const client = { id: 'cairn-console', secret: randomBytes(12).toString('hex') };
  provider = await startTestProvider({ ...client, redirectUri: `${consoleUrl}/auth/oidc/callback` });
  [t, browser] = await Promise.all([
    startTestServer({
      CAIRN_LISTEN: `127.0.0.1:${port}`,
      CAIRN_OIDC_ISSUER: provider.issuer,
      CAIRN_OIDC_CLIENT_ID: client.id,
      CAIRN_OIDC_CLIENT_SECRET: client.secret,
      CAIRN_OIDC_REDIRECT_URL: `${consoleUrl}/auth/oidc/callback`,
    }),
    launchBrowser(),
  ]);
  context = await browser.newContext();
  // The provider's development pages ask for a web font; nothing here reaches out.
  await context.route('https://fonts.googleapis.com/**', (route) => route.fulfill({ status: 200, contentType: 'text/css', body: '' }));
  page = await newConsolePage(context, problems);
});

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await t?.stop();
  await provider?.stop();
});

test('a person signs in through the provider and lands in the console signed in', async () => {
  const subject = `oidc-${randomBytes(4).toString('hex')}`;
  await page.goto(`${consoleUrl}/ui/`);
  await page.getByRole('link', { name: 'Sign in with OpenID Connect' }).click();

  // The provider's own login and consent pages.
  await page.locator('input[name="login"]').fill(subject);
  await page.locator('input[name="password"]').fill('any password');
  await page.locator('button[type="submit"]').click();
  await page.locator('button[type="submit"]', { hasText: 'Continue' }).click();

  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  expect(new URL(page.url()).pathname).toBe('/ui/');
  const cookies = await context.cookies(consoleUrl);
  expect(cookies.find((c) => c.name === 'cairn_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
  expect(cookies.find((c) => c.name === 'cairn_oidc')).toBeUndefined();
  const me = await page.evaluate(async () => (await fetch('/v1/auth/me', { headers: { 'X-Cairn-Console': '1' } })).json());
  expect(me).toMatchObject({ username: subject, role: 'viewer' });

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('link', { name: 'Sign in with OpenID Connect' }).waitFor();
  expect(problems).toEqual([]);
});
