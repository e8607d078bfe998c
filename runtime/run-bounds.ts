import { promises as fs } from 'node:fs';
import os from 'node:os';
import { boundOf, type BoundingCgroups, type RunBounds } from '../core/runs/run-bound-settings';
import type { ExceededBound } from '../core/runs/run-outcome';
import { prepareCgroups, RunCgroup, type CgroupPlan } from './cgroups';
import { diskUsage } from './disk-usage';

/**
 * The resources one sandboxed start may use (--run-memory, --run-pids, --run-disk, --run-cpu),
 * and how they hold:
 *
 * - memory, processes and CPU by the start's own cgroup (runtime/cgroups.ts), which the
 *   sandbox is put in before its tool starts; the CPU both by a quota and by the runs' lower
 *   weight beside the server. Where no cgroup of a controller can be made, rlimits are the floor:
 *   RLIMIT_AS for memory (address space: runtimes that reserve more than they use fail under it),
 *   RLIMIT_NPROC for processes (counted per account: all runs of the run account together, and
 *   with a server that is not root, the server's own processes too), and a lower CPU priority
 *   (nice) with no quota.
 * - disk: RLIMIT_FSIZE bounds each file, the sandbox's /tmp is a tmpfs of that size, and a watcher
 *   measures the work dir and /tmp together every DISK_EVERY_MS, ending the sandbox when they
 *   reach the bound.
 *
 * A start that crosses a bound is ended; its exit names the bound (ExceededBound).
 */
export interface RunBoundsSettings extends RunBounds {
  /** Where the runs' cgroups go; undefined where none could be made (rlimits only). */
  cgroups?: CgroupPlan;
  /** Absolute path of util-linux prlimit, which starts the sandbox with its rlimits. */
  prlimit: string;
}

/** How often the watcher reads the cgroup's counters, and how long it waits between measures of the disk. */
const CHECK_EVERY_MS = 500;
const DISK_EVERY_MS = 2000;
/** The CPU priority of a sandbox no cgroup weighs. */
const RUNS_NICE = 10;

let cgroupsReady: ReturnType<typeof prepareCgroups> | undefined;
/** The cgroups this process bounds runs with, found and prepared once per process. */
export function runCgroups(): ReturnType<typeof prepareCgroups> {
  cgroupsReady ??= prepareCgroups();
  return cgroupsReady;
}

/** How each bound is held with these settings (core/run-bound-settings.ts enforcementOf). */
export function boundingCgroups(plan: CgroupPlan | undefined): BoundingCgroups | undefined {
  return plan && { version: plan.version, controllers: { memory: !!plan.parents.memory, pids: !!plan.parents.pids, cpu: !!plan.parents.cpu } };
}

/** The rlimits a sandbox starts with, as prlimit's arguments: the file size always, the floors where no cgroup holds. */
function rlimitArguments(settings: RunBoundsSettings): string[] {
  const args = [`--fsize=${settings.diskBytes}`];
  if (!settings.cgroups?.parents.pids) args.push(`--nproc=${settings.pids}`);
  if (!settings.cgroups?.parents.memory) args.push(`--as=${settings.memoryBytes}`);
  return args;
}

/** One sandbox start's bounds: its cgroup, its watcher, and the bound it crossed. */
export class SandboxBounds {
  private exceeded: ExceededBound | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  private constructor(
    private readonly settings: RunBoundsSettings,
    private readonly cgroup: RunCgroup | undefined,
  ) {}

  static async open(settings: RunBoundsSettings): Promise<SandboxBounds> {
    return new SandboxBounds(settings, settings.cgroups ? await RunCgroup.create(settings.cgroups, settings) : undefined);
  }

  /** The command that starts `argv` (bwrap's) with the sandbox's rlimits. */
  command(argv: string[]): { file: string; args: string[] } {
    return { file: this.settings.prlimit, args: [...rlimitArguments(this.settings), '--', ...argv] };
  }

  /**
   * Puts the sandbox's init in the cgroup while it waits to start the tool, so everything of the
   * tool is born in it. (bwrap's own monitor above it runs nothing of the tool's, and moving a
   * process costs a v1 hierarchy a few milliseconds each.)
   */
  async confine(sandboxInitPid: number): Promise<void> {
    await this.cgroup?.join(sandboxInitPid);
    if (this.cgroup?.controllers.includes('cpu')) return;
    try {
      os.setPriority(sandboxInitPid, RUNS_NICE);
    } catch {
      /* gone, or not ours to lower */
    }
  }

  /** Watches the running sandbox; `end` is called once, when it crosses a bound. */
  async watch(workDir: string, sandboxInitPid: number, end: () => void): Promise<void> {
    // The sandbox's /tmp, reached through its init while that is still the sandbox's (its pid is not reused).
    const mountNamespace = await fs.readlink(`/proc/${sandboxInitPid}/ns/mnt`).catch(() => undefined);
    const tmp = `/proc/${sandboxInitPid}/root/tmp`;
    const stillSandbox = async () => mountNamespace !== undefined && (await fs.readlink(`/proc/${sandboxInitPid}/ns/mnt`).catch(() => undefined)) === mountNamespace;
    let measuring = false;
    let lastMeasure = Date.now();
    const cross = (bound: ExceededBound['bound']) => {
      if (this.ended || this.exceeded) return;
      this.exceeded = boundOf(bound, this.settings);
      clearInterval(this.timer);
      end();
    };
    const check = async () => {
      const crossed = await this.cgroup?.crossed();
      if (crossed) return cross(crossed);
      if (measuring || Date.now() - lastMeasure < DISK_EVERY_MS) return;
      measuring = true;
      try {
        const roots = (await stillSandbox()) ? [workDir, tmp] : [workDir];
        if ((await diskUsage(roots)) >= this.settings.diskBytes) cross('disk');
      } finally {
        measuring = false;
        lastMeasure = Date.now();
      }
    };
    if (this.ended) return;
    this.timer = setInterval(() => void check().catch(() => undefined), CHECK_EVERY_MS);
  }

  /**
   * Once the sandbox has ended: the bound it crossed, if any, from the watcher or its cgroup and
   * work dir now. Its cgroup is removed meanwhile (anything left in it killed first).
   */
  async finish(workDir: string): Promise<ExceededBound | undefined> {
    this.ended = true;
    clearInterval(this.timer);
    const crossed = this.exceeded?.bound ?? (await this.cgroup?.crossed().catch(() => undefined));
    void this.cgroup?.remove();
    if (crossed) return this.exceeded ?? boundOf(crossed, this.settings);
    return (await diskUsage([workDir])) >= this.settings.diskBytes ? boundOf('disk', this.settings) : undefined;
  }
}
