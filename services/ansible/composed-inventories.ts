import { hostPatternFault } from '../../core/ansible/ansible-spec';
import type { ComposedHosts } from '../../core/ansible/inventory';
import { DomainError, badRequest } from '../../core/errors';
import type { Db } from '../../store/db';
import { getInventory, missingInventories, type Inventory } from '../../store/inventories';
import type { Caller } from '../../store/tokens';
import type { ComposedRunInventory } from '../../tools/types';
import { requireAccess } from '../access/access';
import type { ServerContext } from '../context';
import { JobRefused, runJob } from '../jobs';

/**
 * Previews of composed inventories (spec part A 4.12, part B 7.3), nothing saved:
 *
 * - `smart`: a host filter, an Ansible host pattern (`web*:&prod:!web3`), over the hosts of its
 *   input inventories, applied by `ansible all --list-hosts --limit=<filter>`, which connects to
 *   nothing;
 * - `constructed`: Ansible's `constructed` inventory plugin over its inputs, `source_vars` its
 *   options (`groups`, `keyed_groups`, `compose`, `strict`, …), by `ansible-inventory --list`.
 *
 * Both run as sandboxed jobs (runtime/sandboxed-job.ts): `compose` and `groups`
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
    if (definition.inputs.indexOf(id) !== i) throw new DomainError('unprocessable', `${field}: inventory ${id} is named twice`, { field });
    const inventory = await getInventory(ctx.sql, id);
    try {
      if (!inventory) throw new DomainError('not_found', 'missing');
      await requireAccess(ctx.sql, caller, id, need, { action: need === 'use' ? `composing an inventory over inventory ${id}` : `previewing over inventory ${id}` });
    } catch (err) {
      if (err instanceof DomainError && (err.code === 'not_found' || err.code === 'invalid')) throw new DomainError('unprocessable', `${field}: inventory ${id} not found`, { field });
      throw err;
    }
    if (inventory!.kind !== 'static') throw new DomainError('unprocessable', `${field}: inventory ${id} is a ${inventory!.kind} inventory; the inputs of a composed inventory are static inventories`, { field });
    inputs.push(inventory!);
  }
  if (!ctx.execution.ansibleCore) throw new DomainError('unprocessable', `a ${definition.kind} inventory is resolved by Ansible, which this server lacks`);

  const quotable = caller.account.role === 'admin';
  let resolved: ComposedHosts;
  try {
    const job = { kind: definition.kind, inputs: definition.inputs, ...(definition.kind === 'smart' ? { host_filter: definition.host_filter } : { source_vars: sourceVarsFor(definition) }) };
    resolved = JSON.parse(await runJob(ctx, 'composedInventoryJob', job));
  } catch (err) {
    if (!(err instanceof JobRefused) || err.type === 'JobInputGone') throw err;
    throw new DomainError('unprocessable', quotable ? `the ${definition.kind} inventory could not be resolved: ${err.message}` : `the ${definition.kind} inventory could not be resolved by Ansible (an admin reads the reason)`);
  }
  if (definition.kind === 'smart') {
    return { kind: 'smart', hosts: resolved.hosts, count: resolved.hosts.length, engine: 'ansible-inventory', ansible_core: resolved.ansible_core, inputs: definition.inputs, host_filter: definition.host_filter, inventory_id: inventoryId };
  }
  return { kind: 'constructed', hosts: resolved.hosts, count: resolved.hosts.length, groups: resolved.groups ?? {}, engine: 'ansible-inventory', ansible_core: resolved.ansible_core, inputs: definition.inputs, inventory_id: inventoryId };
}

/** A constructed inventory's options as its plugin file takes them: the constructed plugin only (422 naming `source_vars.plugin` otherwise). */
function sourceVarsFor(definition: Extract<ComposedDefinition, { kind: 'constructed' }>): Record<string, unknown> {
  const options = definition.source_vars ?? {};
  if (options.plugin !== undefined && options.plugin !== 'constructed' && options.plugin !== 'ansible.builtin.constructed') {
    throw new DomainError('unprocessable', 'source_vars.plugin: a constructed inventory uses the constructed plugin only', { field: 'source_vars.plugin' });
  }
  return options;
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
