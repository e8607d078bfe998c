import { hostPatternFault } from '../core/ansible-spec';
import { ApiError, badRequest } from '../core/errors';
import type { Db } from '../store/db';
import { getInventory, missingInventories, type Inventory } from '../store/inventories';
import type { Caller } from '../store/tokens';
import { ansibleCoreVersion } from '../activities/inventory-jobs';
import { JobFailed, runSandboxedJob, type SandboxedJob } from '../activities/sandboxed-job';
import { listHostsOutput, NO_HOSTS_MATCHED, STATIC_INVENTORY_ENV } from '../tools/ansible-inventory';
import { composedInputFile, CONSTRUCTED_FILE, constructedFile } from '../tools/ansible';
import type { ComposedRunInventory } from '../tools/types';
import { requireAccess } from './access';
import type { ServerContext } from './context';
import { jobsOf } from './jobs';

/**
 * Previews of composed inventories (spec part A 4.12, part B 7.3), nothing saved:
 *
 * - `smart`: a host filter, an Ansible host pattern (`web*:&prod:!web3`), over the hosts of its
 *   input inventories, applied by `ansible all --list-hosts --limit=<filter>`, which connects to
 *   nothing;
 * - `constructed`: Ansible's `constructed` inventory plugin over its inputs, `source_vars` its
 *   options (`groups`, `keyed_groups`, `compose`, `strict`, …), by `ansible-inventory --list`.
 *
 * Both run as sandboxed jobs (activities/sandboxed-job.ts): `compose` and `groups`
 * are Jinja2 that Ansible evaluates, lookups included, so they never run on the server itself.
 * Only the INI, YAML and constructed inventory plugins are enabled. Every input needs `read` by
 * the caller. What cannot resolve is a 422 with the reason: an input that does not exist (or the
 * caller may not read) naming `inputs[i]`, a server without Ansible, or Ansible's refusal (quoted
 * for admins only: it may quote an input's content, which readers below admin see masked).
 *
 * Saved (services/inventories.ts, kind `smart` or `constructed`), one is resolved by the same
 * code at save, for its host count, and on `POST /v1/inventories/{id}/preview`; its inputs need
 * `use` by the saver, and must be static inventories. A run resolves it again as it starts
 * (`composedRunInventory`, tools/ansible.ts), in the run's own sandbox.
 */

export type ComposedDefinition =
  | { kind: 'smart'; inputs: string[]; host_filter: string }
  | { kind: 'constructed'; inputs: string[]; source_vars?: Record<string, unknown> };

const PREVIEW_TIMEOUT_MS = 60_000;
/** The most `ansible-inventory --list` may print for inputs of at most 26 MiB each. */
const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

/**
 * Resolves a composed inventory for `caller`, who needs `need` on every input (read to preview,
 * use to save). `inventoryId` names the saved inventory previewed, null for an unsaved one.
 */
