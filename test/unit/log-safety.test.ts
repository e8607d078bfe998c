import postgres from 'postgres';
import { loggableError } from '../../core/log-safety';

/** A postgres.js error as the driver builds it from a server's ErrorResponse, with the statement attached. */
function postgresError(fields: Record<string, string>, statement?: { query: string; parameters: unknown[] }): Error {
  const err = new postgres.PostgresError({ severity_local: 'ERROR', severity: 'ERROR', file: 'x.c', line: '1', ...fields } as never);
  if (statement) {
    Object.defineProperties(err, {
      query: { value: statement.query, enumerable: true },
      parameters: { value: statement.parameters, enumerable: true },
      args: { value: statement.parameters, enumerable: true },
    });
  }
  return err;
}

const logged = (err: unknown) => JSON.stringify(loggableError(err));

test('a unique violation keeps its code, constraint and table but not the key it quotes', () => {
  const err = postgresError(
    {
      code: '23505',
      message: 'duplicate key value violates unique constraint "accounts_username_key"',
      detail: 'Key (username)=(ann.lee) already exists.',
      schema_name: 'public',
      table_name: 'accounts',
      constraint_name: 'accounts_username_key',
      routine: '_bt_check_unique',
    },
    { query: 'INSERT INTO accounts (username, profile) VALUES ($1, $2)', parameters: ['ann.lee', '{"full_name":"Ann Lee"}'] },
  );
  expect(loggableError(err)).toEqual({
    type: 'PostgresError',
    message: 'duplicate key value violates unique constraint "accounts_username_key"',
    stack: expect.stringMatching(/^PostgresError: duplicate key value violates unique constraint "accounts_username_key"\n\s+at /),
    code: '23505',
    severity: 'ERROR',
    schema_name: 'public',
    table_name: 'accounts',
    constraint_name: 'accounts_username_key',
    routine: '_bt_check_unique',
  });
  expect(logged(err)).not.toMatch(/ann\.lee|Ann Lee|INSERT/);
});

test('a check violation keeps the names but not the failing row', () => {
  const err = postgresError({
    code: '23514',
    message: 'new row for relation "accounts" violates check constraint "accounts_profile_check"',
    detail: 'Failing row contains (usr_1, ann, viewer, null, {"full_name": "Ann Lee"}).',
    table_name: 'accounts',
    constraint_name: 'accounts_profile_check',
  });
  expect(loggableError(err)).toMatchObject({ message: 'new row for relation "accounts" violates check constraint "accounts_profile_check"', code: '23514' });
  expect(logged(err)).not.toMatch(/Ann Lee|Failing row/);
});

test.each([
  ['invalid input syntax for type integer: "abc-secret"', 'invalid input syntax for type integer: "…"'],
  ['value "2147483648" is out of range for type integer', 'value "…" is out of range for type integer'],
  ['date/time field value out of range: "0000-01-01T00:00:00.000Z"', 'date/time field value out of range: "…"'],
  ['invalid input syntax for type integer: "a"quoted" secret"', 'invalid input syntax for type integer: "…"'],
  ['invalid byte sequence for encoding "UTF8": 0xe2 0x82', 'invalid byte sequence for encoding "…": 0x…'],
])('a message quoting a value keeps its shape without the value: %s', (message, shown) => {
  const err = postgresError({ code: '22P02', message, where: `JSON data, line 1: {"full_name": "abc-secret"`, hint: 'Check "abc-secret".' });
  const out = loggableError(err) as Record<string, unknown>;
  expect(out.message).toBe(shown);
  expect(String(out.stack).split('\n')[0]).toBe(`PostgresError: ${shown}`);
  expect(out).not.toHaveProperty('where');
  expect(out).not.toHaveProperty('hint');
  expect(logged(err)).not.toMatch(/abc-secret|quoted|2147483648|0000-01-01|0xe2/);
});

test('a statement error (class 42) keeps the names it quotes, which are the statement’s own', () => {
  const err = postgresError({ code: '42P01', message: 'relation "run_archive" does not exist' });
  expect(loggableError(err)).toMatchObject({ message: 'relation "run_archive" does not exist', code: '42P01' });
});

test('other errors keep class, message, code and frames, and no other property', () => {
  const err = Object.assign(new TypeError('cannot read the run'), { code: 'E_RUN', input: { password: 'hunter2' }, details: { path: 'x' } });
  const out = loggableError(err) as Record<string, unknown>;
  expect(out).toEqual({ type: 'TypeError', message: 'cannot read the run', code: 'E_RUN', stack: expect.stringMatching(/^TypeError: cannot read the run\n\s+at /) });
  expect(logged(err)).not.toContain('hunter2');
});

test('a cause is logged the same way', () => {
  const cause = postgresError({ code: '22P02', message: 'invalid input syntax for type uuid: "ann@example.com"', detail: 'ann@example.com' });
  const err = new Error('saving the profile failed', { cause });
  expect(loggableError(err)).toMatchObject({ message: 'saving the profile failed', cause: { type: 'PostgresError', message: 'invalid input syntax for type uuid: "…"' } });
  expect(logged(err)).not.toContain('ann@example.com');
});

test('a value that is not an error is left as it is', () => {
  expect(loggableError('stream closed')).toBe('stream closed');
  expect(loggableError(undefined)).toBeUndefined();
});
