import { type Db, type Page, type PageRequest, readPage } from './db';

/**
 * Teams and organizations (spec part A 2.8, 4.11): both are named sets of accounts, stored alike
 * in their own tables; an organization's members carry a role (`admin` or `member`), a team's
 * carry none.
 */

export type GroupKind = 'team' | 'org';

const TABLES = {
  team: { groups: 'teams', members: 'team_members', key: 'team_id' },
  org: { groups: 'orgs', members: 'org_members', key: 'org_id' },
} as const;

export type OrgRole = 'admin' | 'member';

export interface Group {
  id: string;
  name: string;
  created_by: string;
  created_at: Date;
}

export interface Membership {
  group_id: string;
  account_id: string;
  username: string;
  /** An organization member's role; null for a team member. */
  role: OrgRole | null;
  added_at: Date;
}

const GROUP_COLUMNS = ['id', 'name', 'created_by', 'created_at'];

export async function insertGroup(db: Db, kind: GroupKind, group: Omit<Group, 'created_at'>): Promise<Group> {
  const [row] = await db<Group[]>`INSERT INTO ${db(TABLES[kind].groups)} ${db(group)} RETURNING ${db(GROUP_COLUMNS)}`;
  return row;
}

export async function getGroupForUpdate(db: Db, kind: GroupKind, id: string): Promise<Group | undefined> {
  const [row] = await db<Group[]>`SELECT ${db(GROUP_COLUMNS)} FROM ${db(TABLES[kind].groups)} WHERE id = ${id} FOR UPDATE`;
  return row;
}

/** The group of this name (names are unique per kind), if any. */
export async function getGroupByName(db: Db, kind: GroupKind, name: string): Promise<Group | undefined> {
  const [row] = await db<Group[]>`SELECT ${db(GROUP_COLUMNS)} FROM ${db(TABLES[kind].groups)} WHERE name = ${name}`;
  return row;
}

/**
 * Deletes a group; its memberships, and a team's grants, go with it (ON DELETE CASCADE). Says how
 * many memberships and grants went, as the group stood.
 */
export async function deleteGroup(db: Db, kind: GroupKind, id: string): Promise<{ members: number; grants: number } | undefined> {
  const { groups, members, key } = TABLES[kind];
  const grants = kind === 'team' ? db`(SELECT count(*) FROM grants WHERE team_id = ${id})` : db`0`;
  const [row] = await db<{ members: number; grants: number }[]>`
    DELETE FROM ${db(groups)} WHERE id = ${id}
    RETURNING (SELECT count(*) FROM ${db(members)} WHERE ${db(key)} = ${id})::int AS members, ${grants}::int AS grants`;
  return row;
}

/** A page of groups, oldest first, with the total: every group, or only those `memberId` belongs to. */
export async function listGroups(
  db: Db,
  kind: GroupKind,
  page: PageRequest,
  memberId?: string,
): Promise<Page<Group>> {
  const { groups, members, key } = TABLES[kind];
  const ofMember = memberId !== undefined ? db`id IN (SELECT ${db(key)} FROM ${db(members)} WHERE account_id = ${memberId})` : null;
  return readPage(db, { columns: db(GROUP_COLUMNS), from: db(groups), order: db`id`, where: [ofMember] }, page);
}

const membershipColumns = (db: Db, kind: GroupKind) =>
  db`m.${db(TABLES[kind].key)} AS group_id, m.account_id, a.username, ${kind === 'org' ? db`m.role` : db`NULL::text`} AS role, m.added_at`;

/** The account's membership of the group, if any. */
export async function getMembership(db: Db, kind: GroupKind, groupId: string, accountId: string): Promise<Membership | undefined> {
  const { members, key } = TABLES[kind];
  const [row] = await db<Membership[]>`
    SELECT ${membershipColumns(db, kind)} FROM ${db(members)} m JOIN accounts a ON a.id = m.account_id
    WHERE m.${db(key)} = ${groupId} AND m.account_id = ${accountId}`;
  return row;
}

/** A page of a group's members, oldest membership first (account id breaking ties), with the total. */
export async function listMembers(
  db: Db,
  kind: GroupKind,
  groupId: string,
  page: PageRequest,
): Promise<Page<Membership>> {
  const { members, key } = TABLES[kind];
  return readPage(
    db,
    {
      columns: membershipColumns(db, kind),
      from: db`${db(members)} m JOIN accounts a ON a.id = m.account_id`,
      idColumn: 'm.account_id',
      order: db`m.added_at, m.account_id`,
      where: [db`m.${db(key)} = ${groupId}`],
    },
    page,
  );
}

/** Adds the account to the group, or sets its organization role; the membership as it now stands. */
export async function putMember(db: Db, kind: GroupKind, groupId: string, accountId: string, role: OrgRole | null): Promise<Membership> {
  const { members, key } = TABLES[kind];
  const row = { [key]: groupId, account_id: accountId, ...(kind === 'org' ? { role } : {}) };
  const onConflict = kind === 'org' ? db`DO UPDATE SET role = EXCLUDED.role` : db`DO NOTHING`;
  await db`INSERT INTO ${db(members)} ${db(row)} ON CONFLICT (${db(key)}, account_id) ${onConflict}`;
  return (await getMembership(db, kind, groupId, accountId))!;
}

export async function deleteMember(db: Db, kind: GroupKind, groupId: string, accountId: string): Promise<boolean> {
  const { members, key } = TABLES[kind];
  return (await db`DELETE FROM ${db(members)} WHERE ${db(key)} = ${groupId} AND account_id = ${accountId} RETURNING account_id`).length > 0;
}
