import { featureRefusal, tierAllows } from '../../core/access/license';
import { REGISTER_RUN_CAP, registerPeriod, renderRegister } from '../../core/audit/register';
import { forbidden } from '../../core/errors';
import { chainHead } from '../../store/audit';
import { registerDecisions, registerEntries, registerRuns } from '../../store/register';
import type { Caller } from '../../store/tokens';
import type { ServerContext } from '../context';

/**
 * `GET /v1/audit/register` (spec part A 4.15, 1.2; part B 8): the period change register, a Team
 * feature (403 naming it on a lower tier, before anything is read). An admin reads it; it covers
 * every run created in the period, whoever may read it otherwise. Its reads run in one
 * repeatable-read, read-only transaction, so the runs, decisions, chain entries and chain head it
 * shows are one consistent view.
 */
export async function changeRegister(server: ServerContext, caller: Caller, query: { from?: string; to?: string }): Promise<{ html: string; from: Date; to: Date }> {
  const tier = server.licensing.tier;
  if (!tierAllows(tier, 'audit_register')) throw forbidden(featureRefusal('audit_register', tier), { feature: 'audit_register', tier });
  const now = new Date();
  const period = registerPeriod(query, now);
  const html = await server.sql.begin('isolation level repeatable read read only', async (tx) => {
    const { runs, total } = await registerRuns(tx, period.from, period.to, REGISTER_RUN_CAP);
    const ids = runs.map((r) => r.id);
    const [decisions, entries, head] = [await registerDecisions(tx, ids), await registerEntries(tx, ids), await chainHead(tx)];
    return renderRegister({
      install_id: server.identity.installId,
      generated_at: now,
      generated_by: caller.account.username,
      period,
      chain_head: { seq: Number(head.seq), hash: head.hash },
      total_runs: total,
      runs,
      decisions,
      entries,
    });
  });
  return { html: html as string, from: period.from, to: period.to };
}
