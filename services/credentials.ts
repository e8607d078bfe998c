import { writeOnlyEdit } from '../core/credentials/write-only';
import type { ExtensionRegistry } from '../core/extensions';
import { credentialSecretContext } from '../core/credentials/seal-contexts';
import { builtInKind, BUILT_IN_KIND_NAMES, credentialStatus, FIELD_NAME, INJECTED_NAME, templateFault, type CredentialField, type Injectors, type KindDefinition, type OpenedCredential } from '../core/credentials/credential-kinds';
import { badRequest, conflict, notFound } from '../core/errors';
import { newId } from '../core/ids';
import { ENCRYPTION_SETTINGS, encryptionKeyRequired, sealedValueFault } from '../core/runs/run-secrets';
import type { Sealer } from '../core/credentials/seal';
import { REDACTED } from '../core/runs/survey';
import { deleteGrantsOn } from '../store/access';
import { isUniqueViolation, type Db } from '../store/db';
import {
  credentialsOfType,
  credentialUsers,
  deleteCredential,
  deleteCredentialType,
  getCredential,
  getCredentialsWithTypes,
  getCredentialType,
  insertCredential,
  insertCredentialType,
  lockCredential,
  replaceCredentialType as storeReplaceType,
  runCredentialIds,
  setTemplateCredentials,
  updateCredential,
  type Credential,
  type CredentialType,
} from '../store/credentials';
import { getTemplate } from '../store/templates';
import type { Caller } from '../store/tokens';
import { isProtectedEnvName } from '../tools/extra-vars';
import { requireAccess } from './access/access';
import { recordMutation, withholdFields, type AuditOrigin } from './audit/audit';
import type { ServerContext } from './context';
import { requireOrgPlacement } from './access/groups';
import { IdentityTokenError, withIdentityTokens } from './federation/run-tokens';
import type { Run } from '../core/runs/run';


/** A credential's secret: blank or the mask keeps it, null clears it. */
const CREDENTIAL_SECRET_MEANINGS = { keeps: (v: unknown) => v === undefined || v === '' || v === REDACTED, clears: (v: unknown) => v === null };

/**
 * Credentials and custom credential types (spec part A 2.9, 4.9; part B 5.2, 5.3, 7.2).
 *
 * - A credential is of a built-in kind (core/credential-kinds.ts) or a custom type. Its non-secret
 *   field values are stored in clear and returned; each secret field's value is sealed with the
 *   install key (context `credential:<id>:<field>`) and never returned: a read shows `[redacted]`
 *   for a set secret and lists it in `secrets_set`. An edit that sends a secret blank or as
 *   `[redacted]` keeps the stored value, `null` clears it, anything else replaces it.
 * - Credentials join the grant model as an object kind (store/access.ts): the creator manages it,
 *   its organization's admins manage it, grants give the rest; a template or run naming one needs
 *   `use` on it.
 * - A credential whose secret is unset (`needs_secret`) or whose seal does not open under this
 *   server's key and salt blocks every run that needs it, answered 409 naming it and the fix.
 */

// --- definitions

/** A credential's fields and injectors: its built-in kind's, or its custom type's. */
export function definitionOf(credential: Pick<Credential, 'kind'>, type: CredentialType | null | undefined): { fields: CredentialField[]; injectors: Injectors } {
  if (credential.kind === 'custom') {
    if (!type) throw new Error('a custom credential without its type');
    return { fields: type.fields, injectors: type.injectors };
  }
  const kind = builtInKind(credential.kind);
  if (!kind) throw new Error(`unknown credential kind ${credential.kind}`);
  return { fields: kind.fields, injectors: kind.injectors };
}

/** A built-in kind as `GET /v1/credential-kinds` shows it. */
export function kindView(kind: KindDefinition) {
  return { kind: kind.kind, label: kind.label, federated: kind.federated === true, fields: kind.fields, injectors: kind.injectors };
}

// --- custom types

export interface TypeDraft {
  name: string;
  description?: string | null;
  fields: (Omit<CredentialField, 'label'> & { label?: string })[];
  injectors: { env?: Record<string, string>; extra_vars?: Record<string, string>; files?: Record<string, string> };
}

