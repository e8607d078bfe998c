import type { SandboxSettings } from './sandbox';

/** Messages between a server and its tool launcher process (activities/launcher-process.ts). */
export type LauncherRequest =
  | { type: 'spawn'; id: number; argv: string[]; cwd: string; env: Record<string, string>; sandbox?: SandboxSettings }
  | { type: 'kill'; id: number; graceMs: number };

export type LauncherEvent =
  | { type: 'spawned'; id: number; pid: number }
  | { type: 'output'; id: number; data: Buffer }
  | { type: 'exit'; id: number; exitCode: number | null; signal: string | null }
  | { type: 'error'; id: number; message: string };
