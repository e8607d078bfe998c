import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { prepareCgroups, RunCgroup, type CgroupPlan } from '../../runtime/cgroups';

/**
 * The cgroup files a server reads and writes, on a directory laid out as the kernel lays out a
 * hierarchy: what this machine's own hierarchy cannot show (cgroup v2 with its controllers) is
 * checked here file by file; the integration tests bound real runs on the machine's hierarchy.
 */
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'cairn-cgroups-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** A /proc/self of mount lines and cgroup lines, for prepareCgroups to read. */
function proc(mounts: string[], cgroups: string[]): string {
  const at = path.join(dir, 'proc');
  mkdirSync(at);
  writeFileSync(path.join(at, 'mountinfo'), `${[`31 23 0:28 / ${dir} rw - tmpfs tmpfs rw`, ...mounts].join('\n')}\n`);
  writeFileSync(path.join(at, 'cgroup'), `${cgroups.join('\n')}\n`);
  return at;
}
const read = (...parts: string[]) => readFileSync(path.join(...parts), 'utf8');
const limits = { memoryBytes: 64 * 1024 ** 2, pids: 32, cpu: 0.5 };

test('cgroup v2: the runs go in cairn/ beside the server, in the delegated parent, with memory, pids and cpu enabled', async () => {
  const unified = path.join(dir, 'unified');
  const service = path.join(unified, 'system.slice/cairn.service');
  mkdirSync(path.join(service, 'server'), { recursive: true });
  writeFileSync(path.join(service, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
  // A cgroup left by a server that is gone (no process has that pid) is removed.
  mkdirSync(path.join(service, 'cairn/999999999-1-abcdef'), { recursive: true });

  const found = await prepareCgroups(proc([`41 31 0:38 / ${unified} rw - cgroup2 cgroup2 rw`], ['0::/system.slice/cairn.service/server']));
  const parent = path.join(service, 'cairn');
  expect(found).toEqual({ plan: { version: 'v2', parents: { memory: parent, pids: parent, cpu: parent } } });
  expect(read(service, 'cgroup.subtree_control')).toBe('+memory +pids +cpu');
  expect(read(parent, 'cgroup.subtree_control')).toBe('+memory +pids +cpu');
  expect(read(parent, 'cpu.weight')).toBe('50');
  expect(readdirSync(parent).filter((name) => name.includes('-'))).toEqual([]);

  const cgroup = await RunCgroup.create((found as { plan: CgroupPlan }).plan, limits);
  const [made] = readdirSync(parent).filter((name) => name.startsWith(`${process.pid}-`));
  const run = path.join(parent, made);
  expect([read(run, 'memory.max'), read(run, 'pids.max'), read(run, 'cpu.max')]).toEqual(['67108864', '32', '50000 100000']);
  // Files the kernel has only with swap accounting are written where they are, never made.
  expect(readdirSync(run)).not.toContain('memory.swap.max');
  await cgroup.join(4242);
  expect(read(run, 'cgroup.procs')).toBe('4242');

  expect(await cgroup.crossed()).toBeUndefined();
  writeFileSync(path.join(run, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 0\noom_kill 0\noom_group_kill 0\n');
  writeFileSync(path.join(run, 'pids.events'), 'max 3\n');
  expect(await cgroup.crossed()).toBe('process');
  writeFileSync(path.join(run, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n');
  expect(await cgroup.crossed()).toBe('memory');
});

test('cgroup v2 from the root cgroup uses /cairn; a hierarchy without memory and pids falls to v1, per controller', async () => {
  const unified = path.join(dir, 'unified');
  mkdirSync(unified);
  writeFileSync(path.join(unified, 'cgroup.controllers'), 'cpu memory pids\n');
  const root = await prepareCgroups(proc([`41 31 0:38 / ${unified} rw - cgroup2 cgroup2 rw`], ['0::/']));
  expect(root).toEqual({ plan: { version: 'v2', parents: { memory: path.join(unified, 'cairn'), pids: path.join(unified, 'cairn'), cpu: path.join(unified, 'cairn') } } });

  rmSync(path.join(dir, 'proc'), { recursive: true });
  writeFileSync(path.join(unified, 'cgroup.controllers'), 'hugetlb\n');
  const [memory, pids] = [path.join(dir, 'memory'), path.join(dir, 'pids')];
  mkdirSync(path.join(memory, 'process_api/abc'), { recursive: true });
  mkdirSync(pids);
  const found = await prepareCgroups(
    proc(
      [
        `35 31 0:32 / ${memory} rw - cgroup cgroup rw,memory`,
        `39 31 0:36 / ${pids} rw - cgroup cgroup rw,pids`,
        `41 31 0:38 / ${unified} rw - cgroup2 cgroup2 rw`,
      ],
      ['8:pids:/', '4:memory:/process_api/abc', '1:cpu,cpuacct:/', '0::/'],
    ),
  );
  const plan = { version: 'v1', parents: { memory: path.join(memory, 'process_api/abc/cairn'), pids: path.join(pids, 'cairn') } };
  expect(found).toEqual({ plan });

  const cgroup = await RunCgroup.create(plan as CgroupPlan, limits);
  const [made] = readdirSync(plan.parents.memory);
  expect(read(plan.parents.memory, made, 'memory.limit_in_bytes')).toBe('67108864');
  expect(read(plan.parents.pids, made, 'pids.max')).toBe('32');
  expect(cgroup.controllers).toEqual(['memory', 'pids']);
  writeFileSync(path.join(plan.parents.memory, made, 'memory.oom_control'), 'oom_kill_disable 0\nunder_oom 0\noom_kill 2\n');
  expect(await cgroup.crossed()).toBe('memory');
});

test('no hierarchy this server may write: no plan, and why', async () => {
  const found = await prepareCgroups(proc([], ['0::/']));
  expect(found).toEqual({ reason: expect.stringMatching(/no cgroup hierarchy/) });
});