/** A type's definition checked: field names, injector names and every placeholder; 400 naming the field at fault. */
function checkedType(draft: TypeDraft): Pick<CredentialType, 'name' | 'description' | 'fields' | 'injectors'> {
  const seen = new Set<string>();
  for (const [i, field] of draft.fields.entries()) {
    if (!FIELD_NAME.test(field.id)) throw badRequest(`fields[${i}].id: a field name is lowercase letters, digits and _, starting with a letter, at most 64`, { field: `fields[${i}].id` });
    if (seen.has(field.id)) throw badRequest(`fields[${i}].id: the field ${field.id} is defined twice`, { field: `fields[${i}].id` });
    seen.add(field.id);
  }
  const injectors: Injectors = { env: draft.injectors.env ?? {}, extra_vars: draft.injectors.extra_vars ?? {}, files: draft.injectors.files ?? {} };
  const files = Object.keys(injectors.files);
  for (const key of files) {
    if (!FIELD_NAME.test(key)) throw badRequest(`injectors.files.${key}: a file key is lowercase letters, digits and _, starting with a letter`, { field: `injectors.files.${key}` });
    const fault = templateFault(injectors.files[key], draft.fields as CredentialField[], files, true);
    if (fault) throw badRequest(`injectors.files.${key}: ${fault}`, { field: `injectors.files.${key}` });
  }
  for (const part of ['env', 'extra_vars'] as const) {
    for (const [name, template] of Object.entries(injectors[part])) {
      const field = `injectors.${part}.${name}`;
      if (!INJECTED_NAME.test(name)) throw badRequest(`${field}: a name is letters, digits and _, not starting with a digit`, { field });
      if (part === 'env' && isProtectedEnvName(name)) throw badRequest(`${field}: ${name} is a variable a tool relies on or that changes how it starts; no credential sets it`, { field });
      const fault = templateFault(template, draft.fields as CredentialField[], files, false);
      if (fault) throw badRequest(`${field}: ${fault}`, { field });
    }
  }
  return { name: draft.name, description: draft.description ?? '', fields: draft.fields.map((f) => ({ ...f, label: f.label ?? f.id, required: f.required ?? false, secret: f.secret ?? false })), injectors };
}

export function typeView(type: CredentialType) {
  return {
    id: type.id,
    name: type.name,
    description: type.description,
    kind: 'custom',
    fields: type.fields,
    injectors: type.injectors,
    created_by: type.created_by,
    created_at: type.created_at.toISOString(),
    updated_at: type.updated_at.toISOString(),
  };
}

const auditedType = (type: CredentialType) => {
  const { id: _i, created_at: _c, updated_at: _u, ...rest } = typeView(type);
  return rest;
};

async function uniqueTypeName<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`a credential type named ${JSON.stringify(name)} exists already; type names are unique`, { field: 'name' });
    throw err;
  }
}

export async function createType(ctx: ServerContext, caller: Caller, origin: AuditOrigin, draft: TypeDraft): Promise<CredentialType> {
  const fields = checkedType(draft);
  if (BUILT_IN_KIND_NAMES.includes(fields.name)) throw conflict(`${fields.name} is the name of a built-in credential kind`, { field: 'name' });
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const type = await uniqueTypeName(draft.name, () => insertCredentialType(tx, newId('ctype'), fields, caller.account.username));
    entry.body = { kind: 'credential_type.created', type_id: type.id, type: auditedType(type) };
    return type;
  });
}

/** Replaces a type's definition; its id, creation time and creator (its origin) stay. */
export async function replaceType(ctx: ServerContext, origin: AuditOrigin, typeId: string, draft: TypeDraft): Promise<CredentialType> {
  const fields = checkedType(draft);
  if (BUILT_IN_KIND_NAMES.includes(fields.name)) throw conflict(`${fields.name} is the name of a built-in credential kind`, { field: 'name' });
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const current = await getCredentialType(tx, typeId, true);
    if (!current) throw notFound(`credential type ${typeId}`);
    const replaced = (await uniqueTypeName(draft.name, () => storeReplaceType(tx, typeId, fields)))!;
    entry.body = { kind: 'credential_type.replaced', type_id: typeId, type: auditedType(replaced), previous: auditedType(current) };
    return replaced;
  });
}

