import { formatByteSize } from './byte-size';
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
