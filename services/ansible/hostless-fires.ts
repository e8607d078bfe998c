import { InventoryError } from '../../core/ansible/inventory';
import { patternInventory, selectedHosts } from '../../core/ansible/host-patterns';
import { getInventory } from '../../store/inventories';
import type { Template } from '../../store/templates';
import type { ServerContext } from '../context';
import { cachedInventoryReading, resolveContent } from './inventories';

/** What an unattended fire would run its ansible against: a stored inventory and a limit on it. */
export interface FireHosts {
  inventoryId: string;
  limit?: string | null;
}

/** What a template's fire runs its ansible against; undefined for a template of another tool or with no stored inventory. */
export function templateFireHosts(template: Pick<Template, 'tool' | 'inventory_id' | 'ansible'>): FireHosts | undefined {
  return template.tool === 'ansible' && template.inventory_id ? { inventoryId: template.inventory_id, limit: template.ansible?.limit } : undefined;
}

/** What a stored run submission (a schedule's) runs its ansible against, as templateFireHosts. */
export function submissionFireHosts(request: { tool?: unknown; spec?: { inventory_id?: unknown; limit?: unknown } }): FireHosts | undefined {
  const { tool, spec } = request;
  if (tool !== 'ansible' || typeof spec?.inventory_id !== 'string') return undefined;
  return { inventoryId: spec.inventory_id, limit: typeof spec.limit === 'string' ? spec.limit : undefined };
}

/**
 * Why a fire would start a run with no host to act on (spec part A 2.11 `skipped`, 4.7): its
 * stored inventory holds no host, or its limit selects none of them. Such a fire starts nothing
 * and is recorded as skipped with this reason. Undefined when the fire has hosts, and whenever
 * that cannot be known before the run starts: a smart or constructed inventory (composed at
 * start), an inventory gone (the launch says so), or one that cannot be read (the run says why).
 * A limit only Ansible can evaluate (a `~` expression, a subscript) is asked of Ansible in the
 * sandbox, as a preview is.
 */
export async function hostlessFireReason(ctx: ServerContext, fire: FireHosts): Promise<string | undefined> {
  const inventory = await getInventory(ctx.sql, fire.inventoryId);
  if (!inventory || inventory.kind !== 'static') return undefined;
  if (inventory.hosts.length === 0) return `inventory ${inventory.name} holds no hosts`;
  const limit = fire.limit?.trim();
  if (!limit) return undefined;
  try {
    let selected = selectedHosts(limit, patternInventory((await cachedInventoryReading(ctx, inventory.format, inventory.content)).layout))?.size;
    selected ??= (await resolveContent(ctx, inventory.format, inventory.content, limit)).hosts.length;
    return selected === 0 ? `the limit ${JSON.stringify(limit)} matches no host of inventory ${inventory.name}` : undefined;
  } catch (err) {
    // Not knowable here: the fire goes ahead, and its run reports the fault.
    if (!(err instanceof InventoryError)) ctx.logger.warn({ err, inventoryId: inventory.id }, "a fire's hosts could not be counted before its launch");
    return undefined;
  }
}