/** Deletes a type; 409 naming the credentials of it while there are any. */
export async function removeType(ctx: ServerContext, origin: AuditOrigin, typeId: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getCredentialType(tx, typeId, true);
    if (!current) throw notFound(`credential type ${typeId}`);
    const users = await credentialsOfType(tx, typeId);
    if (users.length) {
      throw conflict(`credential type ${typeId} is used by credential ${users.join(', ')}; delete those credentials first`, { credentials: users });
    }
    await deleteCredentialType(tx, typeId);
    entry.body = { kind: 'credential_type.deleted', type_id: typeId, type: auditedType(current) };
  });
}

// --- credentials

export type InputValue = string | number | boolean | null;

export interface CredentialDraft {
  name: string;
  description?: string | null;
  kind?: string | null;
  type_id?: string | null;
  /** Field values as sent, secrets in clear; `fields` is accepted as its other name (spec part A 2.9). */
  inputs?: Record<string, InputValue> | null;
  org_id?: string | null;
  /** Secret fields read from an extension's secret source at run time: field -> {source, ref}. */
  secret_sources?: Record<string, { source: string; ref: string }> | null;
  id?: unknown;
}

/**
 * The secret sources a write names, checked: each a secret field of the kind (400 naming
 * `secret_sources.<field>`), its source registered on this server, no value sent for it as well.
 */
function checkedSecretSources(ctx: Pick<ServerContext, 'extensions'>, resolved: Resolved, draft: CredentialDraft): Record<string, { source: string; ref: string }> {
  const sources = draft.secret_sources ?? {};
  for (const [fieldId, { source }] of Object.entries(sources)) {
    const field = `secret_sources.${fieldId}`;
    const definition = resolved.fields.find((f) => f.id === fieldId);
    if (!definition?.secret) throw badRequest(`${field}: only a secret field can come from a secret source; the secret fields are ${resolved.fields.filter((f) => f.secret).map((f) => f.id).join(', ') || 'none'}`, { field });
    if (!ctx.extensions?.secretSources.has(source)) {
      const known = ctx.extensions?.secretSources.names() ?? [];
      throw badRequest(`${field}: no secret source ${JSON.stringify(source)} is registered on this server (registered: ${known.join(', ') || 'none'})`, { field });
    }
    const sent = draft.inputs?.[fieldId];
    if (sent !== undefined && sent !== null && sent !== '' && sent !== REDACTED) throw badRequest(`${field}: send the field's value or its source, not both`, { field });
  }
  return { ...sources };
}

const withoutSourced = (sealed: Record<string, string>, sources: Record<string, unknown>) => Object.fromEntries(Object.entries(sealed).filter(([k]) => !(k in sources)));

/**
 * Withholds every possible secret field of the body from the request's fingerprint. Called before
 * anything is parsed further, so the secret names are those of the kind or type the body names;
 * an unknown kind withholds every input (it is refused anyway).
 */
