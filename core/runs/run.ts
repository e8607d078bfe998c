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
  /** The Ansible `limit` (spec part A 2.2): the hosts the run is kept to; a provisioning callback sets the calling host. */
  limit?: string;
  /** The git project the run works in a copy of, and the commit it runs (spec part A 4.5); absent for none. */
  project?: { id: string; commit: string };
  /**
   * The ansible tool's input and other controls (spec part A 2.1, 2.2; tools/ansible.ts), each
   * present only when given to an ansible run, so the digest of every other run is unchanged.
   */
  playbook?: string;
  inventory_id?: string;
  inventory?: string;
  tags?: string[];
  skip_tags?: string[];
  forks?: number;
  /** 1 to 4; a larger value is stored as 4. */
  verbosity?: number;
  diff_mode?: true;
  /**
   * The fact cache (spec part A 2.1, 2.3; core/facts.ts): present only when it is on, so the
   * digest of every other run is unchanged. An approval binds to it through the state digest.
   */
  fact_cache?: { timeout_seconds: number };
  /** The change label runs are grouped by (spec part A 2.1, 2.13; services/changes.ts); present only when given. */
  change?: string;
}

/** The ansible fields of a run spec, as a submission or template carries them. */
export type AnsibleSpec = Pick<RunSpec, 'playbook' | 'inventory_id' | 'inventory' | 'limit' | 'tags' | 'skip_tags' | 'forks' | 'verbosity' | 'diff_mode'>;

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
  /** The run's own notification entries (spec part A 2.11), secrets sealed; see services/notifications.ts. */
  notifications: unknown[];
  /** The credential ids the run is given (spec part A 2.9), in order, opened and injected at execution; empty for none. */
  credentials: string[];
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
