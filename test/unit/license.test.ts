import {
  BUILT_IN_LICENSE_KEYS,
  FEATURES,
  LicenseError,
  TIER_LIMITS,
  featureRefusal,
  featureTier,
  parseLicense,
  policyLimitRefusal,
  tierAllows,
  tierAllowsPolicyCount,
  type Feature,
  type Tier,
} from '../../core/access/license';
import { generateSigningKey, jwkThumbprint, signDocument, type SigningKey } from '../../core/audit/signing';

const now = new Date('2026-03-01T12:00:00Z');

let testKey: SigningKey;
let untrustedKey: SigningKey;
let trusted: object[];

beforeAll(async () => {
  testKey = await generateSigningKey();
  untrustedKey = await generateSigningKey();
  // The test key is trusted only because it is passed here, beside the release's key.
  trusted = [...BUILT_IN_LICENSE_KEYS, testKey.publicJwk];
});

const issue = (payload: object, key: SigningKey = testKey) => signDocument(payload, key.privateJwk, key.keyId);

async function refusal(promise: Promise<unknown>): Promise<LicenseError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(LicenseError);
    return error as LicenseError;
  }
  throw new Error('expected the license to be refused');
}

describe('parseLicense', () => {
  test('a valid pro license without expiry', async () => {
    const text = await issue({ licensee: 'Acme Ltd', tier: 'pro', issued_at: '2026-01-01T00:00:00Z' });
    await expect(parseLicense(text, trusted, now)).resolves.toEqual({
      tier: 'pro',
      licensee: 'Acme Ltd',
      expires_at: null,
      issued_at: '2026-01-01T00:00:00.000Z',
      install_id: null,
      key_id: testKey.keyId,
    });
  });

  test('a valid team license bound to this install, read from a file with a trailing newline', async () => {
    const text = await issue({
      licensee: 'Globex',
      tier: 'team',
      issued_at: '2026-01-01T00:00:00Z',
      expires_at: '2027-01-01T00:00:00+01:00',
      install_id: 'ins_01',
    });
    const license = await parseLicense(`${text}\n`, trusted, now, 'ins_01');
    expect(license).toMatchObject({ tier: 'team', licensee: 'Globex', expires_at: '2026-12-31T23:00:00.000Z', install_id: 'ins_01' });
  });

  test('an expired license is refused with its expiry', async () => {
    const text = await issue({ licensee: 'Acme', tier: 'team', issued_at: '2025-01-01T00:00:00Z', expires_at: '2026-03-01T12:00:00Z' });
    const error = await refusal(parseLicense(text, trusted, now));
    expect(error.reason).toBe('expired');
    expect(error.message).toBe('license refused: the license expired at 2026-03-01T12:00:00.000Z');
    // The same license was good a second earlier.
    await expect(parseLicense(text, trusted, new Date('2026-03-01T11:59:59Z'))).resolves.toMatchObject({ tier: 'team' });
  });

  test('a license signed by an untrusted key is refused, naming the key', async () => {
    const text = await issue({ licensee: 'Mallory', tier: 'team', issued_at: '2026-01-01T00:00:00Z' }, untrustedKey);
    const error = await refusal(parseLicense(text, trusted, now));
    expect(error.reason).toBe('untrusted');
    expect(error.message).toBe(`license refused: the license is signed by key ${untrustedKey.keyId}, which is not a trusted license key`);
  });

  test('the test key is trusted only when passed: the built-in keys alone refuse its licenses', async () => {
    const text = await issue({ licensee: 'Acme', tier: 'pro', issued_at: '2026-01-01T00:00:00Z' });
    expect((await refusal(parseLicense(text, BUILT_IN_LICENSE_KEYS, now))).reason).toBe('untrusted');
    expect((await refusal(parseLicense(text, [], now))).message).toBe('license refused: no trusted license keys are configured');
  });

  test('a license whose payload was altered after signing is refused', async () => {
    const text = await issue({ licensee: 'Acme', tier: 'pro', issued_at: '2026-01-01T00:00:00Z' });
    const [header, , signature] = text.split('.');
    const upgraded = Buffer.from('{"issued_at":"2026-01-01T00:00:00Z","licensee":"Acme","tier":"team"}').toString('base64url');
    const error = await refusal(parseLicense(`${header}.${upgraded}.${signature}`, trusted, now));
    expect(error.reason).toBe('signature');
    expect(error.message).toMatch(/signature does not verify/);
  });

  test.each([
    ['enterprise', 'unknown tier "enterprise"; a license grants "pro" or "team"'],
    ['community', 'unknown tier "community"; a license grants "pro" or "team"'],
    ['Team', 'unknown tier "Team"; a license grants "pro" or "team"'],
  ])('a license with tier %j is refused', async (tier, message) => {
    const text = await issue({ licensee: 'Acme', tier, issued_at: '2026-01-01T00:00:00Z' });
    const error = await refusal(parseLicense(text, trusted, now));
    expect(error.reason).toBe('tier');
    expect(error.message).toBe(`license refused: ${message}`);
  });

  test.each([
    ['', 'malformed', 'the license file is empty'],
    ['   \n', 'malformed', 'the license file is empty'],
    ['hello, I am a license', 'malformed', 'not a Cairn signed document: a signed document is three base64url segments'],
    ['-----BEGIN LICENSE-----\nabc\n-----END LICENSE-----', 'malformed', 'not a Cairn signed document'],
    ['e30.e30.e30', 'malformed', 'not a Cairn signed document: algorithm null is not accepted'],
    ['x'.repeat(20000), 'malformed', 'too large to be a license'],
  ])('garbage %j is refused as malformed', async (text, reason, message) => {
    const error = await refusal(parseLicense(text, trusted, now));
    expect(error.reason).toBe(reason);
    expect(error.message).toContain(message);
  });

  test.each([
    [{ tier: 'pro', issued_at: '2026-01-01T00:00:00Z' }, 'licensee must be a non-empty string'],
    [{ licensee: '  ', tier: 'pro', issued_at: '2026-01-01T00:00:00Z' }, 'licensee must be a non-empty string'],
    [{ licensee: 'Acme', tier: 'pro' }, 'issued_at is missing'],
    [{ licensee: 'Acme', tier: 'pro', issued_at: '1 January 2026' }, 'issued_at is not an RFC 3339 timestamp'],
    [{ licensee: 'Acme', tier: 'pro', issued_at: '2026-01-01T00:00:00Z', expires_at: 1767225600 }, 'expires_at is not an RFC 3339 timestamp'],
    [{ licensee: 'Acme', tier: 'pro', issued_at: '2026-01-01T00:00:00Z', expires_at: '2025-12-31T00:00:00Z' }, 'expires_at is not after issued_at'],
    [{ licensee: 'Acme', tier: 'pro', issued_at: '2026-01-01T00:00:00Z', max_workers: 3 }, 'unknown field "max_workers"'],
    [{ licensee: 'Acme', tier: 'pro', issued_at: '2026-01-01T00:00:00Z', install_id: 7 }, 'install_id must be a non-empty string'],
  ])('a malformed payload %j is refused', async (payload, message) => {
    const error = await refusal(parseLicense(await issue(payload), trusted, now));
    expect(error.reason).toBe('payload');
    expect(error.message).toBe(`license refused: ${message}`);
  });

  test('a license issued in the future is refused; a few minutes of clock skew is tolerated', async () => {
    const future = await issue({ licensee: 'Acme', tier: 'pro', issued_at: '2026-03-02T12:00:00Z' });
    expect((await refusal(parseLicense(future, trusted, now))).reason).toBe('not_yet_valid');
    const skewed = await issue({ licensee: 'Acme', tier: 'pro', issued_at: '2026-03-01T12:03:00Z' });
    await expect(parseLicense(skewed, trusted, now)).resolves.toMatchObject({ tier: 'pro' });
  });

  test('a license bound to another install, or read where the install id is unknown, is refused', async () => {
    const text = await issue({ licensee: 'Acme', tier: 'team', issued_at: '2026-01-01T00:00:00Z', install_id: 'ins_01' });
    const other = await refusal(parseLicense(text, trusted, now, 'ins_02'));
    expect(other.reason).toBe('install');
    expect(other.message).toBe('license refused: the license is for install ins_01, not this install (ins_02)');
    expect((await refusal(parseLicense(text, trusted, now))).reason).toBe('install');
  });

  test('an unusable trusted key is reported as configuration, not blamed on the license', async () => {
    const text = await issue({ licensee: 'Acme', tier: 'pro', issued_at: '2026-01-01T00:00:00Z' });
    const error = await refusal(parseLicense(text, [testKey.privateJwk], now));
    expect(error.reason).toBe('trusted_keys');
    expect(error.message).toMatch(/trusted license key 0 is unusable: a private key was given/);
  });
});