export async function withholdCredentialSecrets(db: Db, origin: AuditOrigin, body: unknown): Promise<void> {
  const b = (body ?? {}) as Record<string, unknown>;
  const sent = { ...(isObject(b.inputs) ? b.inputs : {}), ...(isObject(b.fields) ? b.fields : {}) };
  let fields: CredentialField[] | undefined;
  if (typeof b.type_id === 'string') fields = (await getCredentialType(db, b.type_id))?.fields;
  else if (typeof b.kind === 'string') fields = builtInKind(b.kind)?.fields;
  const secret = (name: string) => !fields || !fields.some((f) => f.id === name) || fields.some((f) => f.id === name && f.secret);
  const names = Object.keys(sent).filter(secret);
  withholdFields(origin, names.flatMap((n) => [`inputs.${n}`, `fields.${n}`]));
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

interface Resolved {
  kind: string;
  type: CredentialType | null;
  fields: CredentialField[];
}

async function resolveKind(db: Db, draft: CredentialDraft): Promise<Resolved> {
  if (draft.type_id) {
    const type = await getCredentialType(db, draft.type_id);
    if (!type) throw badRequest(`type_id: credential type ${draft.type_id} not found`, { field: 'type_id' });
    return { kind: 'custom', type, fields: type.fields };
  }
  const kind = builtInKind(draft.kind ?? '');
  if (!kind) throw badRequest(`kind must be one of ${BUILT_IN_KIND_NAMES.join(', ')}, or name a custom type with type_id`, { field: 'kind' });
  return { kind: kind.kind, type: null, fields: kind.fields };
}

/**
 * The stored inputs and sealed secrets for a write: sent values checked against the fields (400
 * naming `inputs.<field>`), secrets sealed (409 without the key), a blank or masked secret kept
 * from `stored`, `null` clearing. A stored secret of a field the kind no longer has is dropped.
 */
function mergeInputs(
  sealer: Sealer | undefined,
  credentialId: string,
  resolved: Resolved,
  sent: Record<string, InputValue>,
  stored: Pick<Credential, 'inputs' | 'sealed'> | undefined,
  keepNonSecret: boolean,
): { inputs: Record<string, string>; sealed: Record<string, string> } {
  for (const name of Object.keys(sent)) {
    if (!resolved.fields.some((f) => f.id === name)) {
      throw badRequest(`inputs.${name}: ${resolved.kind === 'custom' ? `credential type ${resolved.type!.id}` : `the ${resolved.kind} kind`} has no field ${name}; its fields are ${resolved.fields.map((f) => f.id).join(', ')}`, {
        field: `inputs.${name}`,
      });
    }
  }
  const inputs: Record<string, string> = {};
  const sealed: Record<string, string> = {};
  const toSeal: string[] = [];
  for (const field of resolved.fields) {
    const raw = sent[field.id];
    const value = raw === null || raw === undefined ? raw : String(raw);
    if (field.secret) {
      const edit = writeOnlyEdit(value, stored?.sealed[field.id], CREDENTIAL_SECRET_MEANINGS);
      if (edit.action === 'keep') sealed[field.id] = edit.sealed;
      else if (edit.action === 'replace') toSeal.push(field.id);
      continue;
    }
    const kept = value === undefined && keepNonSecret ? stored?.inputs[field.id] : value;
    if (kept !== undefined && kept !== null && kept !== '') {
      if (field.choices && !field.choices.includes(kept)) {
        throw badRequest(`inputs.${field.id} must be one of ${field.choices.join(', ')}`, { field: `inputs.${field.id}` });
      }
      inputs[field.id] = kept;
    } else if (field.required) {
      throw badRequest(`inputs.${field.id} is required for ${resolved.kind === 'custom' ? `credential type ${resolved.type!.id}` : `a ${resolved.kind} credential`}`, { field: `inputs.${field.id}` });
    }
  }
  if (toSeal.length && !sealer) throw encryptionKeyRequired('the credential secret', toSeal.map((f) => `inputs.${f}`));
  for (const name of toSeal) sealed[name] = sealer!.seal(String(sent[name]), credentialSecretContext(credentialId, name));
  return { inputs, sealed };
}

/** A credential as every read shows it: non-secret values, each set secret as `[redacted]`, never a secret. */
export function credentialView(credential: Credential, type: CredentialType | null | undefined) {
  const { fields } = definitionOf(credential, type);
  const sources = credential.secret_sources ?? {};
  const secretsSet = fields.filter((f) => f.secret && (credential.sealed[f.id] !== undefined || sources[f.id] !== undefined)).map((f) => f.id);
  const inputs: Record<string, string> = {};
  for (const field of fields) {
    if (field.secret) {
      if (secretsSet.includes(field.id)) inputs[field.id] = REDACTED;
    } else if (credential.inputs[field.id] !== undefined) {
      inputs[field.id] = credential.inputs[field.id];
    }
  }
  return {
    id: credential.id,
    name: credential.name,
    description: credential.description,
    kind: credential.kind,
    type_id: credential.type_id,
    inputs,
    secrets_set: secretsSet,
    secret_sources: sources,
    status: credentialStatus(fields, secretsSet),
    owner_id: credential.owner_id,
    org_id: credential.org_id,
    created_by: credential.created_by,
    created_at: credential.created_at.toISOString(),
    updated_at: credential.updated_at.toISOString(),
  };
}

/** Views of several credentials, reading each custom type once. */
export async function credentialViews(db: Db, credentials: Credential[]) {
  const typeIds = [...new Set(credentials.map((c) => c.type_id).filter((t): t is string => t !== null))];
  const types = new Map<string, CredentialType>();
  for (const id of typeIds) {
    const type = await getCredentialType(db, id);
    if (type) types.set(id, type);
  }
  return credentials.map((c) => credentialView(c, c.type_id ? types.get(c.type_id) : null));
}

const audited = (credential: Credential, type: CredentialType | null) => {
  const { id: _i, created_at: _c, updated_at: _u, ...rest } = credentialView(credential, type);
  return rest;
};

/** The credential, when the caller may read it; 404 alike for one that does not exist and one it may not read. */
export async function readableCredential(db: Db, caller: Caller, id: string): Promise<{ credential: Credential; type: CredentialType | null }> {
  const credential = await getCredential(db, id);
  if (!credential) throw notFound(`credential ${id}`);
  await requireAccess(db, caller, credential.id, 'read', { action: `reading credential ${credential.id}` });
  return { credential, type: credential.type_id ? ((await getCredentialType(db, credential.type_id)) ?? null) : null };
}

const sentInputs = (draft: CredentialDraft) => draft.inputs ?? {};

/** A new credential, owned (and so managed) by the account that creates it. */
export async function createCredential(ctx: ServerContext, caller: Caller, origin: AuditOrigin, draft: CredentialDraft): Promise<{ credential: Credential; type: CredentialType | null }> {
  const resolved = await resolveKind(ctx.sql, draft);
  const id = newId('cred');
  const secretSources = checkedSecretSources(ctx, resolved, draft);
  const merged = mergeInputs(ctx.sealer, id, resolved, sentInputs(draft), undefined, false);
  const inputs = merged.inputs;
  const sealed = withoutSourced(merged.sealed, secretSources);
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const orgId = draft.org_id ?? null;
    if (orgId !== null) await requireOrgPlacement(tx, caller, orgId, 'org_id');
    const credential = await insertCredential(
      tx,
      id,
      { name: draft.name, description: draft.description ?? '', kind: resolved.kind, type_id: resolved.type?.id ?? null, inputs, sealed, secret_sources: secretSources, org_id: orgId },
      caller.account,
    );
    entry.body = { kind: 'credential.created', credential_id: id, credential: audited(credential, resolved.type) };
    return { credential, type: resolved.type };
  });
}

