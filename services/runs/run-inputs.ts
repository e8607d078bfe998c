import { RunInputError } from '../../core/runs/run-outcome';
import type { Run } from '../../core/runs/run';
import type { Db } from '../../store/db';
import { getInventory } from '../../store/inventories';
import type { ToolInputs } from '../../tools/types';
import { ComposedInputGone, composedRunInventory } from '../ansible/composed-inventories';
import { suppliedFacts } from '../ansible/facts';

/**
 * What a run's tool needs resolved as the run starts, read from the store as it is then: the
 * stored inventory an ansible run names (a composed one's inputs, resolved by the tool in the run's
 * sandbox) and the cached facts it is supplied. A configuration error is a RunInputError: the run
 * fails with it.
 */
export async function runToolInputs(db: Db, run: Run): Promise<ToolInputs> {
  if (run.tool !== 'ansible' || !run.spec.inventory_id) return {};
  const inventory = await getInventory(db, run.spec.inventory_id);
  if (!inventory) throw new RunInputError(`inventory ${run.spec.inventory_id} no longer exists`);
  if (inventory.kind !== 'static') {
    // A smart or constructed inventory is resolved by the ansible tool as the run starts, over its inputs as they are now.
    try {
      const composed = await composedRunInventory(db, inventory);
      return { inventory: { format: inventory.format, content: '', composed }, facts: await suppliedFacts(db, run) };
    } catch (err) {
      if (err instanceof ComposedInputGone) throw new RunInputError(`the ${inventory.kind} inventory could not be resolved: ${err.message}`);
      throw err;
    }
  }
  return { inventory: { format: inventory.format, content: inventory.content }, facts: await suppliedFacts(db, run) };
}

