import postgres from 'postgres';

export type Sql = postgres.Sql;
/** A connection or an open transaction: store functions that must join a caller's transaction take this. */
export type Db = postgres.Sql | postgres.TransactionSql;

let statementsSent = 0;
/**
 * Statements this process has sent to PostgreSQL through `connectDatabase` clients, each one round
 * trip: what a run costs the database is read off this (the bench's per-run cost, and
 * `cairn_db_statements_total`).
 */
export const statementsSentSoFar = (): number => statementsSent;

/** Statements sent by kind (the text's first words), while a tally is kept: the bench's breakdown of a run's cost. */
let tally: Map<string, number> | undefined;

/** Starts counting statements by kind, from zero; the counts so far are answered by statementTally. */
export function startStatementTally(): void {
  tally = new Map();
}

/** The counts since startStatementTally, most sent first; stops the tally. */
export function statementTally(): [string, number][] {
  const counts = [...(tally ?? new Map<string, number>())].sort((a, b) => b[1] - a[1]);
  tally = undefined;
  return counts;
}

const STATEMENT_KIND_CHARS = 60;
/** How much of a statement's text is looked at for its kind: its first words, past any indentation, not the whole (often kilobytes). */
const STATEMENT_HEAD_CHARS = 400;
function countStatement(text: string): void {
  statementsSent++;
  if (!tally) return;
  const kind = text.slice(0, STATEMENT_HEAD_CHARS).replace(/\s+/g, ' ').trim().slice(0, STATEMENT_KIND_CHARS);
  tally.set(kind, (tally.get(kind) ?? 0) + 1);
}

export function connectDatabase(url: string, options: { max?: number } = {}): Sql {
  const sql = postgres(url, {
    max: options.max ?? 20,
    idle_timeout: 30,
    connect_timeout: 10,
    onnotice: () => {},
    // Counts and offsets are bigint; they stay far below 2^53, so read them as numbers.
    types: { bigint: { to: 20, from: [20], serialize: (value: number) => String(value), parse: (value: string) => Number(value) } },
    transform: { undefined: null },
  });
  // Statements are counted by postgres.js's `debug` hook, which a connection calls as it sends each
  // one. Given at creation, `debug` also makes every query and every fragment capture a stack trace
  // (for an error's origin), which on a server's deep async stacks costs more CPU than the
  // statements' own client work; set on the options its connections read, it only counts. Queries
  // in a transaction still capture one (`begin` copies the hook), as they did.
  sql.options.debug = (_connection: number, text: string) => countStatement(text);
  return sql;
}

/** True when the database answers a trivial query within the time given. */
export async function databaseAnswers(sql: Sql, timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      sql`SELECT 1`,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), timeoutMs);
      }),
    ]);
    return true;
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Waits until the database takes sessions: a server started beside its PostgreSQL (the embedded
 * one, or a container's) may find it accepting connections while still starting up or recovering,
 * when it refuses them with SQLSTATE 57P03. Any other error is the caller's to see at once.
 */
export async function waitForSessions(sql: Sql, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await sql`SELECT 1`;
      return;
    } catch (err) {
      const code = (err as { code?: string }).code;
      const starting = code === '57P03' || code === 'ECONNREFUSED' || code === 'ECONNRESET';
      if (!starting || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** A write refused by a unique constraint (SQLSTATE 23505), such as a name or key already taken. */
export function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: string }).code === '23505';
}

/** `WHERE a AND b …` over the conditions given (nulls left out), or nothing when none is given. */
export function whereAll(db: Db, conditions: (postgres.Fragment | null)[]): postgres.Fragment {
  return conditions
    .filter((c): c is postgres.Fragment => c !== null)
    .reduce((acc: postgres.Fragment | null, c) => (acc === null ? db`WHERE ${c}` : db`${acc} AND ${c}`), null) ?? db``;
}

/** What a list route asks of a table: a page, and optionally only the rows with these ids (`?id=`). */
export interface PageRequest {
  limit: number;
  offset: number;
  ids?: string[];
}

/** A piece of a statement: a fragment, or identifiers (`db('name')`, `db(['a', 'b'])`). */
type SqlPiece = postgres.Fragment | postgres.Helper<any, any>;

/** A page of rows and how many rows match in all. */
export interface Page<T> {
  rows: T[];
  total: number;
}

/**
 * One page of a list and its total, read side by side: `SELECT columns FROM from WHERE … ORDER BY
 * order`, the conditions ANDed (nulls left out) with `idColumn IN page.ids` when the page names
 * ids, and the same count. `from` may join; `columns` (all by default) and `idColumn` then name
 * their table.
 */
export async function readPage<T extends object>(
  db: Db,
  query: { from: SqlPiece; order: postgres.Fragment; columns?: SqlPiece; idColumn?: string; where?: (postgres.Fragment | null)[] },
  page: PageRequest,
): Promise<Page<T>> {
  const where = whereAll(db, [page.ids?.length ? db`${db(query.idColumn ?? 'id')} IN ${db(page.ids)}` : null, ...(query.where ?? [])]);
  const [rows, [{ n }]] = await Promise.all([
    db<T[]>`SELECT ${query.columns ?? db`*`} FROM ${query.from} ${where} ORDER BY ${query.order} LIMIT ${page.limit} OFFSET ${page.offset}`,
    db<{ n: number }[]>`SELECT count(*)::int AS n FROM ${query.from} ${where}`,
  ]);
  return { rows: rows as unknown as T[], total: n };
}