/**
 * Replaces a credential, for a caller who manages it. It may move to another kind or type; a
 * secret sent blank or masked keeps the stored one of the same field.
 */
export async function replaceCredential(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  id: string,
  draft: CredentialDraft,
): Promise<{ credential: Credential; type: CredentialType | null }> {
  if (draft.id !== undefined && draft.id !== null && draft.id !== id) {
    throw badRequest(`id: the body names credential ${String(draft.id)} but the path names ${id}; the id cannot change`, { field: 'id' });
  }
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const current = await lockCredential(tx, id, 'update');
    if (!current) throw notFound(`credential ${id}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `editing credential ${current.id}` });
    // A body naming neither kind nor type keeps the credential's own.
    const target = draft.type_id || draft.kind ? draft : current.type_id ? { ...draft, type_id: current.type_id } : { ...draft, kind: current.kind };
    const resolved = await resolveKind(tx, target);
    const secretSources = checkedSecretSources(ctx, resolved, draft);
    const merged = mergeInputs(ctx.sealer, id, resolved, sentInputs(draft), current, false);
    const inputs = merged.inputs;
    const sealed = withoutSourced(merged.sealed, secretSources);
    const orgId = draft.org_id ?? null;
    if (orgId !== null && orgId !== current.org_id) await requireOrgPlacement(tx, caller, orgId, 'org_id');
    const previousType = current.type_id ? ((await getCredentialType(tx, current.type_id)) ?? null) : null;
    const updated = (await updateCredential(tx, id, {
      name: draft.name,
      description: draft.description ?? '',
      kind: resolved.kind,
      type_id: resolved.type?.id ?? null,
      inputs,
      sealed,
      secret_sources: secretSources,
      org_id: orgId,
    }))!;
    entry.body = { kind: 'credential.updated', credential_id: id, credential: audited(updated, resolved.type), previous: audited(current, previousType) };
    return { credential: updated, type: resolved.type };
  });
}

/** Deletes a credential, for a caller who manages it; 409 naming what still uses it (templates, schedules, runs not yet ended). */
export async function removeCredential(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await lockCredential(tx, id, 'update');
    if (!current) throw notFound(`credential ${id}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `deleting credential ${current.id}` });
    const users = await credentialUsers(tx, id);
    if (users.templates.length || users.schedules.length || users.runs.length) {
      const named = [
        ...(users.templates.length ? [`template ${users.templates.join(', ')}`] : []),
        ...(users.schedules.length ? [`schedule ${users.schedules.join(', ')}`] : []),
        ...(users.runs.length ? [`run ${users.runs.join(', ')} (not yet ended)`] : []),
      ];
      throw conflict(`credential ${id} is still used by ${named.join(' and ')}; remove it from those first`, users);
    }
    const type = current.type_id ? ((await getCredentialType(tx, current.type_id)) ?? null) : null;
    const grantsRemoved = await deleteGrantsOn(tx, id);
    await deleteCredential(tx, id);
    entry.body = { kind: 'credential.deleted', credential_id: id, credential: audited(current, type), grants_removed: grantsRemoved };
  });
}

