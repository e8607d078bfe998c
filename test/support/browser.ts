import { execFileSync } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

const ROOT = path.resolve(__dirname, '..', '..');
export const SCREENSHOTS = process.env.CAIRN_SCREENSHOTS === '1';

/** Builds the console from ui/src, so the browser tests always test the sources as they are. */
export function buildConsole(): void {
  execFileSync(process.execPath, [path.join(ROOT, 'ui', 'build.mjs')], { cwd: ROOT, stdio: 'pipe' });
}

/**
 * Debian's Chromium, headless, with nothing that reaches out: Playwright gives every launch a
 * fresh temporary profile (its own --user-data-dir), removed when the browser closes.
 */
export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CAIRN_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Every console error, failed script and Content-Security-Policy violation a page reports. */
export function watchProblems(page: Page, problems: string[]): void {
  page.on('console', (message) => {
    if (message.type() === 'error' || /Content Security Policy|Refused to/i.test(message.text())) {
      const text = message.text();
      // A refused API call logs a resource error; the tests look at those answers themselves.
      if (/Failed to load resource: the server responded with a status of (400|401|403|404|409)/.test(text)) return;
      problems.push(text);
    }
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
}

export async function newConsolePage(context: BrowserContext, problems: string[]): Promise<Page> {
  const page = await context.newPage();
  watchProblems(page, problems);
  return page;
}

export async function signIn(page: Page, baseUrl: string, username: string, password: string): Promise<void> {
  await page.goto(`${baseUrl}/ui/`);
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** With CAIRN_SCREENSHOTS=1, saves the page as docs/console/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  if (!SCREENSHOTS) return;
  await page.screenshot({ path: path.join(ROOT, 'docs', 'console', `${name}.png`) });
}

/** A webhook receiver on loopback for the demo's notification target. */
export async function startReceiver(): Promise<{ url: string; deliveries: unknown[]; stop(): Promise<void> }> {
  const deliveries: unknown[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      deliveries.push(JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null'));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/hook`, deliveries, stop: () => new Promise((resolve) => server.close(() => resolve())) };
}
