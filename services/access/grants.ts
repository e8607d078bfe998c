import { heldLevel, LEVELS, type Permission } from '../../core/access/access';
import { badRequest, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { getAccountById } from '../../store/accounts';
import { deleteGrant, findGrant, getGrant, getVisibleGrant, insertGrant, kindOfObject, OBJECT_KINDS, type Grant, type GrantViewer } from '../../store/access';
import { isUniqueViolation, type Db, type Sql } from '../../store/db';
import { getGroupForUpdate } from '../../store/groups';
import type { Caller } from '../../store/tokens';
import { refuseAgentAccessChange, requireAccess } from './access';
import { appendEntry, recordMutation, type AuditOrigin } from '../audit/audit';

/**
 * Grants (spec part A 2.8, 4.11; part B 5.2 rules 3, 4): `read`, `use` or `manage` on one object
 * to one account or one team. An admin grants on anything; anyone else on what it manages (so a
 * manager may share what it manages, as in AWX). A grant names only the kinds in
 * store/access.ts OBJECT_KINDS: accounts and `/v1/users` are not among them, so no grant ever
 * reaches them (they need the admin role).
 */

/** The longest queue name a run, template or grant may name (spec part B 8). */
const MAX_QUEUE_BYTES = 255;

export interface GrantInput {
  object: string;
  permission: Permission;
  user_id?: string;
  team_id?: string;
}

/** A grant as the API shows it. */
export function grantView(grant: Grant) {
  return {
    id: grant.id,
    object: grant.object,
    kind: kindOfObject(grant.object) ?? null,
    permission: grant.permission,
    user_id: grant.account_id,
    team_id: grant.team_id,
    created_by: grant.created_by,
    created_at: grant.created_at.toISOString(),
  };
}

/** The kinds a grant names, for the refusal of anything else: `a template (tpl_…) or a queue (queue:<name>)`. */
const NAMEABLE = Object.values(OBJECT_KINDS)
  .map(({ noun, prefix }) => `${/^[aeiou]/.test(noun) ? 'an' : 'a'} ${noun} (${prefix}${prefix.endsWith(':') ? `<name>` : '…'})`)
  .join(', ')
  .replace(/, (?=[^,]*$)/, ' or ');

/** A grant's object, checked: a kind a grant may name, and a queue by a name (the default queue needs no grant). */
function checkObject(object: string): void {
  const kind = kindOfObject(object);
  if (!kind) {
    const users = /^usr_|\/?v1\/users|^users?$/i.test(object) ? '; accounts and /v1/users need the admin role, which no grant gives' : '';
    throw badRequest(`object: a grant names ${NAMEABLE}${users}`, { field: 'object' });
  }
  if (kind === 'queue') {
    const name = object.slice(OBJECT_KINDS.queue.prefix.length);
    if (name === '') throw badRequest('object: the default queue needs no grant; name a queue as queue:<name>', { field: 'object' });
    if (Buffer.byteLength(name) > MAX_QUEUE_BYTES) throw badRequest(`object: a queue name is at most ${MAX_QUEUE_BYTES} bytes`, { field: 'object' });
  }
}

/** The account or team a grant is to; 400 naming the field when it does not exist. */
async function requireGrantee(db: Db, input: GrantInput): Promise<Pick<Grant, 'account_id' | 'team_id'>> {
  if (input.user_id !== undefined) {
    if (!(await getAccountById(db, input.user_id))) throw badRequest(`user_id: user ${input.user_id} not found`, { field: 'user_id' });
    return { account_id: input.user_id, team_id: null };
  }
  if (!(await getGroupForUpdate(db, 'team', input.team_id!))) throw badRequest(`team_id: team ${input.team_id} not found`, { field: 'team_id' });
  return { account_id: null, team_id: input.team_id! };
}

/**
 * Grants a permission on an object to an account or a team. The caller must manage the object (an
 * admin manages everything). The same grant again changes nothing, records nothing and answers
 * 200 with it.
 */
export async function createGrant(sql: Sql, caller: Caller, origin: AuditOrigin, input: GrantInput): Promise<{ grant: Grant; status: 200 | 201 }> {
  refuseAgentAccessChange(caller);
  checkObject(input.object);
  return sql.begin(async (tx) => {
    await requireAccess(tx, caller, input.object, 'manage', { action: `granting access to ${input.object}`, field: 'object' });
    const grantee = await requireGrantee(tx, input);
    const wanted = { object: input.object, permission: input.permission, ...grantee };
    const existing = await findGrant(tx, wanted);
    if (existing) return { grant: existing, status: 200 as const };
    let grant: Grant;
    try {
      grant = await tx.savepoint((sp) => insertGrant(sp, { id: newId('grt'), ...wanted, created_by: caller.account.username }));
    } catch (err) {
      const raced = isUniqueViolation(err) ? await findGrant(tx, wanted) : undefined;
      if (raced) return { grant: raced, status: 200 as const };
      throw err;
    }
    await appendEntry(tx, origin, 201, {
      id: newId('aud'),
      run_id: null,
      body: { kind: 'grant.created', grant_id: grant.id, object: grant.object, permission: grant.permission, ...grantee },
    });
    return { grant, status: 201 as const };
  }) as Promise<{ grant: Grant; status: 200 | 201 }>;
}

/** Whose grants a caller sees: an admin every grant; anyone else those to it and its teams, and those on what it manages. */
export function grantViewerOf(caller: Caller): GrantViewer | undefined {
  if (caller.account.role === 'admin') return undefined;
  return { accountId: caller.account.id, mayManage: heldLevel(caller.account.role, LEVELS.manage) >= LEVELS.manage };
}

/** Removes a grant: 404 when the caller does not see it, 403 when it sees it but does not manage its object. */
export async function removeGrant(sql: Sql, caller: Caller, origin: AuditOrigin, grantId: string): Promise<void> {
  refuseAgentAccessChange(caller);
  await recordMutation(sql, origin, 204, async (tx, entry) => {
    const viewer = grantViewerOf(caller);
    const grant = viewer ? await getVisibleGrant(tx, grantId, viewer) : await getGrant(tx, grantId);
    if (!grant) throw notFound(`grant ${grantId}`);
    if (viewer) await requireAccess(tx, caller, grant.object, 'manage', { action: `removing a grant on ${grant.object}` });
    await deleteGrant(tx, grant.id);
    entry.body = {
      kind: 'grant.deleted',
      grant_id: grant.id,
      object: grant.object,
      permission: grant.permission,
      account_id: grant.account_id,
      team_id: grant.team_id,
    };
  });
}
