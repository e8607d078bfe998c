import type postgres from 'postgres';
import { type Db, type Page, type PageRequest, readPage } from './db';
import { maintainedRunCount } from './run-counts';

/**
 * What a grant may name, and the SQL of the one access check (spec part A 2.8, part B 5.2 rules
 * 3 to 5). An account's level on an object is the highest of:
 * - 3 (manage) when it owns the object (it made it);
 * - its organization role over an object the organization owns: admin 3, member the kind's
 *   `memberLevel` (read, 1, for most; use, 2, for a notification target, which spec part A 2.11
 *   rule 4 lets its organization's members use);
 * - the grants to it and to its teams on the object: read 1, use 2, manage 3.
 * The ceiling its global role puts on that level is the service's (core/access.ts).
 */

export interface ObjectKind {
  /** How ids of this kind begin: `tpl_`, or `queue:` for a name that is not a row. */
  prefix: string;
  /** What the kind is called in messages. */
  noun: string;
  /** The table holding objects of this kind, whose rows carry `owner_id` and `org_id`; null for a kind that is not stored (a queue). */
  table: string | null;
  /** The level a member (not an admin) of the object's organization holds on it; read (1) when absent. */
  memberLevel?: number;
}

/**
 * Every kind of object a grant may name. Adding a kind is one line here (its table carrying
 * `owner_id` and `org_id`); the checks, list filters and grant routes all read this.
 */
export const OBJECT_KINDS = {
  template: { prefix: 'tpl_', noun: 'template', table: 'templates' },
  credential: { prefix: 'cred_', noun: 'credential', table: 'credentials' },
  project: { prefix: 'prj_', noun: 'project', table: 'projects' },
  inventory: { prefix: 'inv_', noun: 'inventory', table: 'inventories' },
  notification: { prefix: 'ntf_', noun: 'notification target', table: 'notification_targets', memberLevel: 2 },
  queue: { prefix: 'queue:', noun: 'queue', table: null },
} as const satisfies Record<string, ObjectKind>;

export type ObjectKindName = keyof typeof OBJECT_KINDS;
/** The kinds stored as rows, which have owners and organizations. */
export type StoredKindName = { [K in ObjectKindName]: (typeof OBJECT_KINDS)[K]['table'] extends string ? K : never }[ObjectKindName];

/** The kind an object id names, by its prefix; undefined for anything a grant cannot name. */
export function kindOfObject(object: string): ObjectKindName | undefined {
  return (Object.keys(OBJECT_KINDS) as ObjectKindName[]).find((kind) => object.startsWith(OBJECT_KINDS[kind].prefix));
}

const storedKinds = (Object.keys(OBJECT_KINDS) as ObjectKindName[]).filter((kind) => OBJECT_KINDS[kind].table !== null) as StoredKindName[];

/** The teams an account belongs to, as a subquery. */
const teamsOf = (db: Db, accountId: string) => db`SELECT team_id FROM team_members WHERE account_id = ${accountId}`;

/** A condition on grants `g`: the grant is to the account or to one of its teams. */
const reaches = (db: Db, accountId: string) => db`(g.account_id = ${accountId} OR g.team_id IN (${teamsOf(db, accountId)}))`;

/**
 * The level the account's ownership, organizations and grants give it on one object, before its
 * role's ceiling; `exists` is false for a stored kind with no such row. A kind that is not stored
 * (a queue) always exists.
 */
export async function grantedLevel(db: Db, accountId: string, object: string): Promise<{ exists: boolean; level: number }> {
  const kind = kindOfObject(object);
  if (!kind) return { exists: false, level: 0 };
  const granted = db`(SELECT coalesce(max(g.level), 0) FROM grants g WHERE g.object = ${object} AND ${reaches(db, accountId)})`;
  const { table, memberLevel = 1 } = OBJECT_KINDS[kind] as ObjectKind;
  if (table === null) {
    const [{ level }] = await db<{ level: number }[]>`SELECT ${granted}::int AS level`;
    return { exists: true, level };
  }
  const [row] = await db<{ level: number }[]>`
    SELECT greatest(
      CASE WHEN o.owner_id = ${accountId} THEN 3 ELSE 0 END,
      (SELECT coalesce(max(CASE m.role WHEN 'admin' THEN 3 ELSE ${memberLevel}::int END), 0) FROM org_members m
        WHERE m.org_id = o.org_id AND m.account_id = ${accountId}),
      ${granted})::int AS level
    FROM ${db(table)} o WHERE o.id = ${object}`;
  return row ? { exists: true, level: row.level } : { exists: false, level: 0 };
}