// --- credentials of templates and runs

/** A list of credential ids as sent: no id twice; 400 naming the repeat. */
export function requireDistinct(ids: readonly string[], field: string): void {
  const seen = new Set<string>();
  for (const [i, id] of ids.entries()) {
    if (seen.has(id)) throw badRequest(`${field}[${i}]: credential ${id} is named twice`, { field: `${field}[${i}]` });
    seen.add(id);
  }
}

/**
 * The caller must hold `use` on each credential (400 naming `<field>[i]` when it does not exist or
 * the caller may not read it, 403 when it reads but may not use it). Inside a transaction each is
 * locked for share, so it cannot be deleted before the write naming it commits. Ids in `skip`
 * (already named by what is being saved) are locked but not checked again.
 */
export async function requireCredentialsUsable(db: Db, caller: Caller, ids: readonly string[], field: string, skip: readonly string[] = []): Promise<void> {
  requireDistinct(ids, field);
  for (const [i, id] of ids.entries()) {
    const at = `${field}[${i}]`;
    if (!id.startsWith('cred_')) throw badRequest(`${at}: ${JSON.stringify(id)} is not a credential id`, { field: at });
    if (!skip.includes(id)) await requireAccess(db, caller, id, 'use', { action: `naming credential ${id}`, field: at });
    if (!(await lockCredential(db, id, 'share'))) throw badRequest(`${at}: credential ${id} not found`, { field: at });
  }
}

/** Why a credential cannot be used by a run now (spec part B 7.2), naming it and the fix; undefined when it can. */
function notReady(sealer: Sealer | undefined, credential: Credential, type: CredentialType | null): { message: string; reason: string } | undefined {
  const { fields } = definitionOf(credential, type);
  const named = `credential ${credential.id} (${credential.name})`;
  const sources = credential.secret_sources ?? {};
  const secretsSet = fields.filter((f) => f.secret && (credential.sealed[f.id] !== undefined || sources[f.id] !== undefined)).map((f) => f.id);
  if (credentialStatus(fields, secretsSet) === 'needs_secret') {
    const missing = fields.filter((f) => f.secret && !secretsSet.includes(f.id)).map((f) => f.id);
    return { reason: 'needs_secret', message: `${named} has no secret yet: set its ${missing.join(' or ')} with PUT /v1/credentials/${credential.id}` };
  }
  for (const name of secretsSet) {
    if (sources[name]) continue; // read from its source at run time, on the worker
    const what = `the sealed ${name} of ${named}`;
    if (!sealer) return { reason: 'no_key', message: sealedValueFault(what, sealer) };
    try {
      sealer.open(credential.sealed[name], credentialSecretContext(credential.id, name));
    } catch (err) {
      return { reason: 'does_not_open', message: `${sealedValueFault(what, sealer, err)}, or set its secret again with PUT /v1/credentials/${credential.id}` };
    }
  }
  return undefined;
}

