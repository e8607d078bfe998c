import { badRequest } from '../../core/errors';
import { beforeHistory } from '../../core/ansible/estate';
import { maskFacts, secretLookingFact, FACT_MASK } from '../../core/ansible/facts';
import type { Db } from '../../store/db';
import { estateAt, estateDiff, estateHorizon } from '../../store/estate';
import type { Caller } from '../../store/tokens';
import { readerOf } from '../access/access';
import type { ServerContext } from '../context';
import { factsFor, requireFactReader } from './facts';

/**
 * The estate (spec part A 2.13, 4.4): what every host looked like at an instant, and what changed
 * between two. A host's state is its newest fact reading gathered at or before the instant (a
 * host first gathered after it is absent). Hosts whose reading came from a run the caller may not
 * read are left out and counted in `withheld` (a reading whose run retention deleted is kept and
 * not withheld). `horizon` is the oldest kept reading; `before_history` says the instant (for a
 * diff, `from`) predates it. Facts are masked below admin as everywhere (services/facts.ts);
 * `--fact-cache-admin-only` makes these reads 403 below admin too.
 */

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export async function estate(ctx: ServerContext, caller: Caller, at: Date | undefined, page: { limit: number; offset: number }) {
  requireFactReader(ctx, caller);
  const instant = at ?? new Date();
  const db: Db = ctx.sql;
  const [horizon, found] = await Promise.all([estateHorizon(db), estateAt(db, instant, page, readerOf(caller))]);
  const hosts = found.hosts.map((h) => ({
    host: h.host,
    inventory_id: h.inventory_id,
    run_id: h.run_id,
    gathered_at: h.gathered_at.toISOString(),
    size_bytes: h.size_bytes,
    facts: factsFor(caller, h.facts).facts,
  }));
  const hasMore = page.offset + hosts.length < found.total;
  return {
    at: instant.toISOString(),
    horizon: iso(horizon),
    before_history: beforeHistory(instant, horizon),
    hosts,
    count: hosts.length,
    total: found.total,
    has_more: hasMore,
    next_offset: hasMore ? page.offset + hosts.length : null,
    withheld: found.withheld,
    facts_masked: caller.account.role !== 'admin',
  };
}

export async function estateChanges(ctx: ServerContext, caller: Caller, from: Date, to: Date | undefined, page: { limit: number; offset: number }) {
  requireFactReader(ctx, caller);
  const until = to ?? new Date();
  if (from.getTime() > until.getTime()) throw badRequest('from: from must not be after to (to defaults to now)', { field: 'from' });
  const db: Db = ctx.sql;
  const [horizon, diff] = await Promise.all([estateHorizon(db), estateDiff(db, from, until, page, readerOf(caller))]);
  const admin = caller.account.role === 'admin';
  const shown = (key: string, value: unknown) => (admin ? value : secretLookingFact(key) ? FACT_MASK : maskFacts(value));
  const added = [];
  const changed = [];
  const unobserved = [];
  for (const h of diff.hosts) {
    if (h.state === 'added') added.push({ host: h.host, gathered_at: iso(h.to_gathered_at), run_id: h.to_run_id });
    else if (h.state === 'unobserved') unobserved.push({ host: h.host, last_gathered_at: iso(h.to_gathered_at), run_id: h.to_run_id });
    else {
      changed.push({
        host: h.host,
        from_gathered_at: iso(h.from_gathered_at),
        to_gathered_at: iso(h.to_gathered_at),
        from_run_id: h.from_run_id,
        to_run_id: h.to_run_id,
        keys: (h.keys ?? []).map(([key, fromValue, toValue]) => ({ key, from: shown(key, fromValue ?? null), to: shown(key, toValue ?? null) })),
      });
    }
  }
  const { withheld, ...counts } = diff.counts;
  const listed = counts.added + counts.changed + counts.unobserved;
  const hasMore = page.offset + diff.hosts.length < listed;
  return {
    from: from.toISOString(),
    to: until.toISOString(),
    horizon: iso(horizon),
    before_history: beforeHistory(from, horizon),
    added,
    changed,
    unobserved,
    unchanged: counts.unchanged,
    withheld,
    counts,
    // The page: added, changed and unobserved hosts together, host order.
    count: diff.hosts.length,
    total: listed,
    has_more: hasMore,
    next_offset: hasMore ? page.offset + diff.hosts.length : null,
    facts_masked: !admin,
  };
}
