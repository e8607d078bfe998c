import { DomainError, badRequest, conflict, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { browsePath } from '../../core/project-paths';
import { detectFormat, type InventoryFormat } from '../../core/ansible/inventory';
import { isUniqueViolation, type Db } from '../../store/db';
import { getInventoryForUpdate, getInventoryHosts, updateInventory } from '../../store/inventories';
import {
  deleteInventorySource,
  getInventorySource,
  getInventorySourceForUpdate,
  insertInventorySource,
  recordInventorySourceRefresh,
  updateInventorySource,
  type InventorySource,
  type InventorySourceFields,
} from '../../store/inventory-sources';
import { getProject } from '../../store/projects';
import type { Caller } from '../../store/tokens';
import { requireAccess } from '../access/access';
import { recordMutation, withholdFields, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { inventoryHosts } from './inventories';
import { JobRefused, runJob } from '../jobs';
import { readProjectFile } from '../projects';

/**
 * Dynamic inventory sources (spec part A 4.12): a source belongs to one stored inventory, and a
 * refresh (`POST /v1/inventory-sources/{id}/refresh`) writes what it reads into that inventory —
 * content, hosts, host count — or, failing, records `last_error` and leaves the inventory as it was.
 *
 * - `script`: a program stored in the source, run with `--list` in the run sandbox (the same
 *   bubblewrap sandbox, run account and network as runs, --run-isolation and --run-network) in a
 *   scrubbed environment (PATH, HOME, LANG, TMPDIR only) and a private scratch dir, killed after
 *   `timeout_seconds`. Its standard output is Ansible's script-inventory JSON (groups with hosts,
 *   vars and children; `_meta.hostvars`), stored as a YAML inventory (JSON is YAML).
 * - `project_file`: an INI or YAML inventory file in a project's checkout, read within the
 *   checkout (services/projects.ts readProjectFile: core/project-paths.ts, symlinks resolved and
 *   contained, at most 1 MiB).
 *
 * Access is the inventory's: reading a source needs read on its inventory, writing, deleting and
 * refreshing one manage; a `project_file` source needs use on its project. The script is shown
 * only to admins (it may hold a token) and never in a chain entry.
 */

export interface InventorySourceDraft {
  inventory_id: string;
  name: string;
  kind: 'script' | 'project_file';
  script?: string | null;
  project_id?: string | null;
  path?: string | null;
  timeout_seconds?: number | null;
}

export const DEFAULT_SOURCE_TIMEOUT_SECONDS = 60;

/** Why a source (or a sandboxed read) failed; for a source its message is its `last_error`. */
export class SourceError extends Error {}

export function inventorySourceView(source: InventorySource, caller: Caller): Record<string, unknown> {
  const { script, ...rest } = source;
  if (source.kind !== 'script') return { ...rest, script: null };
  return caller.account.role === 'admin' ? { ...rest, script } : { ...rest, script: null, script_withheld: true };
}

/** What a chain entry records of a source: never its script. */
function audited(source: InventorySource): Record<string, unknown> {
  return { inventory_id: source.inventory_id, name: source.name, kind: source.kind, project_id: source.project_id, path: source.path, timeout_seconds: source.timeout_seconds };
}

function fieldsOf(draft: InventorySourceDraft): InventorySourceFields {
  if (draft.kind === 'script') {
    if (!draft.script) throw badRequest('script: a script source needs the script to run', { field: 'script' });
    if (draft.project_id || draft.path) throw badRequest(`${draft.project_id ? 'project_id' : 'path'}: a script source takes no project file`, { field: draft.project_id ? 'project_id' : 'path' });
  } else {
    if (!draft.project_id) throw badRequest('project_id: a project_file source needs the project holding the file', { field: 'project_id' });
    if (!draft.path) throw badRequest('path: a project_file source needs the inventory file, relative to the checkout', { field: 'path' });
    if (draft.script) throw badRequest('script: a project_file source takes no script', { field: 'script' });
    // Checked as text now (relative, no `..`, not .git); where it leads is checked again at each refresh.
    const checked = browsePath(draft.path);
    if ('fault' in checked) throw badRequest(`path ${checked.fault}`, { field: 'path' });
  }
  return {
    inventory_id: draft.inventory_id,
    name: draft.name,
    kind: draft.kind,
    script: draft.kind === 'script' ? draft.script! : null,
    project_id: draft.kind === 'project_file' ? draft.project_id! : null,
    path: draft.kind === 'project_file' ? draft.path! : null,
    timeout_seconds: draft.timeout_seconds ?? DEFAULT_SOURCE_TIMEOUT_SECONDS,
  };
}

/** The source, when the caller may read its inventory; 404 alike for one that does not exist and one it may not read. */
export async function readableInventorySource(db: Db, caller: Caller, id: string): Promise<InventorySource> {
  const source = await getInventorySource(db, id);
  if (!source) throw notFound(`inventory source ${id}`);
  try {
    await requireAccess(db, caller, source.inventory_id, 'read', { action: `reading inventory source ${id}` });
  } catch (err) {
    if (err instanceof DomainError && err.code === 'not_found') throw notFound(`inventory source ${id}`);
    throw err;
  }
  return source;
}

async function requireWritable(db: Db, caller: Caller, fields: InventorySourceFields, what: string): Promise<void> {
  await requireAccess(db, caller, fields.inventory_id, 'manage', { action: `${what} a source of inventory ${fields.inventory_id}`, field: 'inventory_id' });
  // A smart or constructed inventory has no content of its own to refresh (services/composed-inventories.ts).
  const target = await getInventoryHosts(db, fields.inventory_id);
  if (target && target.kind !== 'static') {
    throw badRequest(`inventory_id: inventory ${target.id} is a ${target.kind} inventory; a source writes into a static inventory`, { field: 'inventory_id' });
  }
  if (fields.project_id) await requireAccess(db, caller, fields.project_id, 'use', { action: `reading an inventory from project ${fields.project_id}`, field: 'project_id' });
}

async function uniqueName<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`the inventory has a source named ${JSON.stringify(name)} already; source names are unique per inventory`, { field: 'name' });
    throw err;
  }
}