/**
 * Every credential a run is to be given must exist, have its secret and open under this server's
 * key and salt: otherwise 409 naming the credential and the fix (spec part B 7.2). Every launch,
 * rerun, retry and unattended launch passes here (services/runs.ts submitRun).
 */
export async function requireCredentialsReady(ctx: Pick<ServerContext, 'sql' | 'sealer'>, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const found = await getCredentialsWithTypes(ctx.sql, ids);
  for (const id of ids) {
    const row = found.find((f) => f.credential.id === id);
    if (!row) throw conflict(`credential ${id} no longer exists; name another credential in its place`, { credential: id, reason: 'not_found' });
    const fault = notReady(ctx.sealer, row.credential, row.type);
    if (fault) throw conflict(fault.message, { credential: id, reason: fault.reason, ...(fault.reason !== 'needs_secret' ? { settings: [...ENCRYPTION_SETTINGS] } : {}) });
  }
}

/** A run's credentials that cannot be opened where it executes: the message names the credential and the fix, never a value. */
export class CredentialOpenError extends Error {
  override readonly name = 'CredentialOpenError';
}

/**
 * Opens the credentials of a run, in order, for injection at execution (tools/credential-injection.ts);
 * a federated one gets the run's identity token, signed for this issuer (services/federation/run-tokens.ts).
 */
export async function openRunCredentials(
  db: Db,
  sealer: Sealer | undefined,
  run: Run,
  federationIssuer: string | undefined,
  secretSources?: ExtensionRegistry['secretSources'],
  leases: MintedLease[] = [],
): Promise<OpenedCredential[]> {
  // The ids are written with the run and never change: the row read for the execution has them.
  const ids = run.credentials;
  if (ids.length === 0) return [];
  const found = await getCredentialsWithTypes(db, ids);
  const opened: OpenedCredential[] = [];
  for (const id of ids) {
    const row = found.find((f) => f.credential.id === id);
    if (!row) throw new CredentialOpenError(`credential ${id} given to run ${run.id} no longer exists`);
    const one = openedOf(sealer, row.credential, row.type);
    await fillFromSources(one, row.credential, run, secretSources, leases);
    opened.push(one);
  }
  try {
    return await withIdentityTokens(db, sealer, federationIssuer, run, opened);
  } catch (err) {
    if (err instanceof IdentityTokenError) throw new CredentialOpenError(err.message);
    throw err;
  }
}

/** A dynamic secret minted for a run: revoked by the process that minted it when the run's execution ends (revokeRunLeases). */
export interface MintedLease {
  source: string;
  leaseId: string;
  revoke(signal: AbortSignal): Promise<void>;
}

const SECRET_SOURCE_TIMEOUT_MS = 10_000;

/**
 * The credential's fields that come from extension secret sources, read now (only on the
 * execution path; the value is injected and masked like any secret, never stored). A dynamic
 * source mints one for this run; its lease joins `leases`.
 */
async function fillFromSources(opened: OpenedCredential, credential: Credential, run: Run, sources: ExtensionRegistry['secretSources'] | undefined, leases: MintedLease[]): Promise<void> {
  for (const [fieldId, { source, ref }] of Object.entries(credential.secret_sources ?? {})) {
    const named = `the ${fieldId} of credential ${credential.id} (${credential.name})`;
    const entry = sources?.get(source);
    if (!entry) throw new CredentialOpenError(`${named} comes from secret source ${JSON.stringify(source)}, which is not registered on this worker (give it the same --plugins-dir as the server)`);
    const signal = AbortSignal.timeout(SECRET_SOURCE_TIMEOUT_MS);
    try {
      if (entry.kind === 'static') {
        opened.values[fieldId] = await entry.source.resolve(ref, signal);
      } else {
        const lease = await entry.source.mint(ref, run.id, signal);
        leases.push({ source, leaseId: lease.leaseId, revoke: (s) => entry.source.revoke(lease.leaseId, s) });
        opened.values[fieldId] = lease.value;
      }
    } catch (err) {
      throw new CredentialOpenError(`${named} could not be read from secret source ${JSON.stringify(source)}: ${(err as Error).message}`);
    }
  }
}

