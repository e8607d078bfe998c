import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { withBuildLock } from '../../embedded/temporal-binary';
import { tempDir } from '../support/temp';

// On a fresh machine every test worker asks for the same Go tool at once; one builds, the rest wait.

test('a second build of the same target in this process waits for the first, and one at a time holds the lock', async () => {
  const target = path.join(tempDir('cairn-build-lock'), 'tool');
  const order: string[] = [];
  const build = (name: string) =>
    withBuildLock(target, async () => {
      order.push(`${name} start`);
      expect(readFileSync(`${target}.lock`, 'utf8')).toBe(String(process.pid));
      await new Promise((resolve) => setTimeout(resolve, 300));
      order.push(`${name} end`);
    });
  await Promise.all([build('first'), build('second')]);
  expect(order).toEqual(['first start', 'first end', 'second start', 'second end']);
  expect(existsSync(`${target}.lock`)).toBe(false);
});

test('a lock held by a live process is waited for; a lock left by a dead one is taken over', async () => {
  const target = path.join(tempDir('cairn-build-lock'), 'tool');
  const holder = spawn('sleep', ['30'], { stdio: 'ignore' });
  writeFileSync(`${target}.lock`, String(holder.pid));
  let ran = false;
  const waiting = withBuildLock(target, async () => {
    ran = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  expect(ran).toBe(false);
  holder.kill('SIGKILL');
  await waiting;
  expect(ran).toBe(true);

  // A process id that has exited: `true` ran and is gone.
  const dead = spawnSync('sh', ['-c', 'true & echo $!'], { encoding: 'utf8' }).stdout.trim();
  writeFileSync(`${target}.lock`, dead);
  await expect(withBuildLock(target, async () => 'built')).resolves.toBe('built');
  expect(existsSync(`${target}.lock`)).toBe(false);
});