/**
 * A condition on rows of a stored kind (named `alias` in the query) that the account may read
 * them: it owns them, its organizations own them, or they are granted to it or its teams (any
 * grant reads).
 */
export function readableBy(db: Db, accountId: string, alias: string) {
  const column = (name: string) => db(`${alias}.${name}`);
  return db`(${column('owner_id')} = ${accountId}
    OR ${column('org_id')} IN (SELECT org_id FROM org_members WHERE account_id = ${accountId})
    OR ${column('id')} IN (SELECT g.object FROM grants g WHERE ${reaches(db, accountId)}))`;
}

/** The ids of the objects of a stored kind the account may read (readableBy), as a subquery for `id IN (...)`. */
export function readableIds(db: Db, kind: StoredKindName, accountId: string) {
  return db`SELECT o.id FROM ${db(OBJECT_KINDS[kind].table)} o WHERE ${readableBy(db, accountId, 'o')}`;
}

/**
 * A condition on run rows (of `alias`, when given) that the account may read one: it asked for
 * the run, or may read the template the run was launched from (core/access.ts runAllows).
 */
export function runReadableBy(db: Db, accountId: string, alias?: string) {
  return followerReadableBy(db, accountId, 'account_id', alias);
}

/**
 * A condition on rows that follow a template (runs, schedules, triggers: core/access.ts
 * followerAllows) that the account may read one: its `ownerColumn` names the account, or it
 * fires a template the account may read.
 */
export function followerReadableBy(db: Db, accountId: string, ownerColumn: string, alias?: string) {
  const column = (name: string) => db(alias ? `${alias}.${name}` : name);
  return db`(${column(ownerColumn)} = ${accountId} OR ${column('template_id')} IN (${readableIds(db, 'template', accountId)}))`;
}

/**
 * How many runs matching `conditions` (over unqualified run columns) the account may read: the
 * set runReadableBy selects, counted as two disjoint parts so each is counted from an index
 * rather than by testing every run: the runs of each template it may read, and its own runs of
 * no such template. Both parts read the readable templates from one materialized CTE, worked out
 * once: for an account holding many grants it is the costly part of the count.
 *
 * `maintained` says the conditions are at most a status and a tool (these values): the first part
 * then sums the maintained counts (store/run-counts.ts) instead of counting runs.
 */
export async function readableRunCount(
  db: Db,
  accountId: string,
  conditions: postgres.Fragment[],
  maintained?: { status?: string; tool?: string },
): Promise<number> {
  const and = conditions.reduce((acc, c) => db`${acc} AND ${c}`, db``);
  const readable = db`SELECT id FROM readable_templates`;
  const ofTemplates = maintained
    ? maintainedRunCount(db, { ...maintained, templates: readable })
    : db`(SELECT coalesce(sum(c.n), 0) FROM readable_templates t
            CROSS JOIN LATERAL (SELECT count(*) AS n FROM runs WHERE template_id = t.id ${and}) c)`;
  const [{ n }] = await db<{ n: number }[]>`
    WITH readable_templates AS MATERIALIZED (${readableIds(db, 'template', accountId)})
    SELECT (${ofTemplates}
          + (SELECT count(*) FROM runs WHERE account_id = ${accountId}
               AND (template_id IS NULL OR template_id NOT IN (${readable})) ${and}))::int AS n`;
  return n;
}

