import { execFileSync, spawnSync } from 'node:child_process';
import { statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createTestDatabase } from '../support/database';
import { apiClient } from '../support/http';
import { startChild, ROOT } from '../support/processes';
import { testSettings, waitForRunEnd } from '../support/server';
import { tempDir } from '../support/temp';

// Production runs the compiled JavaScript of dist/ (bin/build.js), not the sources through tsx;
// bin/cairn.js falls back to tsx only when dist/ is missing or older than the sources.

const compiled = require(path.join(ROOT, 'bin', 'compiled.js')) as { staleReason(): string | null };

/** A preload that reports, as the process exits, how many tsx modules and TypeScript files it loaded. */
function loaderProbe(): string {
  const file = path.join(tempDir('cairn-loader-probe'), 'probe.js');
  writeFileSync(
    file,
    `process.on('exit', () => {
      const loaded = Object.keys(require.cache);
      process.stderr.write('loader: tsx=' + loaded.filter((f) => f.includes('/node_modules/tsx/')).length + ' ts=' + loaded.filter((f) => f.endsWith('.ts')).length + '\\n');
    });\n`,
  );
  return file;
}

function cairn(probe: string, args: string[], env: NodeJS.ProcessEnv = process.env): string {
  return execFileSync(process.execPath, ['-r', probe, path.join(ROOT, 'bin', 'cairn.js'), ...args], { cwd: ROOT, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function cairnStderr(probe: string, args: string[], env: NodeJS.ProcessEnv = process.env): string {
  const result = spawnSync(process.execPath, ['-r', probe, path.join(ROOT, 'bin', 'cairn.js'), ...args], { cwd: ROOT, env, encoding: 'utf8' });
  expect(result.status).toBe(0);
  return `${result.stdout}${result.stderr}`;
}

// dist/ is built only when it is not current (`npm install` builds it): a build swaps the folder,
// and a `cairn` another test file started meanwhile could find a module gone mid-load.
beforeAll(() => {
  if (compiled.staleReason() === null) return;
  const out = execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, encoding: 'utf8' });
  expect(out).toMatch(/compiled \d+ source files into dist\/ in \d+ ms/);
});

test('after npm run build, cairn help runs from dist/ without tsx; a source newer than the build falls back to tsx', () => {
  expect(compiled.staleReason()).toBeNull();
  const probe = loaderProbe();
  const fromDist = cairnStderr(probe, ['help']);
  expect(fromDist).toMatch(/--database-url/);
  expect(fromDist).toMatch(/loader: tsx=0 ts=0/);
  expect(cairn(probe, ['help'])).toMatch(/--database-url/);

  // An edited source (a newer time) makes dist/ stale: the sources run through tsx, and still work.
  const source = path.join(ROOT, 'cli', 'main.ts');
  const { atime, mtime } = statSync(source);
  const later = new Date(Date.now() + 60_000);
  utimesSync(source, later, later);
  try {
    expect(compiled.staleReason()).toMatch(/changed after dist\/ was built/);
    const fromSource = cairnStderr(probe, ['help'], { ...process.env, CAIRN_DEBUG_LOADER: '1' });
    expect(fromSource).toMatch(/running the TypeScript sources: a source file changed after dist\/ was built/);
    expect(fromSource).toMatch(/loader: tsx=[1-9]\d* ts=[1-9]/);
  } finally {
    // Its own time less a second, so dist/ is current again without a rebuild (its own time
    // exactly could come back a rounding newer than the build recorded).
    utimesSync(source, atime, new Date(mtime.getTime() - 1000));
  }
  expect(compiled.staleReason()).toBeNull();
});

test('cairn serve from dist/ starts, migrates, runs a tool in its launcher and stops, loading no TypeScript', async () => {
  const database = await createTestDatabase();
  const probe = loaderProbe();
  const env = { ...process.env, ...testSettings(database.url), CAIRN_LOG_LEVEL: 'warn' };
  const serve = startChild(process.execPath, ['-r', probe, path.join(ROOT, 'bin', 'cairn.js'), 'serve'], env);
  try {
    const [, url] = await serve.waitFor(/serving at (\S+)/, 60_000);
    const [, token] = await serve.waitFor(/admin token: (\S+)/);
    const api = apiClient(url, token);
    const { status, body } = await api.post('/v1/runs', { tool: 'bash', command: 'echo packaged' });
    expect(status).toBe(201);
    expect((await waitForRunEnd(api, body.id)).status).toBe('succeeded');
    expect((await api.get(`/v1/runs/${body.id}/logs`)).text).toBe('packaged\n');
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
    expect(serve.output()).toMatch(/loader: tsx=0 ts=0/);
  } finally {
    await serve.stop();
    await database.drop();
  }
});
