import type { AuditEntryFields } from '../../core/audit/audit-chain';
import { canonicalJson } from '../../core/audit/canonical';
import { newId } from '../../core/ids';
import { sha256Hex } from '../../core/sha256';
import type { Db, Sql } from '../../store/db';
import { appendAuditEntry, type StoredAuditEntry } from '../../store/audit';
import type postgres from 'postgres';

/**
 * Who asked for a mutation and how: a request's method, path and the parts its fingerprint is
 * made of, or a word for a mutation the service makes itself (a run's end is method `RUN`, actor
 * `cairn`, and has no request). The fingerprint is computed when the chain entry is made, so a
 * route or service can name secret fields (`withholdFields`) once it has parsed the request.
 */
export interface AuditOrigin {
  actor: string;
  method: string;
  path: string;
  /** The request as received; absent for the service's own mutations, whose fingerprint is empty. */
  request?: RequestParts;
  /** Body field paths, as errors name them (`answers.pin`, `survey[2].default`), withheld from the fingerprint. */
  withheld: Set<string>;
}

/** The parts of a request its fingerprint covers. */
export interface RequestParts {
  method: string;
  path: string;
  query: Record<string, unknown>;
  body: unknown;
}

/**
 * Withholds these body fields from the request's fingerprint, whatever their names: a secret the
 * schema knows of (a secret survey answer or default, a password) contributes nothing to the
 * hash, so no one can confirm a guess of it offline. Call it where the value is known to be
 * secret, before the chain entry is made; a path the body does not hold is harmless.
 */
export function withholdFields(origin: AuditOrigin, paths: Iterable<string>): void {
  for (const path of paths) origin.withheld.add(path);
}

/** What the work inside {@link recordMutation} may set on its chain entry before it is appended. */
export interface EntryDraft {
  /** The entry id; a decision takes it as its own id (spec part A 2.7 item 3). */
  id: string;
  /** What changed: object ids, and `kind`, a dotted name of the mutation. */
  body: Record<string, unknown>;
  /** The run the entry is about, so its receipt can find it. */
  run_id: string | null;
  /** Set when the actor is known only inside the work (a login names its account). */
  actor?: string;
}

/**
 * Runs `work` in one transaction and appends its chain entry last in that same transaction, so a
 * change and its audit record commit together or not at all. `outcome` is the status the change
 * is answered with. Work that finds nothing to change returns `unchanged(value)`: its transaction
 * commits (it wrote nothing) and no entry is appended.
 */
export async function recordMutation<T>(
  sql: Sql,
  origin: AuditOrigin,
  outcome: number | string,
  work: (tx: postgres.TransactionSql, entry: EntryDraft) => Promise<T | Unchanged<T>>,
): Promise<T> {
  const run = async (tx: postgres.TransactionSql) => {
    const entry: EntryDraft = { id: newId('aud'), body: {}, run_id: null };
    const result = await work(tx, entry);
    if (result instanceof Unchanged) return result.value;
    await appendEntry(tx, origin, outcome, entry);
    return result;
  };
  // Inside a caller's transaction (an import applies many creates as one), a savepoint of it.
  if (inTransaction(sql)) return (sql as unknown as postgres.TransactionSql).savepoint(run) as Promise<T>;
  return sql.begin(run) as Promise<T>;
}

/** Whether `sql` is a transaction already (services/imports.ts runs create paths inside one). */
export function inTransaction(sql: Sql | postgres.TransactionSql): boolean {
  return 'savepoint' in sql;
}

/** A result of work that changed nothing and so leaves no chain entry. */
export class Unchanged<T> {
  constructor(readonly value: T) {}
}

export const unchanged = <T>(value: T) => new Unchanged(value);

/** Appends the entry for a change made in `tx`; for callers that manage their own transaction. */
export async function appendEntry(tx: Db, origin: AuditOrigin, outcome: number | string, entry: EntryDraft): Promise<StoredAuditEntry> {
  return appendAuditEntry(tx, entryFields(origin, outcome, entry));
}

/** The chain entry's fields for a change: who and how from the origin, what from the draft. */
export function entryFields(origin: AuditOrigin, outcome: number | string, entry: EntryDraft): AuditEntryFields & { run_id: string | null } {
  return {
    id: entry.id,
    at: new Date(),
    actor: entry.actor ?? origin.actor,
    method: origin.method,
    path: origin.path,
    fingerprint: originFingerprint(origin),
    outcome,
    body: entry.body,
    run_id: entry.run_id,
  };
}

/** The origin of mutations the service makes on its own, such as recording a run's end. */
export function serviceOrigin(method: string, path: string): AuditOrigin {
  return { actor: 'cairn', method, path, withheld: new Set() };
}

/** The fingerprint of the origin's request with its withheld fields; empty for the service's own mutations. */
export function originFingerprint(origin: AuditOrigin): string {
  const request = origin.request;
  return request ? requestFingerprint(request.method, request.path, request.query, request.body, origin.withheld) : '';
}

/**
 * The backstop: request fields withheld by name, at any depth, even where no route named them. A
 * reason is committed on its own (spec part A 2.7 item 3); the rest are names secrets go by. The
 * rule that counts is the schema's (`withholdFields`): this only catches what a route forgot.
 */
const WITHHELD_NAMES = /^(password|current_password|new_password|reason|masked_reason|text|token|secret|.*_secret|.*_token)$/i;
const WITHHELD_MARK = '[withheld]';

/**
 * `sha256:` + hex SHA-256 of the canonical JSON of the request: method, path, query and body, with
 * each withheld body path (and each field named like a secret) replaced by one fixed marker, so a
 * withheld value, whatever it is, leaves the hash as it is. The same request always has the same
 * fingerprint.
 */
export function requestFingerprint(method: string, path: string, query: Record<string, unknown>, body: unknown, withheld: ReadonlySet<string> = new Set()): string {
  const request = { method, path, query: withhold(query, undefined, new Set()), body: withhold(body ?? null, '', withheld) };
  let text: string;
  try {
    text = canonicalJson(request);
  } catch {
    // A body canonical JSON refuses (a lone surrogate) is still fingerprinted, by its plain JSON.
    text = JSON.stringify(request);
  }
  return 'sha256:' + sha256Hex(text);
}

/**
 * `value` with every withheld path and secret-named key replaced by the marker. `at` is the path
 * of `value` in the body, formatted as core/field-path.ts does (`survey[0].default`); undefined
 * where paths do not apply (the query).
 */
function withhold(value: unknown, at: string | undefined, withheld: ReadonlySet<string>): unknown {
  if (at !== undefined && withheld.has(at)) return WITHHELD_MARK;
  if (Array.isArray(value)) return value.map((inner, i) => withhold(inner, at === undefined ? undefined : `${at}[${i}]`, withheld));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([key, inner]) => [
      key,
      WITHHELD_NAMES.test(key) ? WITHHELD_MARK : withhold(inner, at === undefined ? undefined : at ? `${at}.${key}` : key, withheld),
    ]),
  );
}
