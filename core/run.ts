/** A run and what it is made of: the domain types every layer reads (store/ keeps them, core/ decides on them). */
import type { Hold } from './policy-gate';

export const TERMINAL_STATUSES = ['succeeded', 'failed', 'canceled', 'interrupted', 'rejected'] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];
/** `held`: waiting for an approver's decision (the spec leaves the held status's name to us). */
export type RunStatus = 'held' | 'pending' | 'running' | TerminalStatus;

/** What was asked for: the tool's input and settings, kept as submitted and replayed by a rerun. */
export interface RunSpec {
  command: string;
  extra_vars: Record<string, unknown>;
  timeout?: number;
  /** Present only on a dry run, so the spec digest of every other run is unchanged by the field. */
  dry_run?: true;
  /** A shard of a split: its index and the split's shard count. */
  shard?: { index: number; count: number };
}

export interface Run {
  id: string;
  tool: string;
  status: RunStatus;
  spec: RunSpec;
  queue: string;
  timeout_seconds: number;
  error: string | null;
  exit_code: number | null;
  requested_by: string;
  account_id: string | null;
  token_id: string | null;
  actor_kind: string;
  rerun_of: string | null;
  /** What started the run (`source_id` names the schedule, trigger or original run). */
  source_kind: RunSourceKind;
  source_id: string | null;
  idempotency_key: string | null;
  attempts: number;
  exec_host: string | null;
  log_bytes: number;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  workflow_started_at: Date | null;
  cancel_requested_at: Date | null;
  cancel_requested_by: string | null;
  /** Why a held run is held; kept after the decision, for the record. Null for a run never held. */
  hold: Hold | null;
  /** What an approval binds to: `sha256:` + hex SHA-256 of the canonical JSON of the execution settings. */
  state_digest: string | null;
  kind: RunKind;
  /** The pipeline, workflow or split this run is a step or shard of. */
  parent_run_id: string | null;
  step_name: string | null;
  /** A step's position in its parent's definition, or a shard's index (0-based). */
  step_index: number | null;
  template_id: string | null;
  /** A parent's steps, or a split's shard plan, as submitted. */
  graph: unknown;
  /** Secret survey answers sealed to this run: var -> sealed text, opened only at execution. */
  sealed_vars: Record<string, string> | null;
  signal_delivered_at: Date | null;
}

/** A plain run; a parent (pipeline, workflow, split); or a child: a step, an approval step, a shard. */
export type RunKind = 'run' | 'pipeline' | 'workflow' | 'split' | 'step' | 'approval' | 'shard';

/** Kinds whose run is made of child runs and executes none of its own. */
export const PARENT_KINDS: readonly RunKind[] = ['pipeline', 'workflow', 'split'];

/** What started a run. */
export type RunSourceKind = 'api' | 'rerun' | 'schedule' | 'trigger' | 'callback';

/** A structured event of a run, in the order the run reached it. */
export interface RunEvent {
  seq: number;
  kind: string;
  body: Record<string, unknown>;
  at: Date;
}
