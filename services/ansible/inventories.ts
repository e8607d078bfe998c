import { DomainError, badRequest, conflict, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { createHash } from 'node:crypto';
import { detectFormat, iniHosts, iniLayout, InventoryError, keepMaskedSourceVars, maskInventory, maskSourceVars, resolveHostAddresses, type InventoryFormat, type InventoryHost, type InventoryLayout } from '../../core/ansible/inventory';
import { deleteGrantsOn } from '../../store/access';
import { isUniqueViolation, type Db } from '../../store/db';
import {
  composedUsing,
  deleteInventory,
  getInventory,
  getInventoryForUpdate,
  getInventoryHosts,
  insertInventory,
  updateInventory,
  type Inventory,
  type InventoryKind,
  type InventorySummary,
} from '../../store/inventories';
import type { Caller } from '../../store/tokens';
import { yamlLayout, type ResolvedInventory } from '../../tools/ansible-inventory';
import { JobRefused, runJob, withPayload } from '../jobs';
import { requireAccess } from '../access/access';
import { recordMutation, withholdFields, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { previewComposed } from './composed-inventories';
import { requireOrgPlacement } from '../access/groups';
import { requireQueueAllowed } from '../access/licensing';

/**
 * Stored inventories (spec part A 2.1, 4.12; part B 7.3, 8): INI or YAML content, written whole,
 * with the host names it names counted when it is written. Access follows the grant model
 * (services/access.ts): the account that stores one manages it; below admin, reading one needs
 * read, running against it (`inventory_id`) use, editing and deleting manage.
 *
 * The content, and a constructed inventory's `source_vars`, are never in a list, a chain entry or
 * a request fingerprint (they may hold passwords); a read below admin shows secret-looking values
 * in either masked (core/inventory.ts), and an edit sending a masked `source_vars` value back
 * keeps the stored one.
 *
 * Other modules use: `getInventory` / `getInventoryHosts` (store/inventories.ts) for a stored
 * inventory, `inventoryHosts(format, content)` for the hosts any content names,
 * `inventoryHostAddresses` (tools/ansible-inventory.ts) for each host with the `ansible_host` and
 * `ansible_ssh_host` it resolves to, its own entries over its groups' variables (read from the
 * content on demand: the stored host list keeps names only), and `requireInventoryUse` before a
 * run or template names one.
 */

export interface InventoryDraft {
  name: string;
  /** `static` (the default) stores `content`; `smart` and `constructed` are composed over `inputs` (services/composed-inventories.ts). */
  kind?: InventoryKind;
  content: string;
  inputs?: string[];
  host_filter?: string | null;
  source_vars?: Record<string, unknown> | null;
  format?: InventoryFormat | null;
  org_id?: string | null;
  /** The worker queue runs over it inherit (Team tier); `""` or absent is the default queue. */
  queue?: string;
  /** The `id` a body names (a read sent back carries it); an update refuses another inventory's. */
  id?: unknown;
}

/** A job's answer read as JSON; a refusal of the content is the InventoryError it is. */
async function inventoryJob<T>(job: () => Promise<string>): Promise<T> {
  try {
    return JSON.parse(await job()) as T;
  } catch (err) {
    if (err instanceof JobRefused && (err.type === 'InventoryError' || err.type === 'JobFailed')) throw new InventoryError(err.message);
    throw err;
  }
}

/**
 * The host names an inventory's content names, ranges expanded: an INI inventory by Cairn's own
 * reading (core/inventory.ts); a YAML one by PyYAML, in the sandbox of a worker
 * (runtime/inventory-jobs.ts). A fault in the content is an InventoryError naming why.
 */
export async function inventoryHostNames(ctx: ServerContext, format: InventoryFormat, content: string): Promise<string[]> {
  if (format === 'ini') return iniHosts(content);
  return inventoryJob(() => withPayload(ctx, content, (payload) => runJob(ctx, 'inventoryHostsJob', { payload, format, addresses: false })));
}

/**
 * An inventory's hosts and groups (its layout: what a callback's limit is evaluated over), read as
 * inventoryHostNames reads the names; each host's addresses are resolved from it
 * (core/inventory.ts resolveHostAddresses).
 */
export async function inventoryLayout(ctx: ServerContext, format: InventoryFormat, content: string): Promise<InventoryLayout> {
  if (format === 'ini') return iniLayout(content);
  return yamlLayout(await inventoryJob(() => withPayload(ctx, content, (payload) => runJob(ctx, 'inventoryHostsJob', { payload, format, layout: true }))));
}

/**
 * An inventory's layout and each host's addresses, for the few contents read last, by hash: so
 * callbacks from many hosts of one inventory (a fleet booting), or a schedule firing every
 * minute, read it once. A content that cannot be read is not kept. An answer is shared: it is not
 * to be changed.
 */
const READING_CACHE_SIZE = 4;
const readingCache = new Map<string, Promise<Readonly<{ layout: InventoryLayout; hosts: readonly Readonly<InventoryHost>[] }>>>();

export function cachedInventoryReading(ctx: ServerContext, format: InventoryFormat, content: string) {
  const key = createHash('sha256').update(format).update('\0').update(content).digest('base64');
  let reading = readingCache.get(key);
  if (reading) {
    // The most recently used last.
    readingCache.delete(key);
  } else {
    reading = inventoryLayout(ctx, format, content).then((layout) => ({ layout, hosts: resolveHostAddresses(layout) }));
    reading.catch(() => readingCache.delete(key));
    if (readingCache.size >= READING_CACHE_SIZE) readingCache.delete(readingCache.keys().next().value!);
  }
  readingCache.set(key, reading);
  return reading;
}

/**
 * An inventory's content resolved as a launch would see it, a limit applied (spec part A 4.12):
 * by `ansible-inventory` and `ansible --list-hosts` in a worker's sandbox (runtime/inventory-jobs.ts).
 * A fault is an InventoryError with the reason.
 */
export async function resolveContent(ctx: ServerContext, format: InventoryFormat, content: string, limit?: string): Promise<ResolvedInventory> {
  return inventoryJob<ResolvedInventory>(() => withPayload(ctx, content, (payload) => runJob(ctx, 'resolveInventoryJob', { payload, format, ...(limit ? { limit } : {}) })));
}

/**
 * The host names content names, ranges expanded; a fault in it is a 400 naming `content` with
 * the whole reason (a configuration error, spec part B 7.3).
 */
export async function inventoryHosts(ctx: ServerContext, format: InventoryFormat, content: string): Promise<string[]> {
  try {
    return await inventoryHostNames(ctx, format, content);
  } catch (err) {
    if (err instanceof InventoryError) throw badRequest(`content: ${err.message}`, { field: 'content' });
    throw err;
  }
}

/** What a read shows: content and `source_vars` masked below admin (`content_masked` says so). */
export function inventoryView(inventory: Inventory, caller: Caller): Record<string, unknown> {
  const { owner_id, org_id, hosts: _hosts, content, source_vars, ...rest } = inventory;
  const admin = caller.account.role === 'admin';
  return {
    ...rest,
    owner_id,
    org_id,
    content: admin ? content : maskInventory(content, inventory.format),
    source_vars: admin || !source_vars ? source_vars : maskSourceVars(source_vars),
    content_masked: !admin,
    // What a smart or constructed inventory is composed of; a static one has none.
    ...(inventory.kind === 'static' && { inputs: undefined, host_filter: undefined, source_vars: undefined }),
    ...(inventory.kind === 'smart' && { source_vars: undefined }),
    ...(inventory.kind === 'constructed' && { host_filter: undefined }),
  };
}

/** What a list shows: never content. */
export function inventorySummaryView(inventory: InventorySummary): Record<string, unknown> {
  return { ...inventory };
}

/** The inventory, when the caller may read it; 404 alike for one that does not exist and one it may not read. */
export async function readableInventory(db: Db, caller: Caller, id: string): Promise<Inventory> {
  const inventory = await getInventory(db, id);
  if (!inventory) throw notFound(`inventory ${id}`);
  await requireAccess(db, caller, inventory.id, 'read', { action: `reading inventory ${inventory.id}` });
  return inventory;
}

/**
 * A run or template naming `inventory_id` needs the use grant on it: 400 naming the field when it
 * does not exist or the caller may not read it (a configuration error, spec part B 7.3), 403 when
 * it reads it but holds less.
 */
export async function requireInventoryUse(db: Db, caller: Caller, inventoryId: string, field = 'inventory_id'): Promise<void> {
  await requireAccess(db, caller, inventoryId, 'use', { action: `running against inventory ${inventoryId}`, field });
}

/** A template's run names an inventory that must still exist: 400 naming `inventory_id` (`inventory inv_… not found`) otherwise. */
export async function requireInventoryExists(db: Db, inventoryId: string, field = 'inventory_id'): Promise<void> {
  if (!(await getInventoryHosts(db, inventoryId))) throw badRequest(`${field}: inventory ${inventoryId} not found`, { field });
}

/**
 * What is stored: a static inventory's content and the hosts it names; a smart or constructed
 * one's definition, resolved now (its inputs needing `use` by the saver) for the hosts it reaches.
 */
async function fieldsOf(ctx: ServerContext, caller: Caller, draft: InventoryDraft, stored?: Inventory) {
  if (draft.kind === 'smart' || draft.kind === 'constructed') {
    const sourceVars = draft.kind === 'constructed' ? sourceVarsOf(draft, stored) : null;
    const definition =
      draft.kind === 'smart'
        ? { kind: 'smart' as const, inputs: draft.inputs ?? [], host_filter: draft.host_filter ?? '' }
        : { kind: 'constructed' as const, inputs: draft.inputs ?? [], source_vars: sourceVars ?? {} };
    const resolved = await previewComposed(ctx, caller, definition, 'use');
    return {
      name: draft.name,
      kind: draft.kind,
      inputs: definition.inputs,
      host_filter: draft.kind === 'smart' ? (draft.host_filter ?? '') : null,
      source_vars: sourceVars,
      format: 'yaml' as const,
      content: '',
      hosts: resolved.hosts,
      org_id: draft.org_id ?? null,
      queue: draft.queue ?? '',
    };
  }
  const format = draft.format ?? detectFormat(draft.content);
  const hosts = await inventoryHosts(ctx, format, draft.content);
  return { name: draft.name, format, content: draft.content, hosts, org_id: draft.org_id ?? null, queue: draft.queue ?? '' };
}

/**
 * The `source_vars` a constructed inventory's draft stores: a masked value sent back (a read below
 * admin shows them) keeps the stored one; the mask where `stored` holds nothing is a 400 naming
 * where it is.
 */
function sourceVarsOf(draft: InventoryDraft, stored: Inventory | undefined): Record<string, unknown> {
  const kept = keepMaskedSourceVars(draft.source_vars ?? {}, stored?.source_vars);
  if ('unknown' in kept) {
    throw badRequest(`${kept.unknown}: [masked] keeps a stored value, but ${stored ? `inventory ${stored.id}` : 'a new inventory'} has none there; send the value`, { field: kept.unknown });
  }
  return kept.vars;
}

/** What an inventory's chain entries record: never its content. */
function audited(inventory: Inventory): Record<string, unknown> {
  return { name: inventory.name, kind: inventory.kind, ...(inventory.kind !== 'static' && { inputs: inventory.inputs }), format: inventory.format, size_bytes: inventory.size_bytes, host_count: inventory.host_count, org_id: inventory.org_id, queue: inventory.queue };
}

async function uniqueName<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`an inventory named ${JSON.stringify(name)} exists already; inventory names are unique`, { field: 'name' });
    throw err;
  }
}

