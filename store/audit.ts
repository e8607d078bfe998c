import { entryCanonicalPrefix, entryFromStoredText, normalizedEntryFields, type AuditAnchor, type AuditEntry, type AuditEntryFields } from '../core/audit/audit-chain';
import type { Db } from './db';
import type { Run } from '../core/runs/run';

/** An entry as a row: `at` is read back as a Date and turned into the hashed string form here. */
interface AuditRow extends Omit<AuditEntry, 'at'> {
  at: Date;
  run_id: string | null;
  canonical: string | null;
}

export type StoredAuditEntry = AuditEntry & { run_id: string | null };

type NormalizedEntry = ReturnType<typeof normalizedEntryFields>;

/**
 * An entry as read. A row appended since schema/017_scale.sql keeps the text its hash covers, and
 * that text is the entry: its fields are read from it, and the columns beside it (written for
 * indexes and SQL) are never shown, so a column edited by hand changes nothing anyone reads. A
 * row appended before has only its columns. A text that does not parse (verification reports it)
 * leaves the columns to show.
 */
function fromRow(row: AuditRow): StoredAuditEntry {
  const { canonical, ...columns } = row;
  const entry = canonical === null ? undefined : entryFromStoredText(canonical, row.hash);
  return entry ? { ...entry, run_id: row.run_id } : { ...columns, at: row.at.toISOString() };
}

const COLUMNS = ['seq', 'id', 'at', 'actor', 'method', 'path', 'fingerprint', 'outcome', 'body', 'prev_hash', 'hash', 'run_id', 'canonical'];

/**
 * A row as the chain stream yields it: `{ seq, hash, run_id, canonical }` when it keeps the text
 * its hash covers (verification hashes that text and needs nothing else), else the entry from its
 * columns. {@link entryOfChainRow} reads the entry either way.
 */
export type ChainRow = { seq: number; hash: string; run_id: string | null; canonical: string } | StoredAuditEntry;

/**
 * The entry of a streamed row, read from its text when it has one. Precondition: the row verified
 * (a text that hashes to its entry's hash was written by the store, and parses).
 */
export function entryOfChainRow(row: ChainRow): StoredAuditEntry {
  if ('body' in row) return row;
  const entry = entryFromStoredText(row.canonical, row.hash);
  if (!entry) throw new Error(`audit entry ${row.seq} keeps a text that is not an entry`);
  return { ...entry, run_id: row.run_id };
}

/**
 * The SQL that appends one entry to the chain, as common table expressions to put in a statement's
 * WITH list: lock the chain's head row, link the entry to it (seq + 1, prev_hash = the head's
 * hash), hash it in PostgreSQL from its canonical JSON (core/audit-chain.ts `entryCanonicalPrefix`
 * + `chainLinkSuffix`, the same bytes `entryHash` reads), store it (`audit_inserted`) and move the
 * head. With `onlyIfAny`, the name of another CTE, the entry is appended only when that CTE
 * returned rows, so a compare-and-set and its entry are one statement that does both or neither.
 * Put it last in the transaction that makes the change: the lock is then held only until commit,
 * and every server's entries link in the order they commit.
 */
export function auditAppendSteps(db: Db, fields: AuditEntryFields & { run_id?: string | null }, onlyIfAny?: string) {
  return appendSteps(db, normalizedEntryFields(fields), fields.run_id ?? null, onlyIfAny);
}

function appendSteps(db: Db, entry: NormalizedEntry, runId: string | null, onlyIfAny?: string) {
  const prefix = entryCanonicalPrefix(entry);
  const guard = onlyIfAny ? db`WHERE EXISTS (SELECT 1 FROM ${db(onlyIfAny)})` : db``;
  return db`
    audit_head_row AS (
      SELECT seq, hash FROM audit_head WHERE id FOR UPDATE
    ), audit_text AS (
      SELECT audit_head_row.seq + 1 AS seq, audit_head_row.hash AS prev_hash,
             ${prefix} || ',"prev_hash":"' || audit_head_row.hash || '","seq":' || (audit_head_row.seq + 1)::text || '}' AS canonical
      FROM audit_head_row
    ), audit_link AS (
      SELECT seq, prev_hash, canonical, encode(sha256(convert_to(canonical, 'UTF8')), 'hex') AS hash FROM audit_text
    ), audit_inserted AS (
      INSERT INTO audit_entries (seq, id, at, actor, method, path, fingerprint, outcome, body, prev_hash, hash, run_id, canonical)
      SELECT audit_link.seq, ${entry.id}, ${entry.at}, ${entry.actor}, ${entry.method}, ${entry.path}, ${entry.fingerprint},
             ${db.json(entry.outcome as never)}, ${db.json(entry.body as never)}, audit_link.prev_hash, audit_link.hash, ${runId},
             audit_link.canonical
      FROM audit_link ${guard}
      RETURNING seq, prev_hash, hash
    ), audit_moved AS (
      UPDATE audit_head SET seq = audit_inserted.seq, hash = audit_inserted.hash FROM audit_inserted WHERE audit_head.id
    )`;
}