export async function createInventorySource(ctx: ServerContext, caller: Caller, origin: AuditOrigin, draft: InventorySourceDraft): Promise<InventorySource> {
  withholdFields(origin, ['script']);
  const fields = fieldsOf(draft);
  const id = newId('isrc');
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    await requireWritable(tx, caller, fields, 'adding');
    const created = await uniqueName(fields.name, () => insertInventorySource(tx, id, fields, caller.account.username));
    entry.body = { kind: 'inventory_source.created', inventory_source_id: id, inventory_id: created.inventory_id, source: audited(created) };
    return created;
  });
}

export async function replaceInventorySource(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string, draft: InventorySourceDraft): Promise<InventorySource> {
  withholdFields(origin, ['script']);
  const fields = fieldsOf(draft);
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const current = await getInventorySourceForUpdate(tx, id);
    if (!current) throw notFound(`inventory source ${id}`);
    await requireAccess(tx, caller, current.inventory_id, 'manage', { action: `editing inventory source ${id}` });
    await requireWritable(tx, caller, fields, 'editing');
    const updated = await uniqueName(fields.name, () => updateInventorySource(tx, id, fields));
    if (!updated) throw notFound(`inventory source ${id}`);
    entry.body = { kind: 'inventory_source.updated', inventory_source_id: id, inventory_id: updated.inventory_id, source: audited(updated), previous: audited(current) };
    return updated;
  });
}

export async function removeInventorySource(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getInventorySourceForUpdate(tx, id);
    if (!current) throw notFound(`inventory source ${id}`);
    await requireAccess(tx, caller, current.inventory_id, 'manage', { action: `deleting inventory source ${id}` });
    if (!(await deleteInventorySource(tx, id))) throw notFound(`inventory source ${id}`);
    entry.body = { kind: 'inventory_source.deleted', inventory_source_id: id, inventory_id: current.inventory_id, source: audited(current) };
  });
}

/**
 * Refreshes a source into its inventory now. Success writes the inventory's content and hosts and
 * the source's `status`, `host_count`, `last_refreshed_at`, with one chain entry
 * (`inventory_source.refreshed`, counts only); failure records `status: failed` and `last_error`
 * (chain entry `inventory_source.refresh_failed`) and answers 422 with the reason.
 */
export async function refreshInventorySource(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string): Promise<InventorySource> {
  const source = await readableInventorySource(ctx.sql, caller, id);
  await requireAccess(ctx.sql, caller, source.inventory_id, 'manage', { action: `refreshing inventory source ${id} into inventory ${source.inventory_id}` });
  let read: { format: InventoryFormat; content: string; hosts: string[] } | { error: string };
  try {
    read = await readSource(ctx, source);
  } catch (err) {
    if (!(err instanceof SourceError)) throw err;
    read = { error: err.message };
  }
  if ('error' in read) {
    const error = read.error;
    const failed = await recordMutation(ctx.sql, origin, 422, async (tx, entry) => {
      const row = await recordInventorySourceRefresh(tx, id, { status: 'failed', error });
      if (!row) throw notFound(`inventory source ${id}`);
      entry.body = { kind: 'inventory_source.refresh_failed', inventory_source_id: id, inventory_id: row.inventory_id };
      return row;
    });
    throw new DomainError('unprocessable', `inventory source ${id} could not be refreshed: ${error}`, { inventory_source: inventorySourceView(failed, caller) });
  }
  const { format, content, hosts } = read;
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const inventory = await getInventoryForUpdate(tx, source.inventory_id);
    if (!inventory) throw notFound(`inventory ${source.inventory_id}`);
    const written = await updateInventory(tx, inventory.id, { name: inventory.name, format, content, hosts, org_id: inventory.org_id });
    const row = await recordInventorySourceRefresh(tx, id, { status: 'successful', host_count: hosts.length });
    if (!written || !row) throw notFound(`inventory source ${id}`);
    entry.body = {
      kind: 'inventory_source.refreshed',
      inventory_source_id: id,
      inventory_id: inventory.id,
      host_count: hosts.length,
      previous_host_count: inventory.host_count,
      size_bytes: written.size_bytes,
    };
    return row;
  });
}

