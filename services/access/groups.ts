import { badRequest, conflict, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { getAccountById } from '../../store/accounts';
import { isUniqueViolation, type Db, type Sql } from '../../store/db';
import { deleteGroup, deleteMember, getGroupForUpdate, getMembership, insertGroup, listGroups, putMember, type Group, type GroupKind, type Membership, type OrgRole } from '../../store/groups';
import type { Caller } from '../../store/tokens';
import { refuseAgentAccessChange } from './access';
import { appendEntry, recordMutation, type AuditOrigin } from '../audit/audit';
import { deleteWithAttachments } from '../notifications/notifications';

/**
 * Teams and organizations and their members (spec part A 2.8, 4.11). An admin, and a person,
 * creates and deletes them and their memberships; deleting one removes its memberships (and a
 * team's grants). Everyone below admin sees only the teams and organizations it belongs to.
 */

const NOUN: Record<GroupKind, string> = { team: 'team', org: 'organization' };

/** A team or organization as the API shows it. */
export function groupView(group: Group) {
  return { id: group.id, name: group.name, created_by: group.created_by, created_at: group.created_at.toISOString() };
}

/** A membership as the API shows it: an organization member's `role`, none for a team member. */
export function membershipView(membership: Membership) {
  return {
    user_id: membership.account_id,
    username: membership.username,
    ...(membership.role !== null ? { role: membership.role } : {}),
    added_at: membership.added_at.toISOString(),
  };
}

/** A new team or organization with its chain entry; 409 naming `name` when the name is taken. */
export async function createGroup(sql: Sql, caller: Caller, origin: AuditOrigin, kind: GroupKind, name: string): Promise<Group> {
  refuseAgentAccessChange(caller);
  try {
    return await recordMutation(sql, origin, 201, async (tx, entry) => {
      const group = await insertGroup(tx, kind, { id: newId(kind), name, created_by: caller.account.username });
      entry.body = { kind: `${kind}.created`, [`${kind}_id`]: group.id, name };
      return group;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`a ${NOUN[kind]} named ${JSON.stringify(name)} exists already; names are unique`, { field: 'name' });
    throw err;
  }
}

/** Deletes a team or organization with its memberships (and a team's grants); its chain entry counts what went. */
export async function removeGroup(sql: Sql, caller: Caller, origin: AuditOrigin, kind: GroupKind, id: string): Promise<void> {
  refuseAgentAccessChange(caller);
  await recordMutation(sql, origin, 204, async (tx, entry) => {
    const group = await getGroupForUpdate(tx, kind, id);
    if (!group) throw notFound(`${NOUN[kind]} ${id}`);
    const remove = async () => {
      const removed = await deleteGroup(tx, kind, group.id);
      if (!removed) throw notFound(`${NOUN[kind]} ${id}`);
      return removed;
    };
    // An organization's notification attachments go with it, as its chain entry's path states (spec part A 4.16).
    const { removed, attachments } = kind === 'org' ? await deleteWithAttachments(tx, origin, 'org', group.id, remove) : { removed: await remove(), attachments: undefined };
    entry.body = {
      kind: `${kind}.deleted`,
      [`${kind}_id`]: group.id,
      name: group.name,
      members_removed: removed.members,
      ...(kind === 'team' ? { grants_removed: removed.grants } : { notification_attachments: attachments }),
    };
  });
}

/** The group, when the caller may see it: an admin sees every one, anyone else those it belongs to. */
async function findVisibleGroup(db: Db, caller: Caller, kind: GroupKind, id: string): Promise<Group | undefined> {
  const seen = await listGroups(db, kind, { limit: 1, offset: 0, ids: [id] }, caller.account.role === 'admin' ? undefined : caller.account.id);
  return seen.rows[0];
}

/** The group, when the caller may see it; 404 alike for one that does not exist. */
export async function visibleGroup(db: Db, caller: Caller, kind: GroupKind, id: string): Promise<Group> {
  const group = await findVisibleGroup(db, caller, kind, id);
  if (!group) throw notFound(`${NOUN[kind]} ${id}`);
  return group;
}

/**
 * Adds an account to a team, or to an organization with a role. Adding a member again with the
 * same role changes nothing and records nothing; with another role, the role changes.
 */
export async function addMember(
  sql: Sql,
  caller: Caller,
  origin: AuditOrigin,
  kind: GroupKind,
  groupId: string,
  input: { user_id: string; role?: OrgRole },
): Promise<{ membership: Membership; status: 200 | 201 }> {
  refuseAgentAccessChange(caller);
  const role = kind === 'org' ? (input.role ?? 'member') : null;
  return sql.begin(async (tx) => {
    const group = await getGroupForUpdate(tx, kind, groupId);
    if (!group) throw notFound(`${NOUN[kind]} ${groupId}`);
    const account = await getAccountById(tx, input.user_id);
    if (!account) throw badRequest(`user_id: user ${input.user_id} not found`, { field: 'user_id' });
    const before = await getMembership(tx, kind, group.id, account.id);
    if (before && before.role === role) return { membership: before, status: 200 as const };
    const membership = await putMember(tx, kind, group.id, account.id, role);
    const status = before ? 200 : 201;
    await appendEntry(tx, origin, status, {
      id: newId('aud'),
      run_id: null,
      body: {
        kind: before ? `${kind}.member_role_changed` : `${kind}.member_added`,
        [`${kind}_id`]: group.id,
        account_id: account.id,
        ...(role !== null ? { role, ...(before ? { previous_role: before.role } : {}) } : {}),
      },
    });
    return { membership, status };
  }) as Promise<{ membership: Membership; status: 200 | 201 }>;
}

/** Removes an account from a team or organization; 404 when it is not a member. */
export async function removeMember(sql: Sql, caller: Caller, origin: AuditOrigin, kind: GroupKind, groupId: string, accountId: string): Promise<void> {
  refuseAgentAccessChange(caller);
  await recordMutation(sql, origin, 204, async (tx, entry) => {
    const group = await getGroupForUpdate(tx, kind, groupId);
    if (!group) throw notFound(`${NOUN[kind]} ${groupId}`);
    if (!(await deleteMember(tx, kind, group.id, accountId))) throw notFound(`member ${accountId} of ${NOUN[kind]} ${group.id}`);
    entry.body = { kind: `${kind}.member_removed`, [`${kind}_id`]: group.id, account_id: accountId };
  });
}

/**
 * An organization a caller places an object in: it must exist and, below admin, the caller must
 * belong to it; otherwise the field is refused as if the organization did not exist.
 */
export async function requireOrgPlacement(db: Db, caller: Caller, orgId: string, field: string): Promise<void> {
  if (!(await findVisibleGroup(db, caller, 'org', orgId))) throw badRequest(`${field}: organization ${orgId} not found among the organizations ${caller.account.username} belongs to`, { field });
}
