/**
 * Object access as pure rules (spec part A 2.8, part B 5.2 rules 3 to 5): the permissions a grant
 * gives, in order; the ceiling an account's global role puts on whatever it is granted; and what
 * a caller may do to a run given what it holds on the run's template.
 */

export const PERMISSIONS = ['read', 'use', 'manage'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** A permission as a level: each includes the ones below it; 0 is none. */
export const LEVELS: Record<Permission, number> = { read: 1, use: 2, manage: 3 };

export type GlobalRole = 'admin' | 'operator' | 'viewer';

/**
 * The most an account in a role holds on any object, however it came by it (owner, grant, team,
 * organization): a viewer uses at most and never manages, so an organization admin on a viewer
 * account uses the organization's objects (spec part A 2.8). An admin manages everything.
 */
const ROLE_CEILING: Record<GlobalRole, number> = { admin: LEVELS.manage, operator: LEVELS.manage, viewer: LEVELS.use };

/** The level an account holds, given the highest level its ownership, grants and organizations give it. */
export function heldLevel(role: GlobalRole, granted: number): number {
  return role === 'admin' ? LEVELS.manage : Math.min(granted, ROLE_CEILING[role]);
}

/** A level by name, for messages: `none` below read. */
export function levelName(level: number): Permission | 'none' {
  return PERMISSIONS[level - 1] ?? 'none';
}

/** What a caller may ask of a run. */
export type RunAction = 'read' | 'cancel' | 'rerun';

/** What decides a caller's access to a run. */
export interface RunAccessFacts {
  admin: boolean;
  /** The caller's account asked for the run. */
  requester: boolean;
  /** The run was launched from a template (a rerun of such a run too). */
  fromTemplate: boolean;
  /** The level the caller holds on that template; 0 when it holds none or the template is gone. */
  templateLevel: number;
}

/**
 * A run has no grants of its own: it follows its template, as a job follows its job template.
 * - read: an admin, the requester, or whoever may read the run's template;
 * - cancel: an admin, the requester, or whoever manages the run's template;
 * - rerun (and retry): an admin; for a template's run whoever may use the template, as launching
 *   it needs; for a plain run its requester.
 */
export function runAllows(action: RunAction, facts: RunAccessFacts): boolean {
  if (facts.admin) return true;
  switch (action) {
    case 'read':
      return followerAllows('read', facts);
    case 'cancel':
      return followerAllows('change', facts);
    case 'rerun':
      return facts.fromTemplate ? facts.templateLevel >= LEVELS.use : facts.requester;
  }
}

/** What a caller may ask of an object that follows a template: read it, or change it (cancel, edit, delete). */
export type FollowerAction = 'read' | 'change';

/**
 * Runs, schedules and triggers have no grants of their own: each follows the template it fires,
 * with its requester or owner in the place of an owner. An admin, the owner, or whoever reads the
 * template reads it; an admin, the owner, or whoever manages the template changes it. One without
 * a template (a plain run, a schedule of a run spec) is its owner's and the admins'.
 */
export function followerAllows(action: FollowerAction, facts: Omit<RunAccessFacts, 'fromTemplate'>): boolean {
  if (facts.admin || facts.requester) return true;
  return facts.templateLevel >= (action === 'read' ? LEVELS.read : LEVELS.manage);
}
