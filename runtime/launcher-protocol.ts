import type { ExceededBound } from '../core/runs/run-outcome';
import type { SandboxBind, SandboxSettings } from './sandbox';

/**
 * Messages between a server and its tool launcher process (runtime/launcher-process.ts).
 * Output is flow-controlled: the server acknowledges each `output` message's bytes (`ack`) once
 * it has taken them, and the launcher stops reading a tool's output while more than
 * {@link OUTPUT_WINDOW_BYTES} of it are unacknowledged.
 */
export type LauncherRequest =
  | { type: 'spawn'; id: number; argv: string[]; cwd: string; env: Record<string, string>; sandbox?: SandboxSettings; binds?: SandboxBind[] }
  | { type: 'kill'; id: number; graceMs: number }
  | { type: 'ack'; id: number; bytes: number };

/** Unacknowledged output bytes past which the launcher stops reading a tool's output; it reads again below half. */
export const OUTPUT_WINDOW_BYTES = 2 * 1024 * 1024;

export type LauncherEvent =
  | { type: 'spawned'; id: number; pid: number }
  | { type: 'output'; id: number; data: Buffer }
  // `exceeded`: the run bound the sandbox crossed, for which it was ended (runtime/run-bounds.ts).
  | { type: 'exit'; id: number; exitCode: number | null; signal: string | null; exceeded?: ExceededBound }
  | { type: 'error'; id: number; message: string };
