import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { perInstallDir } from '../../embedded/system-accounts';
import { runAccountDir } from '../../runtime/sandbox-setup';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * Every run's sandbox is bounded (--run-memory, --run-pids, --run-disk, --run-cpu): a run that
 * crosses a bound is ended and fails naming the bound and its flag, while the server and the
 * other runs go on. Low bounds keep each crossing quick.
 */

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ CAIRN_RUN_MEMORY: '64m', CAIRN_RUN_PIDS: '32', CAIRN_RUN_DISK: '10m', CAIRN_RUN_CPU: '0.5' });
});
afterAll(async () => {
  await t?.stop();
});

async function submit(command: string): Promise<string> {
  const { status, body } = await t.api.post('/v1/runs', { tool: 'bash', command });
  expect(status).toBe(201);
  return body.id;
}

async function run(command: string) {
  const id = await submit(command);
  const startedAt = Date.now();
  const ended = await waitForRunEnd(t.api, id, 30_000);
  return { run: ended, seconds: (Date.now() - startedAt) / 1000, log: (await t.api.get(`/v1/runs/${id}/logs`)).text };
}

test('a run that allocates past --run-memory fails naming the memory bound; a run beside it and one after it succeed', async () => {
  const beside = await submit('sleep 2; echo still here');
  const { run: bomb } = await run('python3 -c "data = b\\"x\\" * (200 * 1024 * 1024); print(len(data))"');
  expect(bomb).toMatchObject({ status: 'failed', error: 'exceeded its memory bound (--run-memory 64 MiB)' });

  const survivor = await waitForRunEnd(t.api, beside, 30_000);
  expect(survivor.status).toBe('succeeded');
  expect((await t.api.get(`/v1/runs/${beside}/logs`)).text).toContain('still here');
  const after = await run('python3 -c "data = b\\"x\\" * (8 * 1024 * 1024); print(\\"allocated\\", len(data))"');
  expect(after.run.status).toBe('succeeded');
  expect(after.log).toContain(`allocated ${8 * 1024 * 1024}`);
  expect((await t.api.get('/readyz')).status).toBe(200);
});

test('a run that forks past --run-pids is ended at once and fails naming the process bound', async () => {
  const { run: forks, seconds } = await run('for i in $(seq 100); do sleep 30 & done; wait');
  expect(forks).toMatchObject({ status: 'failed', error: 'exceeded its process bound (--run-pids 32)' });
  expect(seconds).toBeLessThan(15);
});

test('a run that writes a file past --run-disk fails naming the disk bound, and its work dir is gone', async () => {
  const { run: writer, log } = await run('pwd; head -c 50M /dev/zero > big; ls -l big');
  expect(writer).toMatchObject({ status: 'failed', error: 'exceeded its disk bound (--run-disk 10 MiB)' });
  // The file stopped at the bound (RLIMIT_FSIZE).
  expect(log).toMatch(/ 10485760 .* big/);
  const workDir = log.split('\n')[0].trim();
  expect(path.basename(workDir)).toBe(`${writer.id}-1`);
  expect(existsSync(workDir)).toBe(false);
});

test('files in the work dir and /tmp that reach --run-disk together end the run while it still runs', async () => {
  // Below the bound, watched a while: counted once, though the work dir also shows inside /tmp here (the data dir is under /tmp).
  const below = await run('head -c 6M /dev/zero > part; sleep 3; echo kept');
  expect(below.run.status).toBe('succeeded');

  const { run: filler, seconds } = await run('head -c 6M /dev/zero > /tmp/part; for i in 1 2 3 4 5; do head -c 1M /dev/zero > part$i; done; sleep 30');
  expect(filler).toMatchObject({ status: 'failed', error: 'exceeded its disk bound (--run-disk 10 MiB)' });
  expect(seconds).toBeLessThan(15);
  // The private /tmp holds no more than the bound on its own.
  const { log } = await run('head -c 20M /dev/zero > /tmp/big 2>&1; ls -l /tmp/big');
  expect(log).not.toMatch(/ 20971520 /);
});

test("runs work under the install's data dir (or its own directory under /var/lib/cairn), not the shared /tmp", async () => {
  const workRoot = await runAccountDir(t.config, 'runs', () => undefined);
  expect([path.join(t.config.dataDir, 'runs'), perInstallDir('runs', t.config.dataDir)]).toContain(workRoot);
  const { run: ended, log } = await run('pwd');
  expect(ended.status).toBe('succeeded');
  expect(log.trim()).toBe(path.join(workRoot, `${ended.id}-1`));
  expect(log).not.toContain(path.join(os.tmpdir(), 'cairn-runs'));
});

test('the doctor lists each bound, its flag, its value and how it is enforced', async () => {
  const { body } = await t.api.get('/v1/doctor');
  const check = body.checks.find((c: any) => c.name === 'run_bounds');
  expect(check).toMatchObject({ severity: 'warning', facts: { enforcement: expect.stringMatching(/^(cgroup v2|cgroup v1|rlimits only)$/) } });
  const bounds = Object.fromEntries(check.facts.bounds.map((b: any) => [b.bound, b]));
  expect(bounds.memory).toMatchObject({ flag: '--run-memory', value: 64 * 1024 ** 2, limit: '64 MiB' });
  expect(bounds.process).toMatchObject({ flag: '--run-pids', value: 32, limit: '32' });
  expect(bounds.cpu).toMatchObject({ flag: '--run-cpu', value: 0.5, limit: '0.5 cores' });
  expect(bounds.disk).toMatchObject({ flag: '--run-disk', value: 10 * 1024 ** 2, limit: '10 MiB', enforced_by: 'rlimits and the work dir watcher' });
  const byCgroup = check.facts.enforcement !== 'rlimits only';
  expect(bounds.memory.enforced_by).toBe(byCgroup ? check.facts.enforcement : 'rlimits only');
  expect(bounds.process.enforced_by).toBe(byCgroup ? check.facts.enforcement : 'rlimits only');
  // Held by cgroups the check passes; by rlimits alone it is a finding.
  expect(check.ok).toBe(byCgroup);
  if (process.getuid?.() === 0 && existsSync('/sys/fs/cgroup/memory/cgroup.procs')) expect(check.facts.enforcement).toBe('cgroup v1');
});
