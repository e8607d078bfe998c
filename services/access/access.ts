import { followerAllows, heldLevel, LEVELS, levelName, runAllows, type FollowerAction, type Permission, type RunAction } from '../../core/access/access';
import { badRequest, forbidden, notFound } from '../../core/errors';
import type { Run } from '../../core/runs/run';
import { grantedLevel, kindOfObject, OBJECT_KINDS } from '../../store/access';
import type { Db } from '../../store/db';
import { getRun } from '../../store/runs';
import { actorKindOf, type Caller } from '../../store/tokens';

/**
 * The one access check (spec part A 2.8, part B 5.2 rules 3 to 5). Every route that reads, uses or
 * changes an object asks here, and every list filters by the same rule in SQL
 * (store/access.ts). An admin holds manage on everything; anyone else holds the highest of what
 * owning the object, its organization's role and the grants to it and its teams give, capped by
 * its global role (core/access.ts). An agent token holds what its account holds.
 *
 * A caller who may not read an object is told it does not exist (404), so ids of what it may not
 * see are not confirmed; a caller who reads it but lacks the permission is refused 403 naming it.
 */

/** The level the caller holds on an object, and whether the object exists. */
export async function levelOn(db: Db, caller: Caller, object: string): Promise<{ exists: boolean; level: number }> {
  const { exists, level } = await grantedLevel(db, caller.account.id, object);
  return { exists, level: exists ? heldLevel(caller.account.role, level) : 0 };
}

export interface AccessRequest {
  /** What the caller is doing, for the refusal: `launching template tpl_…`. */
  action: string;
  /** For an object named in a body: a missing or unreadable one is a 400 naming this field, not a 404. */
  field?: string;
  /**
   * The caller reads every object of this kind by its role, whatever its grants (an operator
   * reads every notification target, spec part A 4.8): an existing object is never hidden from
   * it, so holding too little is a 403 naming the grant.
   */
  readByRole?: boolean;
}

/**
 * Requires the caller to hold `needed` on the object: 404 when it may not read it (or it does not
 * exist), 403 naming the grant when it reads it but holds less. A queue is not a row, so it is
 * never "not found": too little is a 403.
 */
export async function requireAccess(db: Db, caller: Caller, object: string, needed: Permission, request: AccessRequest): Promise<void> {
  const kind = kindOfObject(object);
  if (!kind) throw new Error(`no object kind begins ${JSON.stringify(object)}`);
  const { noun, table } = OBJECT_KINDS[kind];
  const { exists, level } = await levelOn(db, caller, object);
  if (table !== null && (!exists || (level < LEVELS.read && !request.readByRole))) {
    if (request.field) throw badRequest(`${request.field}: ${noun} ${object} not found`, { field: request.field });
    throw notFound(`${noun} ${object}`);
  }
  if (level < LEVELS[needed]) {
    throw forbidden(`${request.action} needs the ${needed} grant on ${object}; ${caller.account.username} holds ${levelName(level)}`, {
      required_grant: needed,
      object,
      ...(request.field ? { field: request.field } : {}),
    });
  }
}

/**
 * Whom a list is filtered for: undefined (every row) for an admin, else the caller's account,
 * whose readable rows are filtered in SQL so that `total` counts only them (spec part A 2.15).
 */
export function readerOf(caller: Caller): string | undefined {
  return caller.account.role === 'admin' ? undefined : caller.account.id;
}

/** What each run action is called in a refusal. */
const RUN_ACTIONS: Record<RunAction, string> = { read: 'reading', cancel: 'canceling', rerun: 'rerunning' };

/**
 * Requires the caller may do `action` to the run (core/access.ts runAllows): 404 when it may not
 * read it, 403 when it reads it but may not do this.
 */
export async function requireRunAccess(db: Db, caller: Caller, run: Run, action: RunAction): Promise<void> {
  const admin = caller.account.role === 'admin';
  const requester = run.account_id !== null && run.account_id === caller.account.id;
  const fromTemplate = run.template_id !== null;
  // The template is read only when the answer depends on it.
  const settled = admin || (requester && action !== 'rerun');
  const templateLevel = !settled && fromTemplate ? (await levelOn(db, caller, run.template_id!)).level : 0;
  const facts = { admin, requester, fromTemplate, templateLevel };
  if (!runAllows('read', facts)) throw notFound(`run ${run.id}`);
  if (!runAllows(action, facts)) {
    const why =
      action === 'cancel'
        ? `its requester, or the manage grant on template ${run.template_id}`
        : fromTemplate
          ? `the use grant on template ${run.template_id}, as launching it does`
          : 'its requester: a plain run is rerun by the account that asked for it';
    throw forbidden(`${RUN_ACTIONS[action]} run ${run.id} needs ${why}`, {
      ...(action === 'cancel' || fromTemplate ? { required_grant: action === 'cancel' ? 'manage' : 'use', object: run.template_id } : {}),
    });
  }
}

/** An object that follows a template as a run does (a schedule, a trigger): what decides access to it. */
export interface Follower {
  /** `schedule sch_…`, for messages. */
  noun: string;
  ownerId: string | null;
  templateId: string | null;
}

/**
 * Requires the caller may read or change a schedule or trigger (core/access.ts followerAllows):
 * 404 when it may not read it, 403 naming the grant when it reads it but may not change it.
 */
export async function requireFollowerAccess(db: Db, caller: Caller, follower: Follower, action: FollowerAction): Promise<void> {
  const admin = caller.account.role === 'admin';
  const requester = follower.ownerId !== null && follower.ownerId === caller.account.id;
  const templateLevel = !admin && !requester && follower.templateId ? (await levelOn(db, caller, follower.templateId)).level : 0;
  const facts = { admin, requester, templateLevel };
  if (!followerAllows('read', facts)) throw notFound(follower.noun);
  if (!followerAllows(action, facts)) {
    throw forbidden(
      `changing ${follower.noun} needs its owner, ${follower.templateId ? `or the manage grant on template ${follower.templateId}` : 'or an admin'}`,
      follower.templateId ? { required_grant: 'manage', object: follower.templateId } : {},
    );
  }
}

/** The run, when the caller may read it; 404 alike for a run that does not exist and one it may not read. */
export async function readableRun(db: Db, caller: Caller, runId: string): Promise<Run> {
  const run = await getRun(db, runId);
  if (!run) throw notFound(`run ${runId}`);
  await requireRunAccess(db, caller, run, 'read');
  return run;
}

/**
 * A run on a named queue needs the use grant on `queue:<name>` below admin; the default queue
 * (`""`) needs none. Every run passes here (submissions, pipelines, launches, reruns, retries and
 * every unattended launch), so none reaches a queue its account may not use.
 */
export async function requireQueueUse(db: Db, caller: Caller, queue: string): Promise<void> {
  if (queue === '' || caller.account.role === 'admin') return;
  await requireAccess(db, caller, `${OBJECT_KINDS.queue.prefix}${queue}`, 'use', { action: `running on queue ${queue}`, field: 'queue' });
}

/**
 * Who may do what with access itself is decided by a person: an agent token, whatever its
 * account's role and grants, may not create or delete teams, organizations, memberships or grants.
 */
export function refuseAgentAccessChange(caller: Caller): void {
  if (actorKindOf(caller) === 'agent') {
    throw forbidden("an agent may not change teams, organizations or grants, whatever its account's role or grants: a person does");
  }
}
