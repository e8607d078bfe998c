import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ToolLauncher } from '../../runtime/launcher';
import { OUTPUT_WINDOW_BYTES } from '../../runtime/launcher-protocol';

// A real launcher process and a real tool (no sandbox): a consumer that is behind holds the
// tool's output back through the launcher, and lets it all through once it catches up.
const launcher = new ToolLauncher(undefined);
const cwd = mkdtempSync(path.join(os.tmpdir(), 'cairn-launcher-flow-'));
afterAll(async () => {
  await launcher.stop();
  rmSync(cwd, { recursive: true, force: true });
});

const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };

test('output a consumer has not taken stops being read, and the tool waits on its pipe', async () => {
  const total = 64 * 1024 * 1024;
  let received = 0;
  let behind = true;
  const waiting: Array<() => void> = [];
  const tool = await launcher.launch(['head', '-c', String(total), '/dev/zero'], {
    cwd,
    env,
    onOutput: (data) => {
      received += data.length;
      if (!behind) return undefined;
      return new Promise<void>((resolve) => waiting.push(resolve));
    },
  });
  // Far less than the tool would write in this time: the window, plus what was in flight as it filled.
  await new Promise((r) => setTimeout(r, 700));
  expect(received).toBeGreaterThan(0);
  expect(received).toBeLessThan(OUTPUT_WINDOW_BYTES + 4 * 1024 * 1024);
  let exitedEarly = false;
  void tool.exited.then(() => (exitedEarly = behind));
  await new Promise((r) => setTimeout(r, 100));
  expect(exitedEarly).toBe(false);
  // Caught up: everything arrives, in full, and the tool ends.
  behind = false;
  for (const resolve of waiting.splice(0)) resolve();
  await expect(tool.exited).resolves.toEqual({ exitCode: 0, signal: null });
  expect(received).toBe(total);
});

test('a consumer that never waits gets the whole output at the tool\'s pace', async () => {
  let received = 0;
  const tool = await launcher.launch(['head', '-c', String(16 * 1024 * 1024), '/dev/zero'], {
    cwd,
    env,
    onOutput: (data) => {
      received += data.length;
    },
  });
  await expect(tool.exited).resolves.toEqual({ exitCode: 0, signal: null });
  expect(received).toBe(16 * 1024 * 1024);
});