export async function createInventory(ctx: ServerContext, caller: Caller, origin: AuditOrigin, draft: InventoryDraft): Promise<Inventory> {
  withholdFields(origin, ['content', 'source_vars']);
  // A named queue is Team (spec part A 1.2), refused when saved as a template's is.
  requireQueueAllowed(draft.queue ?? '', ctx.licensing.tier);
  const fields = await fieldsOf(ctx, caller, draft);
  const id = newId('inv');
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    if (fields.org_id !== null) await requireOrgPlacement(tx, caller, fields.org_id, 'org_id');
    const created = await uniqueName(draft.name, () => insertInventory(tx, id, fields, caller.account));
    entry.body = { kind: 'inventory.created', inventory_id: id, inventory: audited(created) };
    return created;
  });
}

export async function replaceInventory(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string, draft: InventoryDraft): Promise<Inventory> {
  withholdFields(origin, ['content', 'source_vars']);
  if (draft.id !== undefined && draft.id !== null && draft.id !== id) {
    throw badRequest(`id: the body names inventory ${String(draft.id)} but the path names ${id}; the id cannot change`, { field: 'id' });
  }
  const before = await readableInventory(ctx.sql, caller, id);
  requireQueueAllowed(draft.queue ?? '', ctx.licensing.tier);
  if ((draft.kind ?? 'static') !== before.kind) {
    throw badRequest(`kind: inventory ${id} is a ${before.kind} inventory; its kind cannot change (store a new one)`, { field: 'kind' });
  }
  const fields = await fieldsOf(ctx, caller, draft, before);
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const current = await getInventoryForUpdate(tx, id);
    if (!current) throw notFound(`inventory ${id}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `editing inventory ${current.id}` });
    if (current.kind !== (fields.kind ?? 'static')) {
      throw badRequest(`kind: inventory ${id} is a ${current.kind} inventory; its kind cannot change (store a new one)`, { field: 'kind' });
    }
    // A masked value kept from the read before the lock must still be the stored one.
    if (current.kind === 'constructed' && JSON.stringify(sourceVarsOf(draft, current)) !== JSON.stringify(fields.source_vars)) {
      throw conflict(`inventory ${id} changed while this edit was made; read it again and send the edit again`);
    }
    if (fields.org_id !== null && fields.org_id !== current.org_id) await requireOrgPlacement(tx, caller, fields.org_id, 'org_id');
    const updated = await uniqueName(draft.name, () => updateInventory(tx, id, fields));
    if (!updated) throw notFound(`inventory ${id}`);
    entry.body = { kind: 'inventory.updated', inventory_id: id, inventory: audited(updated), previous: audited(current) };
    return updated;
  });
}

/** Deletes an inventory with the grants on it. Runs that named it keep its id; a pending one fails when it starts. */
export async function removeInventory(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getInventoryForUpdate(tx, id);
    if (!current) throw notFound(`inventory ${id}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `deleting inventory ${current.id}` });
    // A smart or constructed inventory composed over it would be left unable to resolve.
    const users = await composedUsing(tx, current.id);
    if (users.length) {
      throw conflict(
        `inventory ${current.id} is an input of ${users.map((u) => `${u.kind} inventory ${u.id} (${JSON.stringify(u.name)})`).join(', ')}; remove it from ${users.length === 1 ? 'that inventory' : 'those inventories'} or delete ${users.length === 1 ? 'it' : 'them'} first`,
        { used_by: users.map((u) => u.id) },
      );
    }
    const grantsRemoved = await deleteGrantsOn(tx, current.id);
    if (!(await deleteInventory(tx, current.id))) throw notFound(`inventory ${id}`);
    entry.body = { kind: 'inventory.deleted', inventory_id: id, inventory: audited(current), grants_removed: grantsRemoved };
  });
}