describe('BUILT_IN_LICENSE_KEYS', () => {
  test('holds one real Ed25519 public key and no private half', async () => {
    expect(BUILT_IN_LICENSE_KEYS).toHaveLength(1);
    const [builtIn] = BUILT_IN_LICENSE_KEYS as Array<Record<string, unknown>>;
    expect(builtIn).toMatchObject({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', use: 'sig' });
    expect(builtIn).not.toHaveProperty('d');
    expect(Buffer.from(builtIn!.x as string, 'base64url')).toHaveLength(32);
    expect(await jwkThumbprint(builtIn!)).toBe(builtIn!.kid);
  });
});

describe('tier table (spec part A 1.2)', () => {
  const tiers: Tier[] = ['community', 'pro', 'team'];
  const teamFeatures: Feature[] = [
    'audit_register',
    'drift_reconcile',
    'named_queue',
    'policy_deny',
    'policy_risk_floor',
    'policy_actor_scope',
    'policy_account_scope',
    'policy_distinct_approvers',
    // "Only a worker serves a named queue and every worker is Team."
    'worker',
  ];

  test('every licensed feature named in 1.2 is Team, and Community and Pro lack it', () => {
    expect(Object.keys(FEATURES).sort()).toEqual([...teamFeatures].sort());
    for (const feature of teamFeatures) {
      expect(featureTier(feature)).toBe('team');
      expect(tiers.map((tier) => tierAllows(tier, feature))).toEqual([false, false, true]);
    }
  });

  test('stored policy limits: Community one, Pro five, Team uncapped', () => {
    expect(TIER_LIMITS.community.policies).toBe(1);
    expect(TIER_LIMITS.pro.policies).toBe(5);
    expect(TIER_LIMITS.team.policies).toBe(Infinity);
    expect([0, 1, 2].map((n) => tierAllowsPolicyCount('community', n))).toEqual([true, true, false]);
    expect([5, 6].map((n) => tierAllowsPolicyCount('pro', n))).toEqual([true, false]);
    expect(tierAllowsPolicyCount('team', 100_000)).toBe(true);
  });

  test('refusal sentences name the feature and the tier it needs', () => {
    expect(featureRefusal('audit_register', 'community')).toBe(
      'the period change register (GET /v1/audit/register) needs the Team tier; this install runs Community',
    );
    expect(featureRefusal('named_queue', 'pro')).toBe('a named queue needs the Team tier; this install runs Pro');
    expect(policyLimitRefusal('community')).toBe('the Community tier holds 1 require-approval or exempt policy; Pro holds 5 and Team is uncapped');
    expect(policyLimitRefusal('pro')).toBe('the Pro tier holds 5 require-approval or exempt policies; Team is uncapped');
  });
});