/** Ends every lease minted for a run; a failure is logged by the caller, never fails the run. */
export async function revokeRunLeases(leases: MintedLease[], onError: (lease: MintedLease, err: Error) => void): Promise<void> {
  await Promise.all(
    leases.splice(0).map((lease) => lease.revoke(AbortSignal.timeout(SECRET_SOURCE_TIMEOUT_MS)).catch((err: Error) => onError(lease, err))),
  );
}

/** One credential opened (a project's source-control credential, for its updates); CredentialOpenError naming it and the fix otherwise. */
export async function openCredential(db: Db, sealer: Sealer | undefined, id: string): Promise<OpenedCredential> {
  const [row] = await getCredentialsWithTypes(db, [id]);
  if (!row) throw new CredentialOpenError(`credential ${id} no longer exists`);
  return openedOf(sealer, row.credential, row.type);
}

function openedOf(sealer: Sealer | undefined, credential: Credential, type: CredentialType | null): OpenedCredential {
  const fault = notReady(sealer, credential, type);
  if (fault) throw new CredentialOpenError(fault.message);
  const { fields, injectors } = definitionOf(credential, type);
  const values: Record<string, string> = {};
  for (const field of fields) {
    if (field.secret) {
      const sealedValue = credential.sealed[field.id];
      if (sealedValue !== undefined) values[field.id] = sealer!.open(sealedValue, credentialSecretContext(credential.id, field.id));
    } else if (credential.inputs[field.id] !== undefined) {
      values[field.id] = credential.inputs[field.id];
    }
  }
  return { id: credential.id, name: credential.name, kind: credential.kind, fields, injectors, values };
}

/**
 * The credentials a rerun or retry gives its new run: the original's. Those its template does not
 * name itself need `use` again (a grant may have been withdrawn since).
 */
export async function rerunCredentials(db: Db, caller: Caller, originalId: string, templateId: string | null): Promise<string[]> {
  const ids = await runCredentialIds(db, originalId);
  if (ids.length === 0) return ids;
  const template = templateId ? await getTemplate(db, templateId) : undefined;
  const templateCredentials = template?.credentials ?? [];
  for (const id of ids) {
    // One deleted since is refused by requireCredentialsReady, as a configuration error.
    if (templateCredentials.includes(id) || !(await getCredential(db, id))) continue;
    await requireAccess(db, caller, id, 'use', { action: `rerunning with credential ${id}` });
  }
  return ids;
}

/**
 * Saves the credentials a template names (`credentials`, used by every launch) and those a launch
 * may add (`selectable_credentials`, spec part A 4.6), in the template's write transaction. The
 * editor needs `use` on each credential it adds; one the template already names is kept without
 * asking again, so a manager may edit a template another account attached a credential to.
 */
export async function saveTemplateCredentials<T extends { id: string; credentials: string[]; selectable_credentials: string[] }>(
  tx: Db,
  caller: Caller,
  template: T,
  draft: { credentials?: string[] | null; selectable_credentials?: string[] | null },
  current?: { credentials: string[]; selectable_credentials: string[] },
): Promise<T> {
  const credentials = draft.credentials ?? [];
  const selectable = draft.selectable_credentials ?? [];
  const before = current ? [...current.credentials, ...current.selectable_credentials] : [];
  await requireCredentialsUsable(tx, caller, credentials, 'credentials', before);
  await requireCredentialsUsable(tx, caller, selectable, 'selectable_credentials', before);
  for (const [i, id] of selectable.entries()) {
    if (credentials.includes(id)) {
      throw badRequest(`selectable_credentials[${i}]: credential ${id} is already in credentials, which every launch uses`, { field: `selectable_credentials[${i}]` });
    }
  }
  const unchangedLists = credentials.length === template.credentials.length && selectable.length === template.selectable_credentials.length &&
    credentials.every((c, i) => template.credentials[i] === c) && selectable.every((c, i) => template.selectable_credentials[i] === c);
  if (unchangedLists) return template;
  return setTemplateCredentials<T>(tx, template.id, credentials, selectable);
}
