import type { TerminalStatus } from './run';

/** How an execution ended, as the run workflow saw it. */
export type ExecutionOutcome =
  | { kind: 'exited'; exitCode: number | null; signal: string | null }
  | { kind: 'spawn_failed'; message: string }
  // The tool exited but its run still failed, for the reason given (an ansible run that matched no host).
  | { kind: 'exited_failed'; exitCode: number | null; message: string }
  | { kind: 'timed_out'; seconds: number }
  // The sandbox crossed one of its bounds (--run-memory, --run-pids, --run-disk) and was ended.
  | ({ kind: 'bound_exceeded'; exitCode: number | null } & ExceededBound)
  | { kind: 'canceled' }
  | { kind: 'lost'; message: string }
  // A parent (pipeline, workflow, split) whose children all ended well, or one that did not.
  | { kind: 'completed' }
  | { kind: 'children_failed'; message: string }
  // A step or shard that never ran: its dependency failed, or its parent ended first.
  | { kind: 'not_run'; message: string }
  // A run that looked released but whose release the audit chain does not record: never executed.
  | { kind: 'refused'; message: string }
  // Decisions: a held run rejected; a workflow's approval step approved, or denied (by an approver or its timeout).
  | { kind: 'rejected' }
  | { kind: 'approved' }
  | { kind: 'denied'; message: string };

/** A run bound its sandbox crossed: which, the flag that sets it, and its value as a person reads it (`64 MiB`). */
export interface ExceededBound {
  bound: 'memory' | 'process' | 'disk';
  flag: string;
  limit: string;
}

/** What a run (or an inventory script) that crossed a bound is told: `exceeded its memory bound (--run-memory 64 MiB)`. */
export const exceededBoundError = (exceeded: ExceededBound): string => `exceeded its ${exceeded.bound} bound (${exceeded.flag} ${exceeded.limit})`;

/** The error a rejected run ends with; the reason is never copied into it (spec part A 2.7 item 7). */
export const REJECTED_ERROR = 'rejected by an approver';
/** The error a workflow approval step denied by an approver ends with. */
export const DENIED_ERROR = 'denied by an approver';

export interface FinalState {
  status: TerminalStatus;
  error: string | null;
  exit_code: number | null;
}

/** The terminal status and error a user reads for an outcome. */
export function finalStateOf(outcome: ExecutionOutcome, canceledBy: string | null): FinalState {
  switch (outcome.kind) {
    case 'exited':
      if (outcome.exitCode === 0) return { status: 'succeeded', error: null, exit_code: 0 };
      if (outcome.signal) return { status: 'failed', error: `killed by signal ${outcome.signal}`, exit_code: null };
      return { status: 'failed', error: `exited with code ${outcome.exitCode}`, exit_code: outcome.exitCode };
    case 'spawn_failed':
      return { status: 'failed', error: outcome.message, exit_code: null };
    case 'exited_failed':
      return { status: 'failed', error: outcome.message, exit_code: outcome.exitCode };
    case 'bound_exceeded':
      return { status: 'failed', error: exceededBoundError(outcome), exit_code: outcome.exitCode };
    case 'timed_out':
      return { status: 'failed', error: `timed out after ${outcome.seconds} s`, exit_code: null };
    case 'canceled':
      return { status: 'canceled', error: canceledBy ? `canceled by ${canceledBy}` : 'canceled', exit_code: null };
    case 'lost':
      return { status: 'interrupted', error: outcome.message, exit_code: null };
    case 'completed':
      return { status: 'succeeded', error: null, exit_code: null };
    case 'children_failed':
      return { status: 'failed', error: outcome.message, exit_code: null };
    case 'not_run':
      return { status: 'canceled', error: outcome.message, exit_code: null };
    case 'refused':
      return { status: 'failed', error: outcome.message, exit_code: null };
    case 'rejected':
      return { status: 'rejected', error: REJECTED_ERROR, exit_code: null };
    case 'approved':
      return { status: 'succeeded', error: null, exit_code: null };
    case 'denied':
      return { status: 'rejected', error: outcome.message, exit_code: null };
  }
}

/** Why a run's inputs could not be resolved at execution (services/run-inputs.ts): a configuration error, the run fails with it. */
export class RunInputError extends Error {}