/**
 * The objects the account manages, as a subquery: those it owns or whose organization it is an
 * admin of, and those with a manage grant to it or its teams. Only for a role whose ceiling
 * reaches manage.
 */
function managedIds(db: Db, accountId: string) {
  const owned = storedKinds.map(
    (kind) => db`
      SELECT o.id FROM ${db(OBJECT_KINDS[kind].table)} o
      WHERE o.owner_id = ${accountId}
         OR o.org_id IN (SELECT org_id FROM org_members WHERE account_id = ${accountId} AND role = 'admin')`,
  );
  return owned.reduce((all, next) => db`${all} UNION ALL ${next}`, db`SELECT g.object FROM grants g WHERE g.level = 3 AND ${reaches(db, accountId)}`);
}

export interface Grant {
  id: string;
  object: string;
  permission: 'read' | 'use' | 'manage';
  /** The account granted to, or null for a team's grant. */
  account_id: string | null;
  team_id: string | null;
  created_by: string;
  created_at: Date;
}

const GRANT_COLUMNS = ['id', 'object', 'permission', 'account_id', 'team_id', 'created_by', 'created_at'];

export async function insertGrant(db: Db, grant: Omit<Grant, 'created_at'>): Promise<Grant> {
  const [row] = await db<Grant[]>`INSERT INTO grants ${db(grant)} RETURNING ${db(GRANT_COLUMNS)}`;
  return row;
}

/** The grant giving this permission on this object to this account or team, if there is one. */
export async function findGrant(db: Db, grant: Pick<Grant, 'object' | 'permission' | 'account_id' | 'team_id'>): Promise<Grant | undefined> {
  const principal = grant.account_id !== null ? db`account_id = ${grant.account_id}` : db`team_id = ${grant.team_id}`;
  const [row] = await db<Grant[]>`
    SELECT ${db(GRANT_COLUMNS)} FROM grants WHERE object = ${grant.object} AND permission = ${grant.permission} AND ${principal}`;
  return row;
}

export async function getGrant(db: Db, id: string): Promise<Grant | undefined> {
  const [row] = await db<Grant[]>`SELECT ${db(GRANT_COLUMNS)} FROM grants WHERE id = ${id}`;
  return row;
}

export async function deleteGrant(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM grants WHERE id = ${id} RETURNING id`).length > 0;
}

/** Removes every grant on an object, as the object is deleted; returns how many there were. */
export async function deleteGrantsOn(db: Db, object: string): Promise<number> {
  return (await db`DELETE FROM grants WHERE object = ${object} RETURNING id`).length;
}

/** Who sees which grants: everyone below admin sees the grants to it and its teams, and a manager those on what it manages. */
export interface GrantViewer {
  accountId: string;
  /** Whether the account's role lets it manage anything (a viewer's does not). */
  mayManage: boolean;
}

/** Whether a grant is one the viewer sees (for a single grant, as the list would show it). */
function visibleTo(db: Db, viewer: GrantViewer) {
  return viewer.mayManage
    ? db`(${reaches(db, viewer.accountId)} OR g.object IN (${managedIds(db, viewer.accountId)}))`
    : reaches(db, viewer.accountId);
}

/** A page of grants, oldest first, with the total: every grant, or only those `viewer` sees. */
export async function listGrants(
  db: Db,
  page: PageRequest,
  viewer?: GrantViewer,
): Promise<Page<Grant>> {
  const where = [viewer ? visibleTo(db, viewer) : null];
  return readPage(db, { columns: db(GRANT_COLUMNS.map((c) => `g.${c}`)), from: db`grants g`, idColumn: 'g.id', order: db`g.id`, where }, page);
}

/** One grant, when the viewer sees it. */
export async function getVisibleGrant(db: Db, id: string, viewer: GrantViewer): Promise<Grant | undefined> {
  const [row] = await db<Grant[]>`
    SELECT ${db(GRANT_COLUMNS.map((c) => `g.${c}`))} FROM grants g WHERE g.id = ${id} AND ${visibleTo(db, viewer)}`;
  return row;
}
