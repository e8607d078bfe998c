import { randomBytes } from 'node:crypto';
import { constants as fsConstants, promises as fs, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { processAlive } from '../embedded/state';

/**
 * The control groups runs are bounded by: found once per server (prepareCgroups), one made per
 * sandbox start (RunCgroup), removed after it.
 *
 * cgroup v2 is used when the unified hierarchy offers the memory and pids controllers in a
 * cgroup this server may write: its parent cgroup (the root when the server is in the root).
 * A process may not sit in a v2 cgroup that hands controllers to children, so the runs' `cairn`
 * cgroup cannot be inside the server's own; it is beside it, in the parent the operator delegated
 * (systemd `Delegate=yes` with the server in a subgroup; see docs/operations.md).
 *
 * Otherwise cgroup v1: per controller (memory, pids, cpu) mounted and writable, a `cairn` cgroup
 * inside the server's own cgroup of that controller.
 */
export type Controller = 'memory' | 'pids' | 'cpu';
const CONTROLLERS: Controller[] = ['memory', 'pids', 'cpu'];

export interface CgroupPlan {
  version: 'v1' | 'v2';
  /** Per controller this server can bound runs with, the `cairn` cgroup its runs' cgroups go in (v2: one for all). */
  parents: Partial<Record<Controller, string>>;
}

/** The CFS period the CPU quota is given per: 100 ms, the kernel's default. */
const CPU_PERIOD_US = 100_000;
/** The runs' share of the CPU beside the server's own processes when it is contended: half (v1 shares, v2 weight). */
const RUNS_CPU_SHARES = 512;
const RUNS_CPU_WEIGHT = 50;

interface Mount {
  root: string;
  mountPoint: string;
  fsType: string;
  superOptions: string[];
}

/** The cgroup file systems this process sees (`<proc>/mountinfo`). */
async function cgroupMounts(proc: string): Promise<Mount[]> {
  const text = await fs.readFile(path.join(proc, 'mountinfo'), 'utf8').catch(() => '');
  const unescape = (field: string) => field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
  const mounts: Mount[] = [];
  for (const line of text.split('\n')) {
    const [before, after] = line.split(' - ');
    if (!after) continue;
    const fields = before.split(' ');
    const [fsType, , superOptions = ''] = after.split(' ');
    if (fsType === 'cgroup' || fsType === 'cgroup2') {
      mounts.push({ root: unescape(fields[3]), mountPoint: unescape(fields[4]), fsType, superOptions: superOptions.split(',') });
    }
  }
  return mounts;
}

/** This process's cgroup per hierarchy (`<proc>/cgroup`): no controllers for v2, else their names. */
async function ownCgroups(proc: string): Promise<{ controllers: string[]; path: string }[]> {
  const text = await fs.readFile(path.join(proc, 'cgroup'), 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [, controllers, ...rest] = line.split(':');
      return { controllers: controllers ? controllers.split(',') : [], path: rest.join(':') };
    });
}

/** Where a cgroup path shows in a mount of its hierarchy; undefined when the mount does not reach it. */
function directoryOf(mount: Mount, cgroupPath: string): string | undefined {
  const root = mount.root === '/' ? '' : mount.root;
  if (root && cgroupPath !== root && !cgroupPath.startsWith(`${root}/`)) return undefined;
  return path.resolve(mount.mountPoint, `.${cgroupPath.slice(root.length)}`);
}

