import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { CONSOLE_DIST } from '../../api/routes/console';

// The browser tests rebuild the console (test/support/browser.ts) while other test files, or a
// running server, load /ui/ from ui/dist: a rebuild must never leave the page or an asset it
// loads missing or half-written.

/** What a reader of ui/dist would find wrong right now: the page, or an asset it names. */
function missingNow(): string | undefined {
  let page: string;
  try {
    page = readFileSync(path.join(CONSOLE_DIST, 'index.html'), 'utf8');
  } catch {
    return 'index.html';
  }
  if (!page.includes('</html>')) return 'index.html (half-written)';
  for (const [, name] of page.matchAll(/\/ui\/assets\/([^"]+)"/g)) {
    if (!existsSync(path.join(CONSOLE_DIST, 'assets', name))) return `assets/${name}`;
  }
  return undefined;
}

test('rebuilding the console never leaves ui/dist without its page or an asset the page loads', async () => {
  const build = () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(CONSOLE_DIST, '..', 'build.mjs')], { stdio: 'ignore' });
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`ui/build.mjs exited ${code}`))));
    });
  // A console to start from, then a rebuild watched from beside it.
  if (missingNow()) await build();
  expect(missingNow()).toBeUndefined();
  const seen = new Set<string>();
  let looks = 0;
  let building = true;
  const rebuilt = build().finally(() => (building = false));
  while (building) {
    const missing = missingNow();
    if (missing) seen.add(missing);
    looks++;
    await new Promise((resolve) => setImmediate(resolve));
  }
  await rebuilt;
  expect([...seen]).toEqual([]);
  expect(looks).toBeGreaterThan(10);
  expect(missingNow()).toBeUndefined();
}, 60_000);
