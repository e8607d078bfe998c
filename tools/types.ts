import type { RunSpec } from '../store/runs';

/** How to start a tool for one run: the argv, files to write into the run's work dir first, extra env. */
export interface ToolInvocation {
  argv: string[];
  files: Record<string, string>;
  env: Record<string, string>;
}

export interface Tool {
  name: string;
  /** The executable the server needs on PATH for this tool. */
  binary: string;
  invocation(spec: RunSpec): ToolInvocation;
}
