import { formatByteSize } from '../byte-size';
import type { ExceededBound } from './run-outcome';

/**
 * The run bounds' settings (docs/operations.md, Run bounds): listed in core/config.ts SETTINGS
 * with the rest, and read there. Here on their own so the tool launcher, which names a crossed
 * bound by its flag, need not load the whole configuration.
 */
export const RUN_BOUND_SETTINGS = {
  runMemory: { flag: '--run-memory', env: 'CAIRN_RUN_MEMORY', help: "memory one run's sandbox may hold, bytes or 512m/2g (default 2g)" },
  runPids: { flag: '--run-pids', env: 'CAIRN_RUN_PIDS', help: "processes and threads one run's sandbox may hold at once (default 512)" },
  runDisk: { flag: '--run-disk', env: 'CAIRN_RUN_DISK', help: 'disk one run may fill, its work dir and private /tmp together, bytes or 1g/4g (default 4g)' },
  runCpu: { flag: '--run-cpu', env: 'CAIRN_RUN_CPU', help: 'CPU one run may use, in cores: 1, 0.5, 2 (default 1)' },
};

/** The resources one sandboxed start may use, as read from the settings. */
export interface RunBounds {
  memoryBytes: number;
  pids: number;
  diskBytes: number;
  /** Cores (1, 0.5). */
  cpu: number;
}

/** A bound as its error and the doctor name it: the flag that sets it and its value as read (`64 MiB`). */
export function boundOf(bound: ExceededBound['bound'], bounds: RunBounds): ExceededBound {
  switch (bound) {
    case 'memory':
      return { bound, flag: RUN_BOUND_SETTINGS.runMemory.flag, limit: formatByteSize(bounds.memoryBytes) };
    case 'process':
      return { bound, flag: RUN_BOUND_SETTINGS.runPids.flag, limit: String(bounds.pids) };
    case 'disk':
      return { bound, flag: RUN_BOUND_SETTINGS.runDisk.flag, limit: formatByteSize(bounds.diskBytes) };
  }
}

/** Which cgroup controllers hold a server's run bounds (runtime/cgroups.ts finds them at start). */
export interface BoundingCgroups {
  version: 'v1' | 'v2';
  controllers: { memory: boolean; pids: boolean; cpu: boolean };
}

/** How each bound is held: `cgroup v1`, `cgroup v2`, or the floor below them where no cgroup of its controller could be made. */
export function enforcementOf(cgroups: BoundingCgroups | undefined): Record<'memory' | 'process' | 'cpu' | 'disk', string> {
  const by = (controller: 'memory' | 'pids' | 'cpu', floor: string) => (cgroups?.controllers[controller] ? `cgroup ${cgroups.version}` : floor);
  return {
    memory: by('memory', 'rlimits only'),
    process: by('pids', 'rlimits only'),
    cpu: by('cpu', 'nice only'),
    disk: 'rlimits and the work dir watcher',
  };
}

/**
 * What the server's own execution side found at start and the diagnostics check reports: whether
 * runs are sandboxed, the cgroups that bound them (or why none could be made), and the
 * ansible-core version of the server.
 */
export interface ExecutionFacts {
  sandboxed: boolean;
  cgroups?: BoundingCgroups;
  cgroupsReason?: string;
  ansibleCore: string | null;
}