/**
 * The hosts an inventory reaches (spec part A 4.12 preview): unsaved content the caller sends, or
 * a stored inventory the caller may read, with an optional `limit` as a launch would apply it;
 * the engine that resolved it and `ansible_core` when ansible-inventory did. Content that cannot
 * be resolved is a 422 with the reason. For a stored inventory below admin, whose content the
 * caller reads masked, the reason never quotes the content: it is Cairn's own reading's, or a
 * plain statement.
 */
export async function previewInventory(
  ctx: ServerContext,
  caller: Caller,
  source: { content: string; format?: InventoryFormat | null } | { id: string },
  limit?: string,
): Promise<ResolvedInventory & { limit: string; count: number; inventory_id: string | null }> {
  let format: InventoryFormat;
  let content: string;
  let quotable = true;
  if ('id' in source) {
    const inventory = await readableInventory(ctx.sql, caller, source.id);
    format = inventory.format;
    content = inventory.content;
    quotable = caller.account.role === 'admin';
  } else {
    content = source.content;
    format = source.format ?? detectFormat(content);
  }
  try {
    const resolved = await resolveContent(ctx, format, content, limit || undefined);
    return { ...resolved, count: resolved.hosts.length, limit: limit ?? '', inventory_id: 'id' in source ? source.id : null };
  } catch (err) {
    if (!(err instanceof InventoryError)) throw err;
    if (quotable) throw new DomainError('unprocessable', err.message);
    const own = await inventoryHostNames(ctx, format, content).then(
      () => null,
      (e: unknown) => (e instanceof InventoryError ? e.message : null),
    );
    throw new DomainError('unprocessable', own ? `the inventory could not be resolved: ${own}` : 'the inventory could not be resolved by ansible-inventory (an admin reads the reason)');
  }
}
