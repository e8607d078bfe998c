import { linkSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { diskUsage, DISK_ENTRIES_EXCEEDED } from '../../runtime/disk-usage';

// The run disk watcher's measure, on a real directory tree.
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'cairn-disk-usage-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const MiB = 1024 ** 2;

test('counts what files hold on disk, in every directory, each hard-linked file once', async () => {
  mkdirSync(path.join(dir, 'a/b'), { recursive: true });
  writeFileSync(path.join(dir, 'a/b/one'), Buffer.alloc(3 * MiB, 1));
  writeFileSync(path.join(dir, 'two'), Buffer.alloc(2 * MiB, 1));
  linkSync(path.join(dir, 'two'), path.join(dir, 'a/two-again'));
  const used = await diskUsage([dir]);
  expect(used).toBeGreaterThanOrEqual(5 * MiB);
  expect(used).toBeLessThan(6 * MiB);
  // A directory reached twice (as a work dir bound inside the sandbox's /tmp is) counts once.
  expect(await diskUsage([path.join(dir, 'a'), dir])).toBe(used);
});

test('follows no symlink and counts a sparse file by what it uses', async () => {
  symlinkSync('/usr', path.join(dir, 'usr'));
  writeFileSync(path.join(dir, 'sparse'), '');
  truncateSync(path.join(dir, 'sparse'), 1024 * MiB);
  expect(await diskUsage([dir])).toBeLessThan(MiB);
});

test('a tree with more entries than a measure walks counts as over any bound; a missing root counts nothing', async () => {
  for (let i = 0; i < 20; i++) writeFileSync(path.join(dir, `f${i}`), '');
  expect(await diskUsage([dir], 10)).toBe(DISK_ENTRIES_EXCEEDED);
  expect(await diskUsage([dir], 100)).toBeLessThan(MiB);
  expect(await diskUsage([path.join(dir, 'missing')])).toBe(0);
});
