import { carriedSecrets, knownSecretValues, openRunSecrets, RunSecretsError, sealRunSecrets } from '../../core/runs/run-secrets';
import { createSealer } from '../../core/credentials/seal';
import { DomainError } from '../../core/errors';

const sealer = createSealer({ key: 'a-test-key-that-is-long-enough-1234', salt: 'a-test-salt-12345' });
const otherKey = createSealer({ key: 'another-test-key-long-enough-12345', salt: 'a-test-salt-12345' });
const DIGEST = 'sha256:' + 'a'.repeat(64);

function errorOf(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a throw');
}

test('secrets sealed to a run open for that run and digest only', () => {
  const sealed = sealRunSecrets(sealer, 'run_1', DIGEST, { api_token: 's3cret-value', b: 'x' })!;
  expect(Object.keys(sealed)).toEqual(['api_token', 'b']);
  expect(JSON.stringify(sealed)).not.toContain('s3cret-value');
  expect(openRunSecrets(sealer, { id: 'run_1', state_digest: DIGEST, sealed_vars: sealed })).toEqual({ api_token: 's3cret-value', b: 'x' });
  // Moved to another run, or held by a run whose digest changed, it does not open.
  expect(errorOf(() => openRunSecrets(sealer, { id: 'run_2', state_digest: DIGEST, sealed_vars: sealed }))).toBeInstanceOf(RunSecretsError);
  expect(errorOf(() => openRunSecrets(sealer, { id: 'run_1', state_digest: 'sha256:' + 'b'.repeat(64), sealed_vars: sealed }))).toBeInstanceOf(RunSecretsError);
  // Swapped between variables, it does not open either.
  const swapped = { api_token: sealed.b, b: sealed.api_token };
  expect((errorOf(() => openRunSecrets(sealer, { id: 'run_1', state_digest: DIGEST, sealed_vars: swapped })) as RunSecretsError).variable).toBe('api_token');
});

test('nothing to seal leaves the column null; sealing without a key is a 409 naming the settings', () => {
  expect(sealRunSecrets(undefined, 'run_1', DIGEST, undefined)).toBeNull();
  expect(sealRunSecrets(sealer, 'run_1', DIGEST, {})).toBeNull();
  const err = errorOf(() => sealRunSecrets(undefined, 'run_1', DIGEST, { api_token: 'v' })) as DomainError;
  expect(err.code).toBe('conflict');
  expect(err.message).toMatch(/SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT/);
  expect(err.details).toMatchObject({ variables: ['api_token'] });
});

test('a value that does not open names the variable and the fix, never the value', () => {
  const run = { id: 'run_1', state_digest: DIGEST, sealed_vars: sealRunSecrets(sealer, 'run_1', DIGEST, { api_token: 'the-value' }) };
  const other = errorOf(() => openRunSecrets(otherKey, run));
  expect(other.message).toMatch(/api_token.*another encryption key and salt: restore the SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT it was sealed with/);
  const none = errorOf(() => openRunSecrets(undefined, run));
  expect(none.message).toMatch(/api_token.*this server has no SERVICE_ENCRYPTION_KEY/);
  for (const err of [other, none]) expect(err.message).not.toContain('the-value');
  const refused = errorOf(() => carriedSecrets(otherKey, run)) as DomainError;
  expect(refused.code).toBe('conflict');
  expect(refused.details).toMatchObject({ variable: 'api_token' });
  expect(carriedSecrets(sealer, run)).toEqual({ api_token: 'the-value' });
  expect(carriedSecrets(undefined, { ...run, sealed_vars: null })).toBeUndefined();
});

test('the masker knows each secret and each line of a multi-line one', () => {
  expect(knownSecretValues({ a: 'one-line', b: 'first line\nsecond line' })).toEqual(['one-line', 'first line\nsecond line', 'first line', 'second line']);
});
