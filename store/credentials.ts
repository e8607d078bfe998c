import type { CredentialField, Injectors } from '../core/credentials/credential-kinds';
import { readableBy } from './access';
import { type Db, type Page, type PageRequest, readPage } from './db';

/** Credentials, custom credential types, and the credentials of runs (spec part A 2.9, 4.9). */

export interface CredentialType {
  id: string;
  name: string;
  description: string;
  fields: CredentialField[];
  injectors: Injectors;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export type CredentialTypeFields = Pick<CredentialType, 'name' | 'description' | 'fields' | 'injectors'>;

export interface Credential {
  id: string;
  name: string;
  description: string;
  /** A built-in kind, or `custom` with `type_id`. */
  kind: string;
  type_id: string | null;
  /** Non-secret field values. */
  inputs: Record<string, string>;
  /** Secret field -> sealed value (context `credential:<id>:<field>`). */
  sealed: Record<string, string>;
  /** Secret field -> the extension secret source it is read from at run time, and the reference it is asked (never the secret). */
  secret_sources: Record<string, { source: string; ref: string }>;
  owner_id: string | null;
  org_id: string | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export type CredentialFields = Pick<Credential, 'name' | 'description' | 'kind' | 'type_id' | 'inputs' | 'sealed' | 'org_id'> & Partial<Pick<Credential, 'secret_sources'>>;

// --- types

export async function insertCredentialType(db: Db, id: string, fields: CredentialTypeFields, createdBy: string): Promise<CredentialType> {
  const [row] = await db<CredentialType[]>`
    INSERT INTO credential_types (id, name, description, fields, injectors, created_by)
    VALUES (${id}, ${fields.name}, ${fields.description}, ${db.json(fields.fields as never)}, ${db.json(fields.injectors as never)}, ${createdBy})
    RETURNING *`;
  return row;
}

/** Replaces a type's definition; its id, creation time and creator stay. */
export async function replaceCredentialType(db: Db, id: string, fields: CredentialTypeFields): Promise<CredentialType | undefined> {
  const [row] = await db<CredentialType[]>`
    UPDATE credential_types SET name = ${fields.name}, description = ${fields.description},
      fields = ${db.json(fields.fields as never)}, injectors = ${db.json(fields.injectors as never)}, updated_at = now()
    WHERE id = ${id} RETURNING *`;
  return row;
}

export async function getCredentialType(db: Db, id: string, lock = false): Promise<CredentialType | undefined> {
  const [row] = lock
    ? await db<CredentialType[]>`SELECT * FROM credential_types WHERE id = ${id} FOR UPDATE`
    : await db<CredentialType[]>`SELECT * FROM credential_types WHERE id = ${id}`;
  return row;
}

export async function deleteCredentialType(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM credential_types WHERE id = ${id} RETURNING id`).length > 0;
}

/** The credentials of a type, up to `limit`: what a delete of the type is refused for. */
export async function credentialsOfType(db: Db, typeId: string, limit = 10): Promise<string[]> {
  return (await db<{ id: string }[]>`SELECT id FROM credentials WHERE type_id = ${typeId} ORDER BY id LIMIT ${limit}`).map((r) => r.id);
}

export async function listCredentialTypePage(db: Db, page: PageRequest): Promise<Page<CredentialType>> {
  return readPage(db, { from: db`credential_types`, order: db`id` }, page);
}

// --- credentials

export async function insertCredential(db: Db, id: string, fields: CredentialFields, owner: { id: string; username: string }): Promise<Credential> {
  const [row] = await db<Credential[]>`
    INSERT INTO credentials (id, name, description, kind, type_id, inputs, sealed, secret_sources, org_id, owner_id, created_by)
    VALUES (${id}, ${fields.name}, ${fields.description}, ${fields.kind}, ${fields.type_id}, ${db.json(fields.inputs)},
            ${db.json(fields.sealed)}, ${db.json((fields.secret_sources ?? {}) as never)}, ${fields.org_id}, ${owner.id}, ${owner.username})
    RETURNING *`;
  return row;
}

export async function updateCredential(db: Db, id: string, fields: CredentialFields): Promise<Credential | undefined> {
  const [row] = await db<Credential[]>`
    UPDATE credentials SET name = ${fields.name}, description = ${fields.description}, kind = ${fields.kind},
      type_id = ${fields.type_id}, inputs = ${db.json(fields.inputs)}, sealed = ${db.json(fields.sealed)},
      secret_sources = ${db.json((fields.secret_sources ?? {}) as never)}, org_id = ${fields.org_id}, updated_at = now()
    WHERE id = ${id} RETURNING *`;
  return row;
}

export async function getCredential(db: Db, id: string): Promise<Credential | undefined> {
  const [row] = await db<Credential[]>`SELECT * FROM credentials WHERE id = ${id}`;
  return row;
}

/** Locks the credential: `update` for an edit or delete, `share` while a template or run is saved naming it. */
export async function lockCredential(db: Db, id: string, mode: 'update' | 'share'): Promise<Credential | undefined> {
  const [row] =
    mode === 'update'
      ? await db<Credential[]>`SELECT * FROM credentials WHERE id = ${id} FOR UPDATE`
      : await db<Credential[]>`SELECT * FROM credentials WHERE id = ${id} FOR SHARE`;
  return row;
}

export async function deleteCredential(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM credentials WHERE id = ${id} RETURNING id`).length > 0;
}

/** Credentials with their custom types' definitions, by id, in the order asked. */
export async function getCredentialsWithTypes(db: Db, ids: readonly string[]): Promise<{ credential: Credential; type: CredentialType | null }[]> {
  if (ids.length === 0) return [];
  const rows = await db<(Credential & { type_row: CredentialType | null })[]>`
    SELECT c.*, CASE WHEN t.id IS NULL THEN NULL ELSE to_jsonb(t) END AS type_row
    FROM credentials c LEFT JOIN credential_types t ON t.id = c.type_id
    WHERE c.id IN ${db(ids as string[])}`;
  const byId = new Map(rows.map(({ type_row, ...credential }) => [credential.id, { credential: credential as Credential, type: type_row }]));
  return ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
}

/**
 * A page of credentials, oldest first, with the total: every one, or with `readerId` only those
 * that account may read (store/access.ts), `total` counting only them.
 */
export async function listCredentialPage(
  db: Db,
  page: PageRequest & { kind?: string },
  readerId?: string,
): Promise<Page<Credential>> {
  const where = [page.kind ? db`kind = ${page.kind}` : null, readerId !== undefined ? readableBy(db, readerId, 'credentials') : null];
  return readPage(db, { from: db`credentials`, order: db`id`, where }, page);
}

/**
 * What still uses a credential (up to 10 of each): the templates naming it, the schedules whose run
 * or pipeline names it, and the runs not yet ended that were given it.
 */
export async function credentialUsers(db: Db, id: string): Promise<{ templates: string[]; schedules: string[]; runs: string[] }> {
  const [templates, schedules, runs] = await Promise.all([
    db<{ id: string }[]>`
      SELECT id FROM templates WHERE ${id} = ANY (credentials) OR ${id} = ANY (selectable_credentials) ORDER BY id LIMIT 10`,
    db<{ id: string }[]>`
      SELECT id FROM schedules WHERE submission -> 'request' -> 'credentials' @> ${db.json([id])} ORDER BY id LIMIT 10`,
    db<{ id: string }[]>`SELECT id FROM runs WHERE finished_at IS NULL AND ${id} = ANY (credentials) ORDER BY id LIMIT 10`,
  ]);
  return { templates: templates.map((r) => r.id), schedules: schedules.map((r) => r.id), runs: runs.map((r) => r.id) };
}

// --- runs

/** The credential ids a run was given, in order (runs.credentials, written with the run). */
export async function runCredentialIds(db: Db, runId: string): Promise<string[]> {
  const [row] = await db<{ credentials: string[] }[]>`SELECT credentials FROM runs WHERE id = ${runId}`;
  return row?.credentials ?? [];
}

// --- templates

/** Writes a template's credentials and selectable credentials; the template as it now stands. */
export async function setTemplateCredentials<T>(db: Db, templateId: string, credentials: readonly string[], selectable: readonly string[]): Promise<T> {
  const [row] = await db`
    UPDATE templates SET credentials = ${db.array(credentials as string[])}::text[], selectable_credentials = ${db.array(selectable as string[])}::text[]
    WHERE id = ${templateId} RETURNING *`;
  return row as T;
}
