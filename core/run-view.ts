import type { RunEvent } from '../store/events';
import type { Run } from '../store/runs';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A run as the API and event bodies show it. */
export function runView(run: Run) {
  return {
    id: run.id,
    kind: run.kind,
    tool: run.tool,
    status: run.status,
    command: run.spec.command,
    extra_vars: run.spec.extra_vars,
    dry_run: run.spec.dry_run === true,
    timeout: run.timeout_seconds,
    queue: run.queue,
    error: run.error,
    exit_code: run.exit_code,
    requested_by: run.requested_by,
    actor_kind: run.actor_kind,
    rerun_of: run.rerun_of,
    parent_run_id: run.parent_run_id,
    step_name: run.step_name,
    step_index: run.step_index,
    template_id: run.template_id,
    // Names only: a sealed answer is never read back by anyone.
    secret_vars: run.sealed_vars ? Object.keys(run.sealed_vars).sort() : [],
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
