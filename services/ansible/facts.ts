import { canonicalJson } from '../../core/audit/canonical';
import { badRequest, forbidden, notFound } from '../../core/errors';
import {
  factCacheOf,
  maskFacts,
  sameFactCache,
  skipReason,
  type FactSupply,
} from '../../core/ansible/facts';
import type { Run } from '../../core/runs/run';
import { sha256Hex } from '../../core/sha256';
import type { Db, Sql } from '../../store/db';
import {
  cachedFactTexts,
  deleteReadings,
  insertReadings,
  listInventoryReadings,
  newestReading,
  setTemplateFactCache,
  templateFactCache,
  type NewReading,
  type Reading,
  type ReadingSummary,
} from '../../store/facts';
import type { Template } from '../../store/templates';
import type { Caller } from '../../store/tokens';
import { readerOf, requireAccess } from '../access/access';
import { recordMutation, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { RunInputError } from '../../core/runs/run-outcome';
import { readableInventory } from './inventories';

/**
 * The fact cache (spec part A 2.1 `fact_cache`, 2.3, 4.4, 4.12; part B 8).
 *
 * - A job template with `use_fact_cache` (and a stored inventory) launches ansible runs whose
 *   spec carries `fact_cache: {timeout_seconds}` (services/launch.ts); the approval's state
 *   digest covers the spec, so it binds to the setting, and the receipt discloses it.
 * - Before such a run starts, `suppliedFacts` chooses the newest kept reading of each host of its
 *   inventory younger than the timeout; the ansible tool writes them into Ansible's jsonfile
 *   cache in the work dir (core/facts.ts). A run that was held for approval and whose template's
 *   setting has changed since is refused then (it fails with the reason, running nothing).
 * - When it ends, `collectFacts` stores what the run gathered as readings; a document over 1 MiB
 *   is recorded skipped, with why.
 * - Facts are never in a chain entry, a receipt, an evidence document or the server log: only
 *   the fact deletes are on the chain, naming the inventory, the host and how many readings went.
 * - Reads: below admin, values under secret-looking keys are masked (the inventories' rule); with
 *   `--fact-cache-admin-only` every fact read is 403 below admin.
 */

/** A template write's fact cache fields: on update, omitted or null means unchanged (spec part A 2.3). */
export interface FactCacheDraft {
  use_fact_cache?: boolean | null;
  fact_cache_timeout?: number | null;
}

/** Saves a template's fact cache setting after its other fields; 400 naming the field when it has no stored inventory. */
export async function saveTemplateFactCache(tx: Db, template: Template, draft: FactCacheDraft, current?: Template): Promise<Template> {
  const use = draft.use_fact_cache ?? current?.use_fact_cache ?? false;
  const timeout = draft.fact_cache_timeout ?? current?.fact_cache_timeout ?? 0;
  if (use && !template.inventory_id) {
    throw badRequest('use_fact_cache: the fact cache needs inventory_id, a stored inventory whose hosts the facts are kept for', { field: 'use_fact_cache' });
  }
  // A read sent back carries `fact_cache_timeout: 0`: only a timeout that would matter needs the inventory.
  if (draft.fact_cache_timeout != null && draft.fact_cache_timeout > 0 && !template.inventory_id) {
    throw badRequest('fact_cache_timeout: the fact cache needs inventory_id, a stored inventory whose hosts the facts are kept for', { field: 'fact_cache_timeout' });
  }
  if (use !== template.use_fact_cache || timeout !== template.fact_cache_timeout) {
    await setTemplateFactCache(tx, template.id, { use_fact_cache: use, fact_cache_timeout: timeout });
  }
  return { ...template, use_fact_cache: use, fact_cache_timeout: timeout };
}

/** The run spec fields a launch of the template adds: `fact_cache` when its cache is on. */
export function launchFactCache(template: Template): { fact_cache?: { timeout_seconds: number } } {
  const setting = factCacheOf(template);
  return setting ? { fact_cache: setting } : {};
}

/**
 * The facts supplied to an ansible run as it starts: undefined for a run without `fact_cache`.
 * A run held for approval whose template's setting differs from the one it carries is refused
 * (RunInputError: the run fails with the reason).
 */
export async function suppliedFacts(db: Db, run: Run): Promise<FactSupply | undefined> {
  if (run.tool !== 'ansible') return undefined;
  if (run.template_id && run.hold) {
    const template = await templateFactCache(db, run.template_id);
    if (template && !sameFactCache(factCacheOf(template), run.spec.fact_cache)) {
      const was = run.spec.fact_cache ? `on with a ${run.spec.fact_cache.timeout_seconds}s timeout` : 'off';
      const now = factCacheOf(template);
      throw new RunInputError(
        `the fact cache setting of template ${run.template_id} changed after this run was approved (the run carries it ${was}; ` +
          `the template now has it ${now ? `on with a ${now.timeout_seconds}s timeout` : 'off'}); launch the template again`,
      );
    }
  }
  const setting = run.spec.fact_cache;
  if (!setting || !run.spec.inventory_id) return undefined;
  const since = setting.timeout_seconds > 0 ? new Date(Date.now() - setting.timeout_seconds * 1000) : null;
  return { facts: await cachedFactTexts(db, run.spec.inventory_id, since) };
}

const digestOf = (facts: unknown) => sha256Hex(canonicalJson(facts));

/** One fact cache file a run left, as read from its work dir (activities/run-results.ts): its size, and its text when within the 1 MiB bound. */
export interface FactsDocument {
  host: string;
  size: number;
  text?: string;
}

/**
 * Stores the facts an ansible run with `fact_cache` gathered: every cache file the run wrote (one
 * whose text is not what was supplied, by the manifest's digests). Returns how many readings
 * were kept and skipped.
 */
export async function storeGatheredFacts(sql: Sql, run: Run, documents: FactsDocument[], supplied: Record<string, string>): Promise<{ kept: number; skipped: number }> {
  if (!run.spec.inventory_id) return { kept: 0, skipped: 0 };
  const gatheredAt = new Date();
  const readings: NewReading[] = [];
  for (const read of documents) {
    if (read.text !== undefined && supplied[read.host] === sha256Hex(read.text)) continue;
    const base = { inventory_id: run.spec.inventory_id, host: read.host, run_id: run.id, gathered_at: gatheredAt, size_bytes: read.size };
    let parsed: unknown;
    if (read.text !== undefined) {
      try {
        parsed = JSON.parse(read.text);
      } catch {
        readings.push({ ...base, skipped: 'the facts document is not valid JSON' });
        continue;
      }
    }
    const why = skipReason(read.size, parsed) ?? (read.text?.includes('\\u0000') ? 'the facts document holds a NUL character, which cannot be stored' : undefined);
    if (why) readings.push({ ...base, skipped: why });
    else readings.push({ ...base, facts: parsed, digest: digestOf(parsed) });
  }
  for (let i = 0; i < readings.length; i += 500) {
    const batch = readings.slice(i, i + 500);
    await sql.begin((tx) => insertReadings(tx, batch));
  }
  const skipped = readings.filter((r) => r.skipped !== undefined).length;
  return { kept: readings.length - skipped, skipped };
}

/** 403 below admin under `--fact-cache-admin-only` (spec part A 4.12). */
export function requireFactReader(ctx: ServerContext, caller: Caller): void {
  if (ctx.config.factCacheAdminOnly && caller.account.role !== 'admin') {
    throw forbidden('cached facts are readable by admins only on this server (--fact-cache-admin-only)', { required_role: 'admin' });
  }
}

/** Facts as the caller may see them: masked below admin. */
export function factsFor(caller: Caller, facts: unknown): { facts: unknown; masked: boolean } {
  const admin = caller.account.role === 'admin';
  return { facts: admin ? facts : maskFacts(facts), masked: !admin };
}

export function readingView(reading: ReadingSummary) {
  return {
    host: reading.host,
    inventory_id: reading.inventory_id,
    run_id: reading.run_id,
    gathered_at: reading.gathered_at.toISOString(),
    size_bytes: reading.size_bytes,
    kept: reading.skipped === null,
    skipped: reading.skipped,
  };
}

function fullView(caller: Caller, reading: Reading) {
  const { facts, masked } = factsFor(caller, reading.facts);
  return { ...readingView(reading), facts, facts_masked: masked };
}

/** `GET /v1/inventories/{id}/facts`: hosts with cached facts; those whose gathering run the caller may not read left out. */
export async function inventoryFacts(ctx: ServerContext, caller: Caller, inventoryId: string) {
  requireFactReader(ctx, caller);
  await readableInventory(ctx.sql, caller, inventoryId);
  const { rows, withheld } = await listInventoryReadings(ctx.sql, inventoryId, readerOf(caller));
  return { inventory_id: inventoryId, hosts: rows.map(readingView), count: rows.length, total: rows.length, withheld };
}

/** `GET /v1/inventories/{id}/facts/{host}`: one host's cached facts, masked below admin. */
export async function inventoryHostFacts(ctx: ServerContext, caller: Caller, inventoryId: string, host: string) {
  requireFactReader(ctx, caller);
  await readableInventory(ctx.sql, caller, inventoryId);
  const reading = await newestReading(ctx.sql, host, inventoryId, readerOf(caller));
  if (!reading || !reading.readable) throw notFound(`cached facts of host ${host} in inventory ${inventoryId}`);
  return fullView(caller, reading);
}

/** `GET /v1/hosts/{host}/facts`: the most recent facts gathered for a host, from any inventory. */
export async function hostFacts(ctx: ServerContext, caller: Caller, host: string) {
  requireFactReader(ctx, caller);
  const reading = await newestReading(ctx.sql, host, null, readerOf(caller));
  if (!reading) throw notFound(`facts of host ${host}`);
  if (!reading.readable) throw notFound(`facts of host ${host}`);
  return fullView(caller, reading);
}

/**
 * `DELETE /v1/inventories/{id}/facts[/{host}]`: clears cached facts (every reading of them) so the
 * next run gathers afresh. Needs manage on the inventory. The chain entry names the inventory,
 * the host and the count, never facts. A delete that finds nothing is 404 and leaves no entry.
 */
export async function clearFacts(ctx: ServerContext, caller: Caller, origin: AuditOrigin, inventoryId: string, host?: string): Promise<number> {
  await readableInventory(ctx.sql, caller, inventoryId);
  return recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    await requireAccess(tx, caller, inventoryId, 'manage', { action: `clearing cached facts of inventory ${inventoryId}` });
    const removed = await deleteReadings(tx, inventoryId, host);
    if (host !== undefined && removed === 0) throw notFound(`cached facts of host ${host} in inventory ${inventoryId}`);
    entry.body = { kind: 'facts.cleared', inventory_id: inventoryId, ...(host !== undefined ? { host } : {}), readings_removed: removed };
    return removed;
  });
}
