/**
 * What the server log keeps of an error: enough to find the fault (its class, message, code, the
 * constraint, table and column it concerns, its stack frames) and none of the data that was being
 * read or written. PostgreSQL errors carry that data: `detail` ("Key (username)=(ann) already
 * exists", "Failing row contains (…)"), `where` (the context, which can quote a whole JSON
 * document), `hint`, `internal_query` and, from postgres.js, `query`, `parameters` and `args`; and
 * their messages quote the value refused (`invalid input syntax for type integer: "abc"`). Those
 * fields are left out and those values replaced by `"…"`.
 *
 * Other errors keep their message and only the properties listed here, since a library's error may
 * hold the input it failed on under any name. A value that is not an Error is left as it is.
 */

const KEPT_PROPERTIES = ['code', 'errno', 'syscall'] as const;
/** The fields of a PostgreSQL error that name things in the schema, never data (the driver spells one `data type_name`). */
const POSTGRES_NAMES: [string, string][] = [
  ['severity', 'severity'],
  ['schema_name', 'schema_name'],
  ['table_name', 'table_name'],
  ['column_name', 'column_name'],
  ['data type_name', 'data_type_name'],
  ['constraint_name', 'constraint_name'],
  ['routine', 'routine'],
];
const MAX_CAUSE_DEPTH = 4;
const ELIDED = '"…"';

/** The error as the server log shows it; pino's `err` serializer. */
export function loggableError(value: unknown): unknown {
  return value instanceof Error ? describe(value, 0) : value;
}

function describe(err: Error, depth: number): Record<string, unknown> {
  const fields = err as unknown as Record<string, unknown>;
  const type = err.constructor?.name && err.constructor.name !== 'Object' ? err.constructor.name : err.name;
  const postgres = isPostgresError(err);
  const names = postgres ? POSTGRES_NAMES.filter(([from]) => typeof fields[from] === 'string').map(([from, to]) => [to, fields[from] as string] as const) : [];
  const message = postgres ? withoutQuotedValues(err.message, String(fields.code), names.map(([, name]) => name)) : err.message;
  const out: Record<string, unknown> = { type, message, stack: [`${type}: ${message}`, ...stackFrames(err.stack)].join('\n') };
  for (const key of KEPT_PROPERTIES) {
    const kept = fields[key];
    if (typeof kept === 'string' || typeof kept === 'number') out[key] = kept;
  }
  for (const [name, value] of names) out[name] = value;
  if (depth < MAX_CAUSE_DEPTH) {
    if (err.cause instanceof Error) out.cause = describe(err.cause, depth + 1);
    if (err instanceof AggregateError) out.errors = err.errors.slice(0, 5).map((inner) => (inner instanceof Error ? describe(inner, depth + 1) : typeof inner));
  }
  return out;
}

/** A postgres.js error from the server: its SQLSTATE `code` and `severity` are always set. */
function isPostgresError(err: Error): boolean {
  const { code, severity } = err as unknown as Record<string, unknown>;
  return err.name === 'PostgresError' || (typeof severity === 'string' && typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code));
}

/** The frames of a stack, without its first line, which repeats the message. */
function stackFrames(stack: string | undefined): string[] {
  return (stack ?? '').split('\n').filter((line) => /^\s+at /.test(line));
}

/**
 * A PostgreSQL message with the values it quotes replaced. Quoted schema names (those the error
 * names in its fields) stay; everything from the first other quote to the last other quote goes,
 * so a value that itself holds quotes leaves nothing behind. Messages of class 42 (an error in the
 * statement's text) quote only the statement's own names, since values travel as parameters.
 * Bytes shown in hex (`invalid byte sequence … 0xe2 0x82`) go too.
 */
function withoutQuotedValues(message: string, code: string, schemaNames: string[]): string {
  if (code.startsWith('42')) return message;
  const kept: [number, number][] = [];
  for (const match of message.matchAll(/"([^"]*)"/g)) {
    if (schemaNames.includes(match[1])) kept.push([match.index, match.index + match[0].length]);
  }
  const inKept = (i: number) => kept.some(([from, to]) => i >= from && i < to);
  let first = -1;
  let last = -1;
  for (let i = 0; i < message.length; i++) {
    if (message[i] !== '"' || inKept(i)) continue;
    if (first < 0) first = i;
    last = i;
  }
  const unquoted = first < 0 ? message : message.slice(0, first) + ELIDED + message.slice(last + 1);
  return unquoted.replace(/0x[0-9a-f]{2}(?: 0x[0-9a-f]{2})*/gi, '0x…');
}