async function readSource(ctx: ServerContext, source: InventorySource): Promise<{ format: InventoryFormat; content: string; hosts: string[] }> {
  let format: InventoryFormat;
  let content: string;
  if (source.kind === 'script') {
    content = scriptInventoryContent(await runScript(ctx, source));
    format = 'yaml';
  } else {
    const project = source.project_id ? await getProject(ctx.sql, source.project_id) : undefined;
    if (!project) throw new SourceError(`its project ${source.project_id ?? ''} no longer exists`.replace(/ {2}/, ' '));
    let file;
    try {
      file = await readProjectFile(ctx, project, source.path ?? '');
    } catch (err) {
      if (err instanceof DomainError) throw new SourceError(`${source.path} in project ${project.id}: ${err.message}`);
      throw err;
    }
    if (!('content' in file)) throw new SourceError(`${source.path} in project ${project.id} is not UTF-8 text`);
    content = file.content;
    format = detectFormat(content);
  }
  try {
    return { format, content, hosts: await inventoryHosts(ctx, format, content) };
  } catch (err) {
    if (err instanceof DomainError) throw new SourceError(`the inventory it produced does not parse: ${err.message.replace(/^content: /, '')}`);
    throw err;
  }
}

// ---- script sources ----------------------------------------------------------------------------

/** Runs the script with `--list` on a worker, in its sandbox (activities/jobs.ts), and returns its standard output. */
async function runScript(ctx: ServerContext, source: InventorySource): Promise<string> {
  try {
    return await runJob(ctx, 'inventoryScriptJob', { sourceId: source.id });
  } catch (err) {
    if (err instanceof JobRefused && err.type !== 'JobInputGone') throw new SourceError(err.message);
    throw err;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Ansible's script-inventory `--list` JSON as a YAML inventory document: each group (a list of
 * hosts, or `hosts`, `vars`, `children`) under `all.children`, `all`'s own hosts and vars on
 * `all`, each host carrying its `_meta.hostvars`.
 */
export function scriptInventoryContent(text: string): string {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new SourceError(`the script's output is not JSON (${(err as Error).message})`);
  }
  if (!isObject(data)) throw new SourceError("the script's output is not a JSON object of groups");
  const meta = isObject(data._meta) && isObject(data._meta.hostvars) ? data._meta.hostvars : {};
  const hostsOf = (group: string, list: unknown): Record<string, unknown> => {
    if (list === undefined) return {};
    if (!Array.isArray(list) || list.some((h) => typeof h !== 'string' || h === '')) throw new SourceError(`group ${group}: hosts must be a list of host names`);
    return Object.fromEntries((list as string[]).map((h) => [h, isObject(meta[h]) ? meta[h] : null]));
  };
  const groupOf = (name: string, value: unknown): Record<string, unknown> => {
    if (Array.isArray(value)) return { hosts: hostsOf(name, value) };
    if (!isObject(value)) throw new SourceError(`group ${name}: a group is a list of hosts or an object of hosts, vars and children`);
    const group: Record<string, unknown> = {};
    const hosts = hostsOf(name, value.hosts);
    if (Object.keys(hosts).length) group.hosts = hosts;
    if (value.vars !== undefined) {
      if (!isObject(value.vars)) throw new SourceError(`group ${name}: vars must be an object`);
      group.vars = value.vars;
    }
    if (value.children !== undefined) {
      if (!Array.isArray(value.children) || value.children.some((c) => typeof c !== 'string')) throw new SourceError(`group ${name}: children must be a list of group names`);
      group.children = Object.fromEntries((value.children as string[]).map((c) => [c, {}]));
    }
    return group;
  };
  const all: Record<string, unknown> = data.all === undefined ? {} : groupOf('all', data.all);
  const children: Record<string, unknown> = isObject(all.children) ? { ...all.children } : {};
  for (const [name, value] of Object.entries(data)) {
    if (name === '_meta' || name === 'all') continue;
    children[name] = groupOf(name, value);
  }
  if (Object.keys(children).length) all.children = children;
  return `"all":\n${groupYaml(all, '  ')}`;
}

/**
 * One group as block YAML: names as JSON strings (valid YAML scalars), variables as JSON flow
 * values (JSON is YAML), so no name or value is read as YAML syntax.
 */
function groupYaml(group: Record<string, unknown>, pad: string): string {
  const key = (name: string) => JSON.stringify(name);
  let out = '';
  if (isObject(group.hosts)) {
    out += `${pad}"hosts":\n`;
    for (const [host, vars] of Object.entries(group.hosts)) out += `${pad}  ${key(host)}:${vars ? ` ${JSON.stringify(vars)}` : ''}\n`;
  }
  if (group.vars !== undefined) out += `${pad}"vars": ${JSON.stringify(group.vars)}\n`;
  if (isObject(group.children)) {
    out += `${pad}"children":\n`;
    for (const [name, child] of Object.entries(group.children)) {
      const body = isObject(child) ? groupYaml(child, `${pad}    `) : '';
      out += `${pad}  ${key(name)}:\n${body}`;
    }
  }
  return out;
}