export async function previewComposed(ctx: ServerContext, caller: Caller, definition: ComposedDefinition, need: 'read' | 'use' = 'read', inventoryId: string | null = null) {
  // Checked by the body's schema; a filter saved before that rule is refused here too.
  const fault = definition.kind === 'smart' ? hostPatternFault(definition.host_filter) : undefined;
  if (fault) throw badRequest(`host_filter ${fault}`, { field: 'host_filter' });
  const inputs: Inventory[] = [];
  for (const [i, id] of definition.inputs.entries()) {
    const field = `inputs[${i}]`;
    if (definition.inputs.indexOf(id) !== i) throw new ApiError(422, `${field}: inventory ${id} is named twice`, { field });
    const inventory = await getInventory(ctx.sql, id);
    try {
      if (!inventory) throw new ApiError(404, 'missing');
      await requireAccess(ctx.sql, caller, id, need, { action: need === 'use' ? `composing an inventory over inventory ${id}` : `previewing over inventory ${id}` });
    } catch (err) {
      if (err instanceof ApiError && (err.status === 404 || err.status === 400)) throw new ApiError(422, `${field}: inventory ${id} not found`, { field });
      throw err;
    }
    if (inventory!.kind !== 'static') throw new ApiError(422, `${field}: inventory ${id} is a ${inventory!.kind} inventory; the inputs of a composed inventory are static inventories`, { field });
    inputs.push(inventory!);
  }
  const version = await ansibleCoreVersion();
  if (!version) throw new ApiError(422, `a ${definition.kind} inventory is resolved by Ansible, which this server lacks`);

  const files: Record<string, string> = {};
  const inventoryArgs: string[] = [];
  inputs.forEach((inventory, i) => {
    const name = composedInputFile(i, inventory.format);
    files[name] = inventory.content;
    inventoryArgs.push(`--inventory=${name}`);
  });
  const quotable = caller.account.role === 'admin';
  const refuse = (err: unknown): never => {
    if (!(err instanceof JobFailed)) throw err;
    throw new ApiError(422, quotable ? `the ${definition.kind} inventory could not be resolved: ${err.message}` : `the ${definition.kind} inventory could not be resolved by Ansible (an admin reads the reason)`);
  };
  const where = await jobsOf(ctx);
  const job = (what: string, argv: string[], env: Record<string, string>): SandboxedJob => ({
    what,
    name: `preview-${definition.kind}`,
    argv,
    files,
    env: { ...STATIC_INVENTORY_ENV, ...env },
    timeoutMs: PREVIEW_TIMEOUT_MS,
    maxOutputBytes: MAX_ANSWER_BYTES,
    network: 'none',
  });

  if (definition.kind === 'smart') {
    // The filter is an argument of its own: no shell reads it.
    const out = await runSandboxedJob(where, job('ansible', ['ansible', 'all', ...inventoryArgs, '--list-hosts', `--limit=${definition.host_filter}`], {})).catch((err: unknown) => {
      if (err instanceof JobFailed && NO_HOSTS_MATCHED.test(err.printed)) return Buffer.alloc(0);
      return refuse(err);
    });
    const hosts = listHostsOutput(out.toString('utf8'));
    return { kind: 'smart', hosts, count: hosts.length, engine: 'ansible-inventory', ansible_core: version, inputs: definition.inputs, host_filter: definition.host_filter, inventory_id: inventoryId };
  }

  const options = definition.source_vars ?? {};
  if (options.plugin !== undefined && options.plugin !== 'constructed' && options.plugin !== 'ansible.builtin.constructed') {
    throw new ApiError(422, 'source_vars.plugin: a constructed inventory uses the constructed plugin only', { field: 'source_vars.plugin' });
  }
  files[CONSTRUCTED_FILE] = constructedFile(options);
  const out = await runSandboxedJob(
    where,
    job('ansible-inventory', ['ansible-inventory', ...inventoryArgs, `--inventory=${CONSTRUCTED_FILE}`, '--list'], { ANSIBLE_INVENTORY_ENABLED: 'ini,yaml,constructed' }),
  ).catch(refuse);
  let list: Record<string, unknown>;
  try {
    list = JSON.parse(out.toString('utf8'));
  } catch {
    throw new ApiError(422, 'ansible-inventory gave an answer that is not JSON');
  }
  const hosts = new Set<string>();
  const groups: Record<string, string[]> = {};
  for (const [name, group] of Object.entries(list)) {
    if (name === '_meta' || !group || typeof group !== 'object') continue;
    const members = ((group as { hosts?: unknown }).hosts as unknown[] | undefined)?.filter((h): h is string => typeof h === 'string') ?? [];
    for (const host of members) hosts.add(host);
    if (members.length) groups[name] = members;
  }
  return { kind: 'constructed', hosts: [...hosts], count: hosts.size, groups, engine: 'ansible-inventory', ansible_core: version, inputs: definition.inputs, inventory_id: inventoryId };
}

/** A saved smart or constructed inventory's definition. */
export function definitionOf(inventory: Pick<Inventory, 'kind' | 'inputs' | 'host_filter' | 'source_vars'>): ComposedDefinition {
  if (inventory.kind === 'smart') return { kind: 'smart', inputs: inventory.inputs, host_filter: inventory.host_filter ?? '' };
  return { kind: 'constructed', inputs: inventory.inputs, source_vars: inventory.source_vars ?? {} };
}

/** Why a composed inventory cannot be resolved at run start: an input gone. */
export class ComposedInputGone extends Error {
  constructor(
    readonly inventoryId: string,
    readonly missing: string[],
  ) {
    super(`${missing.length === 1 ? 'input inventory' : 'input inventories'} ${missing.join(', ')} of inventory ${inventoryId} no longer ${missing.length === 1 ? 'exists' : 'exist'}`);
  }
}

/** What a run starting over a saved composed inventory is given: its inputs' contents as they are now. */
export async function composedRunInventory(db: Db, inventory: Inventory): Promise<ComposedRunInventory> {
  const inputs: ComposedRunInventory['inputs'] = [];
  const missing: string[] = [];
  for (const id of inventory.inputs) {
    const input = await getInventory(db, id);
    if (!input) missing.push(id);
    else inputs.push({ format: input.format, content: input.content });
  }
  if (missing.length) throw new ComposedInputGone(inventory.id, missing);
  return inventory.kind === 'smart'
    ? { kind: 'smart', inputs, host_filter: inventory.host_filter ?? '' }
    : { kind: 'constructed', inputs, source_vars: inventory.source_vars ?? {} };
}

/**
 * A submission naming a composed inventory whose input is gone cannot run: a configuration error
 * (spec part B 7.3), answered 400 with the whole reason naming `field` (`inventory_id`,
 * `steps[1].inventory_id`) on a run submission, template launch or pipeline. A rerun, retry or
 * relaunch turns it into 409, and so does an unattended fire (services/runs.ts resubmit,
 * services/triggers.ts), per 7.3's table; none quotes inventory content.
 */
export async function requireComposedInputs(db: Db, inventory: Pick<Inventory, 'id' | 'kind' | 'inputs'>, field = 'inventory_id'): Promise<void> {
  if (inventory.kind === 'static') return;
  const missing = await missingInventories(db, inventory.inputs);
  if (missing.length) {
    const err = new ComposedInputGone(inventory.id, missing);
    throw badRequest(`${field}: cannot run: ${err.message}`, { field, inventory_id: inventory.id, missing_inputs: missing });
  }
}
