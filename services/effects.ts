import { completeEffects } from '../store/outbox';
import type { ServerContext } from './context';
import { inTransaction } from './audit/audit';

/**
 * Carries out, just after its commit, effects this server's write owed and kept for itself
 * (store/outbox.ts oweEffects with `own`), then completes them. A failure is left to the outbox
 * dispatcher (services/outbox.ts), which takes the effects once the writer's grace has passed; the
 * work is the same either way, and safe to repeat. Writes made inside a caller's transaction (an
 * import) are not committed yet: their effects are left to the dispatcher, which takes them once
 * the writer's grace has passed after that transaction commits. The work is handed the effects'
 * ids, so its last write may complete them in the same round trip.
 */
export async function carryOut(ctx: Pick<ServerContext, 'sql' | 'logger'>, ids: string[], what: string, work: (ids: string[]) => Promise<void | 'completed'>): Promise<void> {
  if (ids.length === 0 || inTransaction(ctx.sql)) return;
  try {
    // 'completed': the work's own last write completed the effects (store/outbox.ts completeEffectsStep).
    if ((await work(ids)) !== 'completed') await completeEffects(ctx.sql, ids);
  } catch (err) {
    ctx.logger.warn({ effects: ids, err: (err as Error).message }, `${what} failed; the outbox dispatcher will retry`);
  }
}
