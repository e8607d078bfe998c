import type { Run } from '../runs/run';

/**
 * The claims of a run identity token (spec part B 5.4): who the run is, for a cloud's trust policy
 * to match. `sub` names the run under its project and template, so a policy can match a prefix
 * (`project:prj_…:template:tpl_…:*`); the same facts ride as claims of their own for clouds that
 * map claims to attributes.
 */

/** The longest a token lives: an hour, whatever the run's timeout. */
export const RUN_TOKEN_MAX_SECONDS = 60 * 60;
/** The shortest: five minutes, so a run with a short timeout still has time to present it. */
export const RUN_TOKEN_MIN_SECONDS = 5 * 60;

/** A token lives as long as the run may (zero: no timeout), within five minutes and an hour. */
export function runTokenLifetimeSeconds(timeoutSeconds: number): number {
  if (timeoutSeconds <= 0) return RUN_TOKEN_MAX_SECONDS;
  return Math.min(RUN_TOKEN_MAX_SECONDS, Math.max(RUN_TOKEN_MIN_SECONDS, timeoutSeconds));
}

/**
 * `project:<id or none>:template:<id or none>:run:<id>`; with the credential's `subject` setting
 * `template`, without the run: the same for every run of the template, for a cloud that matches
 * the subject exactly (an Azure federated identity credential).
 */
export function runTokenSubject(run: Pick<Run, 'id' | 'template_id' | 'spec'>, scope: string | undefined): string {
  const template = `project:${run.spec.project?.id ?? 'none'}:template:${run.template_id ?? 'none'}`;
  return scope === 'template' ? template : `${template}:run:${run.id}`;
}

/** The claims beside `iss`, `sub`, `aud`, `iat`, `nbf`, `exp` and `jti`. */
export function runTokenClaims(run: Pick<Run, 'id' | 'template_id' | 'spec' | 'requested_by' | 'actor_kind' | 'queue' | 'attempts'>, credentialId: string) {
  return {
    run_id: run.id,
    run_attempt: run.attempts,
    template_id: run.template_id ?? null,
    project_id: run.spec.project?.id ?? null,
    requested_by: run.requested_by,
    actor_kind: run.actor_kind,
    queue: run.queue,
    credential_id: credentialId,
  };
}
