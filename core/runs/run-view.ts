import { entriesView } from '../notifications/notification-kinds';
import { ansibleView } from '../ansible/ansible-spec';
import { PARENT_KINDS, type RunEvent, type Run } from './run';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A preview's command is cut to this many characters (UTF-16 code units). */
export const COMMAND_PREVIEW_CHARS = 1000;
/** A preview leaves `extra_vars` out (null) when their JSON is longer than this many bytes. */
export const EXTRA_VARS_PREVIEW_BYTES = 4096;

/**
 * `full`: the whole run, for answers about one run. `preview`: the same fields bounded in size, for
 * list rows and event bodies, so a run submitted with megabytes of command or extra vars does not
 * make every list and event that mentions it megabytes too; the whole is one `GET` away.
 */
export type RunViewMode = 'full' | 'preview';

/** The command, cut to its preview length when asked, never between the two halves of a surrogate pair. */
function commandOf(command: string, mode: RunViewMode) {
  if (mode !== 'preview' || command.length <= COMMAND_PREVIEW_CHARS) return { command, command_truncated: false };
  const last = command.charCodeAt(COMMAND_PREVIEW_CHARS - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? COMMAND_PREVIEW_CHARS - 1 : COMMAND_PREVIEW_CHARS;
  return { command: command.slice(0, end), command_truncated: true };
}

/** The extra vars, or null in a preview when they are too large to carry whole (they are never cut part way). */
function extraVarsOf(extraVars: Record<string, unknown>, mode: RunViewMode) {
  if (mode === 'preview' && Buffer.byteLength(JSON.stringify(extraVars)) > EXTRA_VARS_PREVIEW_BYTES) {
    return { extra_vars: null, extra_vars_truncated: true };
  }
  return { extra_vars: extraVars, extra_vars_truncated: false };
}

/** A run as the API and event bodies show it: whole, or as a bounded preview (see RunViewMode). */
export function runView(run: Run, mode: RunViewMode = 'full') {
  return {
    id: run.id,
    kind: run.kind,
    tool: run.tool,
    status: run.status,
    ...commandOf(run.spec.command, mode),
    ...extraVarsOf(run.spec.extra_vars, mode),
    dry_run: run.spec.dry_run === true,
    timeout: run.timeout_seconds,
    queue: run.queue,
    error: run.error,
    exit_code: run.exit_code,
    requested_by: run.requested_by,
    actor_kind: run.actor_kind,
    rerun_of: run.rerun_of,
    source: { kind: run.source_kind, id: run.source_id },
    parent_run_id: run.parent_run_id,
    step_name: run.step_name,
    step_index: run.step_index,
    template_id: run.template_id,
    // The credentials the run is given, in order: ids only, never a value (spec part A 2.9).
    credentials: run.credentials,
    // The git project and commit the run works in (spec part A 4.5); null for none.
    project: run.spec.project ?? null,
    // The change label (spec part A 2.1, 2.13) and the fact cache setting (2.1), null for none.
    change: run.spec.change ?? null,
    fact_cache: run.spec.fact_cache ?? null,
    // An ansible run's playbook, inventory and controls (spec part A 2.1, 2.2); other runs have none,
    // but for a `limit` a provisioning callback keeps on any tool's run.
    ...(run.tool === 'ansible' ? ansibleView(run.spec) : run.spec.limit !== undefined ? { limit: run.spec.limit } : {}),
    // A shard's slice of its split: its index and the split's shard count; null for any other run.
    shard: run.spec.shard ?? null,
    // A parent's step definitions as submitted (the `steps` its state digest covers, docs/api.md
    // "The state digest"); null for other runs. Left out of previews, which stay small.
    ...(mode === 'full' ? { graph: PARENT_KINDS.includes(run.kind) ? (run.graph ?? null) : null } : {}),
    // Names only: a sealed answer is never read back by anyone.
    secret_vars: run.sealed_vars ? Object.keys(run.sealed_vars).sort() : [],
    // The run's own notification entries, URLs and keys masked (spec part A 2.11 rule 3).
    notifications: entriesView(run.notifications),
    attempts: run.attempts,
    log_bytes: run.log_bytes,
    // What is blocking an unfinished run (spec part A 3.3); only approvals are tracked so far.
    blocker: run.status === 'held' ? 'approval_needed' : null,
    hold: run.hold,
    state_digest: run.state_digest,
    created_at: iso(run.created_at),
    started_at: iso(run.started_at),
    finished_at: iso(run.finished_at),
  };
}

export type RunView = ReturnType<typeof runView>;

/** An event as the API shows it: its sequence, name and time beside its body's fields. */
export const eventView = (e: RunEvent) => ({ seq: e.seq, event: e.kind, at: e.at.toISOString(), ...e.body });
