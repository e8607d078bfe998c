import { connectDatabase, statementsSentSoFar, type Sql } from '../../store/db';
import { createTestDatabase } from '../support/database';

// `cairn_db_statements_total` and the bench's per-run cost count the statements sent
// (store/db.ts connectDatabase), without the stack trace postgres.js otherwise takes for each query.

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: Sql;
beforeAll(async () => {
  database = await createTestDatabase({ empty: true });
  // One connection, opened before counting: opening one reads the database's types, a statement too.
  sql = connectDatabase(database.url, { max: 1 });
  await sql`SELECT 0`;
});
afterAll(async () => {
  await sql?.end();
  await database?.drop();
});

test('every statement sent is counted, in a transaction too, and a fragment is not one', async () => {
  const before = statementsSentSoFar();
  const fragment = sql`SELECT 1 AS one`;
  await sql`WITH f AS (${fragment}) SELECT one FROM f`;
  await sql.begin(async (tx) => {
    await tx`SELECT 2`;
  });
  // The statement with its fragment, then BEGIN, the transaction's statement and COMMIT.
  expect(statementsSentSoFar() - before).toBe(4);
});

test('a query takes no stack trace of its own: queries from one place share one origin', () => {
  const select = () => sql`SELECT 1`;
  const fromHere = () => select();
  const fromThere = () => select();
  // postgres.js keeps one origin per place in the code unless `debug` was given when the client was
  // made, when it captures a stack for every query and fragment (these two would then differ).
  const origins = [fromHere(), fromThere()].map((query) => (query as unknown as { origin: string }).origin);
  expect(origins[0]).toBe(origins[1]);
  expect(origins[0]).toContain('statement-count.test.ts');
});