/** Appends one entry to the chain in one statement (see {@link auditAppendSteps}). */
export async function appendAuditEntry(db: Db, fields: AuditEntryFields & { run_id?: string | null }): Promise<StoredAuditEntry> {
  const entry = normalizedEntryFields(fields);
  const runId = fields.run_id ?? null;
  const [linked] = await db<{ seq: number; prev_hash: string; hash: string }[]>`
    WITH ${appendSteps(db, entry, runId)} SELECT seq, prev_hash, hash FROM audit_inserted`;
  return { ...entry, ...linked, run_id: runId };
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
export async function* streamAuditEntries(db: Db, batch = 2000, afterSeq = 0): AsyncGenerator<ChainRow> {
  // The columns only for rows without their text (appended before schema/017_scale.sql).
  for await (const rows of db<AuditRow[]>`
    SELECT seq, hash, run_id, canonical,
           CASE WHEN canonical IS NULL THEN id END AS id, CASE WHEN canonical IS NULL THEN at END AS at,
           CASE WHEN canonical IS NULL THEN actor END AS actor, CASE WHEN canonical IS NULL THEN method END AS method,
           CASE WHEN canonical IS NULL THEN path END AS path, CASE WHEN canonical IS NULL THEN fingerprint END AS fingerprint,
           CASE WHEN canonical IS NULL THEN outcome END AS outcome, CASE WHEN canonical IS NULL THEN body END AS body,
           CASE WHEN canonical IS NULL THEN prev_hash END AS prev_hash
    FROM audit_entries WHERE seq > ${afterSeq} ORDER BY seq`.cursor(batch)) {
    for (const row of rows) {
      yield row.canonical !== null ? { seq: row.seq, hash: row.hash, run_id: row.run_id, canonical: row.canonical } : fromRow(row);
    }
  }
}

/** The stored hashes of entries after..size (1..size by default), in chain order: the leaves of a prefix already verified. */
export async function auditHashesUpTo(db: Db, size: number, after = 0): Promise<string[]> {
  const hashes: string[] = [];
  for await (const rows of db<{ hash: string }[]>`SELECT hash FROM audit_entries WHERE seq > ${after} AND seq <= ${size} ORDER BY seq`.cursor(10_000)) {
    for (const row of rows) hashes.push(row.hash);
  }
  return hashes;
}

/** The verified prefix of the chain (schema/017_scale.sql audit_verified). */
export interface VerifiedPrefix {
  generation: number;
  size: number;
  head_hash: string | null;
  frontier: string[] | null;
  verified_at: Date | null;
}

export async function verifiedPrefix(db: Db): Promise<VerifiedPrefix> {
  const [row] = await db<VerifiedPrefix[]>`SELECT generation, size, head_hash, frontier, verified_at FROM audit_verified WHERE id`;
  return row;
}

/**
 * Records that entries 1..size verify, only while no entry was rewritten since `generation` was
 * read, and never backward; the time of the last whole read moves only when `wholeChainRead`.
 */
export async function saveVerifiedPrefix(
  db: Db,
  generation: number,
  prefix: { size: number; head_hash: string; frontier: string[] },
  wholeChainRead: boolean,
): Promise<void> {
  await db`
    UPDATE audit_verified SET size = ${prefix.size}, head_hash = ${prefix.head_hash}, frontier = ${db.json(prefix.frontier)},
           verified_at = ${wholeChainRead ? db`now()` : db`verified_at`}
    WHERE id AND generation = ${generation} AND size <= ${prefix.size}`;
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

/** Stores an anchor; `wholeCheck` says whether the whole chain was checked before it was signed. */
export async function insertAnchor(db: Db, anchor: Omit<StoredAnchor, 'at'>, wholeCheck: boolean): Promise<void> {
  await db`
    INSERT INTO audit_anchors (size, head_hash, merkle_root, signed, key_id, whole_check)
    VALUES (${anchor.size}, ${anchor.head_hash}, ${anchor.merkle_root}, ${anchor.signed}, ${anchor.key_id}, ${wholeCheck})
    ON CONFLICT (size) DO NOTHING`;
}

/** Whether an anchor taken after a whole-chain check is younger than `seconds`, by the database's clock. */
export async function wholeCheckedWithin(db: Db, seconds: number): Promise<boolean> {
  const [{ recent }] = await db<{ recent: boolean }[]>`
    SELECT EXISTS (SELECT 1 FROM audit_anchors WHERE whole_check AND at > now() - make_interval(secs => ${seconds})) AS recent`;
  return recent;
}

export async function listAnchors(db: Db): Promise<StoredAnchor[]> {
  return db<StoredAnchor[]>`SELECT size, head_hash, merkle_root, signed, key_id, at FROM audit_anchors ORDER BY size`;
}

export async function chainHead(db: Db): Promise<{ seq: number; hash: string }> {
  const [head] = await db<{ seq: number; hash: string }[]>`SELECT seq, hash FROM audit_head WHERE id`;
  return head;
}

/**
 * What the chain records of the release of a run (for a step or shard, of its parent, whose
 * submission and decision cover it): the status it was submitted with, and whether a decision
 * approved it.
 */
export async function recordedRelease(db: Db, runId: string): Promise<{ run: Run; root: string; submittedStatus: string | null; approved: boolean } | undefined> {
  // The hashed body (schema/021), naming the run too: neither a column edited by hand nor an
  // entry moved to another run by its run_id column can release a run. The run comes in the same
  // round trip, for the claim that follows the check.
  const [row] = await db<(Run & { release_root: string; release_submitted_status: string | null; release_approved: boolean })[]>`
    SELECT r.*, root.id AS release_root,
      (SELECT audit_body(canonical, body)->>'status' FROM audit_entries
        WHERE run_id = root.id AND audit_body(canonical, body)->>'run_id' = root.id
          AND audit_body(canonical, body)->>'kind' = 'run.submitted' ORDER BY seq LIMIT 1) AS release_submitted_status,
      EXISTS (SELECT 1 FROM audit_entries
        WHERE run_id = root.id AND audit_body(canonical, body)->>'run_id' = root.id
          AND audit_body(canonical, body)->>'kind' = 'run.decision' AND audit_body(canonical, body)->>'decision' = 'approve') AS release_approved
    FROM runs r CROSS JOIN LATERAL (SELECT coalesce(r.parent_run_id, r.id) AS id) root
    WHERE r.id = ${runId}`;
  if (!row) return undefined;
  const { release_root: root, release_submitted_status: submittedStatus, release_approved: approved, ...run } = row;
  return { run, root, submittedStatus, approved };
}

/**
 * Runs the chain records as submitted held, with no decision recorded, that are no longer held
 * (and were not canceled by a recorded cancel): a state no recorded move explains.
 */
export async function runsReleasedWithoutDecision(db: Db, limit: number): Promise<{ id: string; status: string }[]> {
  return db<{ id: string; status: string }[]>`
    SELECT r.id, r.status FROM audit_entries s JOIN runs r ON r.id = s.run_id
    WHERE audit_body(s.canonical, s.body)->>'kind' = 'run.submitted' AND audit_body(s.canonical, s.body)->>'status' = 'held'
      AND r.status <> 'held'
      AND NOT EXISTS (SELECT 1 FROM audit_entries d WHERE d.run_id = s.run_id
        AND audit_body(d.canonical, d.body)->>'run_id' = s.run_id AND audit_body(d.canonical, d.body)->>'kind' = 'run.decision')
      AND NOT (r.status = 'canceled' AND EXISTS (
        SELECT 1 FROM audit_entries c WHERE c.run_id = s.run_id
          AND audit_body(c.canonical, c.body)->>'run_id' = s.run_id AND audit_body(c.canonical, c.body)->>'kind' = 'run.cancel_requested'))
    ORDER BY s.seq LIMIT ${limit}`;
}

/** The size of the chain the newest anchor covers; 0 with none. */
export async function lastAnchoredSize(db: Db): Promise<number> {
  const [{ last }] = await db<{ last: number }[]>`SELECT coalesce(max(size), 0)::bigint AS last FROM audit_anchors`;
  return last;
}

/** The newest anchor's signed document, if any. */
export async function newestAnchor(db: Db): Promise<{ signed: string } | undefined> {
  const [last] = await db<{ signed: string }[]>`SELECT signed FROM audit_anchors ORDER BY size DESC LIMIT 1`;
  return last;
}
