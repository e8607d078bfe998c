import { chainEntry, type AuditAnchor, type AuditEntry, type AuditEntryFields } from '../core/audit-chain';
import type { Db } from './db';

/** An entry as a row: `at` is read back as a Date and turned into the hashed string form here. */
interface AuditRow extends Omit<AuditEntry, 'at'> {
  at: Date;
  run_id: string | null;
}

export type StoredAuditEntry = AuditEntry & { run_id: string | null };

function fromRow(row: AuditRow): StoredAuditEntry {
  return { ...row, at: row.at.toISOString() };
}

const COLUMNS = ['seq', 'id', 'at', 'actor', 'method', 'path', 'fingerprint', 'outcome', 'body', 'prev_hash', 'hash', 'run_id'];

/**
 * Appends one entry to the chain. Call it last in the transaction that makes the change it
 * records: it locks the chain's head row, so the lock is held only until that commit, and every
 * server's entries link in the order they commit.
 */
export async function appendAuditEntry(db: Db, fields: AuditEntryFields & { run_id?: string | null }): Promise<StoredAuditEntry> {
  const [head] = await db<{ seq: number; hash: string }[]>`SELECT seq, hash FROM audit_head WHERE id FOR UPDATE`;
  const previous = head.seq === 0 ? undefined : ({ seq: head.seq, hash: head.hash } as AuditEntry);
  const entry = chainEntry(previous, fields);
  const runId = fields.run_id ?? null;
  await db`
    WITH inserted AS (
      INSERT INTO audit_entries (seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash, hash, run_id)
      VALUES (${entry.seq}, ${entry.id}, ${entry.at}, ${entry.actor}, ${entry.method}, ${entry.path}, ${entry.fingerprint},
              ${db.json(entry.outcome as never)}, ${db.json(entry.body as never)}, ${entry.prev_hash}, ${entry.hash}, ${runId})
    )
    UPDATE audit_head SET seq = ${entry.seq}, hash = ${entry.hash} WHERE id`;
  return { ...entry, run_id: runId };
}

export interface AuditPageQuery {
  limit: number;
  offset: number;
  order: 'asc' | 'desc';
}

export async function listAuditEntries(db: Db, query: AuditPageQuery): Promise<{ rows: StoredAuditEntry[]; total: number }> {
  const direction = query.order === 'asc' ? db`ASC` : db`DESC`;
  const [rows, [{ n }]] = await Promise.all([
    db<AuditRow[]>`SELECT ${db(COLUMNS)} FROM audit_entries ORDER BY seq ${direction} LIMIT ${query.limit} OFFSET ${query.offset}`,
    db<{ n: number }[]>`SELECT count(*)::int AS n FROM audit_entries`,
  ]);
  return { rows: rows.map(fromRow), total: n };
}

/**
 * Every entry (after `afterSeq`) in chain order, a batch at a time, so a long chain is checked in
 * bounded memory.
 * Ordered by seq as stored: a row whose seq was tampered with shows up out of place, which is
 * what verification should see.
 */
export async function* streamAuditEntries(db: Db, batch = 2000, afterSeq = 0): AsyncGenerator<StoredAuditEntry> {
  for await (const rows of db<AuditRow[]>`SELECT ${db(COLUMNS)} FROM audit_entries WHERE seq > ${afterSeq} ORDER BY seq`.cursor(batch)) {
    for (const row of rows) yield fromRow(row);
  }
}

/** The entries that name a run, in chain order. */
export async function auditEntriesOfRun(db: Db, runId: string): Promise<StoredAuditEntry[]> {
  const rows = await db<AuditRow[]>`SELECT ${db(COLUMNS)} FROM audit_entries WHERE run_id = ${runId} ORDER BY seq`;
  return rows.map(fromRow);
}

/** The entries with seq in (after, after + limit], in chain order. */
export async function auditEntriesAfter(db: Db, after: number, limit: number): Promise<StoredAuditEntry[]> {
  const rows = await db<AuditRow[]>`
    SELECT ${db(COLUMNS)} FROM audit_entries WHERE seq > ${after} ORDER BY seq LIMIT ${limit}`;
  return rows.map(fromRow);
}

export interface StoredAnchor extends AuditAnchor {
  /** The anchor as a signed document (compact JWS). */
  signed: string;
  key_id: string;
  at: Date;
}

export async function insertAnchor(db: Db, anchor: Omit<StoredAnchor, 'at'>): Promise<void> {
  await db`
    INSERT INTO audit_anchors (size, head_hash, merkle_root, signed, key_id)
    VALUES (${anchor.size}, ${anchor.head_hash}, ${anchor.merkle_root}, ${anchor.signed}, ${anchor.key_id})
    ON CONFLICT (size) DO NOTHING`;
}

export async function listAnchors(db: Db): Promise<StoredAnchor[]> {
  return db<StoredAnchor[]>`SELECT size, head_hash, merkle_root, signed, key_id, at FROM audit_anchors ORDER BY size`;
}

export async function chainHead(db: Db): Promise<{ seq: number; hash: string }> {
  const [head] = await db<{ seq: number; hash: string }[]>`SELECT seq, hash FROM audit_head WHERE id`;
  return head;
}