// A cgroup's limits and counters are small files the kernel answers at once: they are written and
// read synchronously, which costs a run's start a fraction of what the three or four thread-pool
// round trips of an asynchronous open, stat, read or write, and close do. Moving a process in (`cgroup.procs`) can
// take a v1 hierarchy milliseconds, so `join` writes asynchronously, as does removing a cgroup.
const write = (file: string, value: string) => writeFileSync(file, value);
/** Writes a cgroup file the kernel may not have (ENOENT then): it is never created. */
const writeIfPresent = (file: string, value: string) => {
  try {
    writeFileSync(file, value, { flag: 'r+' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
};
/** A cgroup file's text; empty when it cannot be read (the cgroup is gone). */
const readText = (file: string) => {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
};

/**
 * Finds and prepares the `cairn` parents this server's runs' cgroups go in: cgroup v2 when it
 * can, else v1, else none (runs are then bounded by rlimits only). Answers the plan, or why there
 * is none. Cgroups left by a server or launcher that died are removed. `proc` is where this
 * process's mountinfo and cgroup files are read.
 */
export async function prepareCgroups(proc = '/proc/self'): Promise<{ plan: CgroupPlan } | { reason: string }> {
  const [mounts, own] = await Promise.all([cgroupMounts(proc), ownCgroups(proc)]);
  const reasons: string[] = [];
  const unified = mounts.find((m) => m.fsType === 'cgroup2');
  const ownUnified = own.find((c) => c.controllers.length === 0);
  if (unified && ownUnified) {
    const v2 = await prepareV2(unified, ownUnified.path);
    if ('plan' in v2) return v2;
    reasons.push(v2.reason);
  }
  const parents: CgroupPlan['parents'] = {};
  for (const controller of CONTROLLERS) {
    const mount = mounts.find((m) => m.fsType === 'cgroup' && m.superOptions.includes(controller));
    const mine = own.find((c) => c.controllers.includes(controller));
    const dir = mount && mine ? directoryOf(mount, mine.path) : undefined;
    if (!dir) continue;
    const parent = path.join(dir, 'cairn');
    try {
      await fs.mkdir(parent, { recursive: true });
      // Made by another account before (root), it may still not be this server's to write in.
      await fs.access(parent, fsConstants.W_OK);
      if (controller === 'cpu') write(path.join(parent, 'cpu.shares'), String(RUNS_CPU_SHARES));
      parents[controller] = parent;
    } catch (err) {
      reasons.push(`cgroup v1 ${controller}: ${(err as Error).message}`);
    }
  }
  if (Object.keys(parents).length === 0) return { reason: reasons.join('; ') || 'no cgroup hierarchy with the memory, pids or cpu controller is mounted' };
  const plan: CgroupPlan = { version: 'v1', parents };
  await sweepLeftovers(plan);
  return { plan };
}

async function prepareV2(mount: Mount, ownPath: string): Promise<{ plan: CgroupPlan } | { reason: string }> {
  const own = directoryOf(mount, ownPath);
  if (!own) return { reason: 'cgroup v2: this process is outside the mounted hierarchy' };
  const delegated = own === mount.mountPoint ? own : path.dirname(own);
  const offered = readText(path.join(delegated, 'cgroup.controllers')).trim().split(/\s+/);
  if (!offered.includes('memory') || !offered.includes('pids')) return { reason: `cgroup v2: ${delegated} does not offer the memory and pids controllers` };
  const controllers = CONTROLLERS.filter((c) => offered.includes(c));
  const enable = controllers.map((c) => `+${c}`).join(' ');
  const parent = path.join(delegated, 'cairn');
  try {
    write(path.join(delegated, 'cgroup.subtree_control'), enable);
    await fs.mkdir(parent, { recursive: true });
    await fs.access(parent, fsConstants.W_OK);
    write(path.join(parent, 'cgroup.subtree_control'), enable);
    if (controllers.includes('cpu')) write(path.join(parent, 'cpu.weight'), String(RUNS_CPU_WEIGHT));
  } catch (err) {
    return { reason: `cgroup v2: ${delegated} is not delegated to this server (${(err as Error).message})` };
  }
  const plan: CgroupPlan = { version: 'v2', parents: Object.fromEntries(controllers.map((c) => [c, parent])) };
  await sweepLeftovers(plan);
  return { plan };
}

/** Each distinct `cairn` parent of a plan. */
const parentDirs = (plan: CgroupPlan) => [...new Set(Object.values(plan.parents))];

/** Removes run cgroups whose maker (named first in the cgroup's name) is no longer alive. */
async function sweepLeftovers(plan: CgroupPlan): Promise<void> {
  for (const parent of parentDirs(plan)) {
    for (const name of await fs.readdir(parent).catch(() => [] as string[])) {
      const maker = /^(\d+)-/.exec(name)?.[1];
      if (maker && !processAlive(Number(maker))) await removeCgroup(path.join(parent, name));
    }
  }
}

let made = 0;

/** The limits one run's cgroup holds. */
export interface CgroupLimits {
  memoryBytes: number;
  pids: number;
  cpu: number;
}

/** One sandbox start's cgroup (one directory per v1 controller, one in all for v2). */
export class RunCgroup {
  private constructor(
    private readonly plan: CgroupPlan,
    private readonly dirs: Partial<Record<Controller, string>>,
  ) {}

  /** Makes the cgroup with its limits set; nothing is left behind when that fails. */
  static async create(plan: CgroupPlan, limits: CgroupLimits): Promise<RunCgroup> {
    // Named by its maker's pid, so a server that finds it after the maker died removes it.
    const name = `${process.pid}-${++made}-${randomBytes(3).toString('hex')}`;
    const dirs = Object.fromEntries(Object.entries(plan.parents).map(([c, parent]) => [c, path.join(parent, name)])) as RunCgroup['dirs'];
    const cgroup = new RunCgroup(plan, dirs);
    try {
      for (const dir of cgroup.distinctDirs()) await fs.mkdir(dir);
      cgroup.setLimits(limits);
    } catch (err) {
      await cgroup.remove();
      throw new Error(`the run's cgroup could not be made: ${(err as Error).message}`);
    }
    return cgroup;
  }

  private distinctDirs(): string[] {
    return [...new Set(Object.values(this.dirs))];
  }

  private setLimits(limits: CgroupLimits): void {
    const { memory, pids, cpu } = this.dirs;
    const quota = String(Math.max(1000, Math.round(limits.cpu * CPU_PERIOD_US)));
    if (this.plan.version === 'v2') {
      if (memory) {
        write(path.join(memory, 'memory.max'), String(limits.memoryBytes));
        // Swap would let a run hold more than its bound; absent without swap accounting.
        writeIfPresent(path.join(memory, 'memory.swap.max'), '0');
      }
      if (pids) write(path.join(pids, 'pids.max'), String(limits.pids));
      if (cpu) write(path.join(cpu, 'cpu.max'), `${quota} ${CPU_PERIOD_US}`);
      return;
    }
    if (memory) {
      write(path.join(memory, 'memory.limit_in_bytes'), String(limits.memoryBytes));
      // Memory plus swap held to the same bound; absent without swap accounting.
      writeIfPresent(path.join(memory, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes));
    }
    if (pids) write(path.join(pids, 'pids.max'), String(limits.pids));
    if (cpu) {
      write(path.join(cpu, 'cpu.cfs_period_us'), String(CPU_PERIOD_US));
      write(path.join(cpu, 'cpu.cfs_quota_us'), quota);
    }
  }

  /** The controllers this cgroup bounds. */
  get controllers(): Controller[] {
    return Object.keys(this.dirs) as Controller[];
  }

  /** Moves a process into the cgroup (every controller's); its children are born in it. */
  async join(pid: number): Promise<void> {
    for (const dir of this.distinctDirs()) await fs.writeFile(path.join(dir, 'cgroup.procs'), String(pid));
  }

  /** The bound the cgroup's processes crossed so far: the OOM killer killed one, or a fork was refused at the process bound. */
  async crossed(): Promise<'memory' | 'process' | undefined> {
    const { memory, pids } = this.dirs;
    const count = (text: string, key: string) => Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
    if (memory) {
      const file = this.plan.version === 'v2' ? 'memory.events' : 'memory.oom_control';
      if (count(readText(path.join(memory, file)), 'oom_kill') > 0) return 'memory';
    }
    if (pids && count(readText(path.join(pids, 'pids.events')), 'max') > 0) return 'process';
    return undefined;
  }

  /** Kills everything still in the cgroup and removes it; never fails (a sweep takes what stays). */
  async remove(): Promise<void> {
    for (const dir of this.distinctDirs()) await removeCgroup(dir);
  }
}

/** Kills every process in a cgroup and removes it, retrying while the last ones exit; best effort (a sweep takes what stays). */
async function removeCgroup(dir: string): Promise<void> {
  // cgroup v2 kills a whole cgroup at once where the kernel has cgroup.kill (5.14).
  try {
    writeIfPresent(path.join(dir, 'cgroup.kill'), '1');
  } catch {
    /* removed already, or not ours to write: the kills below still go */
  }
  for (let attempt = 0; attempt < 50; attempt++) {
    const procs = readText(path.join(dir, 'cgroup.procs'));
    for (const pid of procs.split('\n').filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* gone already */
      }
    }
    try {
      await fs.rmdir(dir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBUSY') return;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
