import { SignatureError, documentKeyId, verifyDocument } from '../audit/signing';

/**
 * Tiers and license files (spec part A 1.2). Without a license an install is Community. A license
 * file raises it to Pro or Team: the file holds one Cairn signed document (core/signing.ts, compact
 * JWS, EdDSA, canonical JSON payload) whose payload is exactly
 *
 *   { licensee, tier: "pro" | "team", issued_at, expires_at?, install_id? }
 *
 * with RFC 3339 timestamps. Unknown payload fields are refused rather than ignored, so a later
 * license that carries a restriction is never read by an older release as one without it.
 */

export type Tier = 'community' | 'pro' | 'team';
export type LicensedTier = Exclude<Tier, 'community'>;

const TIER_RANK: Record<Tier, number> = { community: 0, pro: 1, team: 2 };
const TIER_NAME: Record<Tier, string> = { community: 'Community', pro: 'Pro', team: 'Team' };

/**
 * Public keys that sign Cairn licenses, built into the release. Only the public half lives here:
 * licenses are issued outside this repository and the private key is not committed anywhere.
 * A test key is trusted only when a caller passes it explicitly beside these.
 */
export const BUILT_IN_LICENSE_KEYS: object[] = [
  {
    kty: 'OKP',
    crv: 'Ed25519',
    x: '9l13mugcICcyeT8YarjL8evrlTXRTlsbhTm7R23Xamk',
    kid: 'tCmm6y0vST7J3WdwbW20ckvDs2sHFUf4tVsCEvtVxNQ',
    alg: 'EdDSA',
    use: 'sig',
  },
];

/**
 * Stored approval policies (require-approval and exempt together) each tier may hold. The built-in
 * agent-run hold is not a stored policy and counts toward no limit.
 */
export const TIER_LIMITS: Readonly<Record<Tier, { readonly policies: number }>> = {
  community: { policies: 1 },
  pro: { policies: 5 },
  team: { policies: Infinity },
};

/**
 * Licensed features and the lowest tier that has each; `name` goes into the 403 message. Everything
 * not listed is Community. The policy features apply to require-approval and deny policies: an
 * exempt policy may name `actor` and `account` and stays Community (spec part A 2.10).
 */
export const FEATURES = {
  audit_register: { tier: 'team', name: 'the period change register (GET /v1/audit/register)' },
  drift_reconcile: { tier: 'team', name: 'drift reconciliation (POST /v1/drift/reconcile)' },
  named_queue: { tier: 'team', name: 'a named queue' },
  // Only a worker serves a named queue, and every worker is Team, the default pool's included.
  worker: { tier: 'team', name: 'a worker (cairn worker)' },
  policy_deny: { tier: 'team', name: 'deny policies' },
  policy_risk_floor: { tier: 'team', name: 'risk floors on policies' },
  policy_actor_scope: { tier: 'team', name: 'actor scoping on policies' },
  policy_account_scope: { tier: 'team', name: 'account scoping on policies' },
  policy_distinct_approvers: { tier: 'team', name: 'distinct-approver separation of duties' },
} as const satisfies Record<string, { tier: Tier; name: string }>;

export type Feature = keyof typeof FEATURES;

/** The lowest tier that has the feature. */
export function featureTier(feature: Feature): Tier {
  return FEATURES[feature].tier;
}

export function tierAllows(tier: Tier, feature: Feature): boolean {
  return TIER_RANK[tier] >= TIER_RANK[featureTier(feature)];
}

/** Whether a tier may hold `count` stored require-approval and exempt policies. */
export function tierAllowsPolicyCount(tier: Tier, count: number): boolean {
  return count <= TIER_LIMITS[tier].policies;
}

/** The 403 sentence for a feature the install's tier lacks. */
export function featureRefusal(feature: Feature, tier: Tier): string {
  const needed = featureTier(feature);
  return `${FEATURES[feature].name} needs the ${TIER_NAME[needed]} tier; this install runs ${TIER_NAME[tier]}`;
}

/** The 403 sentence for one policy too many. */
export function policyLimitRefusal(tier: Tier): string {
  const limit = TIER_LIMITS[tier].policies;
  const next = tier === 'community' ? 'Pro holds 5 and Team is uncapped' : 'Team is uncapped';
  return `the ${TIER_NAME[tier]} tier holds ${limit} require-approval or exempt ${limit === 1 ? 'policy' : 'policies'}; ${next}`;
}

export interface License {
  tier: LicensedTier;
  licensee: string;
  /** RFC 3339 UTC, or null for a license that does not expire. */
  expires_at: string | null;
  issued_at: string;
  install_id: string | null;
  /** Thumbprint of the trusted key that signed it. */
  key_id: string;
}

export type LicenseFailure = 'malformed' | 'untrusted' | 'signature' | 'payload' | 'tier' | 'expired' | 'not_yet_valid' | 'install' | 'trusted_keys';

export class LicenseError extends Error {
  constructor(
    readonly reason: LicenseFailure,
    message: string,
  ) {
    super(`license refused: ${message}`);
    this.name = 'LicenseError';
  }
}

// Far more than any license needs; a larger file is not a license.
const MAX_LICENSE_CHARS = 16 * 1024;
// A license issued a moment ago on a machine whose clock is a little behind is still good.
const CLOCK_SKEW_MS = 5 * 60 * 1000;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const PAYLOAD_FIELDS = new Set(['licensee', 'tier', 'issued_at', 'expires_at', 'install_id']);

/**
 * Reads a license file's text and checks it against `trustedPublicJwks` (pass
 * `BUILT_IN_LICENSE_KEYS`, plus a test key only where tests configure one). A license bound to an
 * install (`install_id`) is accepted only when `installId` is given and equal. Throws a
 * `LicenseError` saying why a license is refused.
 */
export async function parseLicense(
  text: string,
  trustedPublicJwks: object[],
  now: Date,
  installId?: string,
): Promise<License> {
  if (!Array.isArray(trustedPublicJwks) || trustedPublicJwks.length === 0) {
    throw new LicenseError('trusted_keys', 'no trusted license keys are configured');
  }
  if (typeof text !== 'string') throw new LicenseError('malformed', 'the license is not text');
  if (text.length > MAX_LICENSE_CHARS) throw new LicenseError('malformed', 'the file is too large to be a license');
  const jws = text.trim();
  if (jws === '') throw new LicenseError('malformed', 'the license file is empty');

  const verified = await verifyAgainstTrusted(jws, trustedPublicJwks);
  const payload = verified.payload;

  const unknown = Object.keys(payload).filter((name) => !PAYLOAD_FIELDS.has(name));
  if (unknown.length > 0) {
    throw new LicenseError('payload', `unknown field ${unknown.map((n) => JSON.stringify(n)).join(', ')}`);
  }
  const { licensee, tier } = payload;
  if (typeof licensee !== 'string' || licensee.trim() === '') {
    throw new LicenseError('payload', 'licensee must be a non-empty string');
  }
  if (tier !== 'pro' && tier !== 'team') {
    throw new LicenseError('tier', `unknown tier ${JSON.stringify(tier ?? null)}; a license grants "pro" or "team"`);
  }
  const issued = timestamp(payload.issued_at, 'issued_at');
  if (issued === null) throw new LicenseError('payload', 'issued_at is missing');
  const expires = timestamp(payload.expires_at, 'expires_at');
  if (expires !== null && expires.getTime() <= issued.getTime()) {
    throw new LicenseError('payload', 'expires_at is not after issued_at');
  }
  if (issued.getTime() > now.getTime() + CLOCK_SKEW_MS) {
    throw new LicenseError('not_yet_valid', `issued_at ${issued.toISOString()} is in the future`);
  }
  if (expires !== null && expires.getTime() <= now.getTime()) {
    throw new LicenseError('expired', `the license expired at ${expires.toISOString()}`);
  }

  const boundTo = payload.install_id;
  if (boundTo !== undefined && boundTo !== null) {
    if (typeof boundTo !== 'string' || boundTo === '') throw new LicenseError('payload', 'install_id must be a non-empty string');
    if (installId === undefined) throw new LicenseError('install', `the license is for install ${boundTo} and this install's id is unknown`);
    if (boundTo !== installId) throw new LicenseError('install', `the license is for install ${boundTo}, not this install (${installId})`);
  }

  return {
    tier,
    licensee,
    expires_at: expires === null ? null : expires.toISOString(),
    issued_at: issued.toISOString(),
    install_id: typeof boundTo === 'string' ? boundTo : null,
    key_id: verified.keyId,
  };
}

async function verifyAgainstTrusted(jws: string, trusted: object[]) {
  for (const [index, key] of trusted.entries()) {
    try {
      return await verifyDocument(jws, key);
    } catch (error) {
      if (!(error instanceof SignatureError)) throw error;
      if (error.reason === 'key') throw new LicenseError('trusted_keys', `trusted license key ${index} is unusable: ${error.message}`);
      // Signed by some other key: try the next trusted one.
      if (error.reason === 'key_id') continue;
      if (error.reason === 'signature') throw new LicenseError('signature', error.message);
      if (error.reason === 'payload') throw new LicenseError('payload', error.message);
      throw new LicenseError('malformed', `not a Cairn signed document: ${error.message}`);
    }
  }
  const kid = documentKeyId(jws);
  throw new LicenseError(
    'untrusted',
    kid === undefined ? 'the license names no signing key' : `the license is signed by key ${kid}, which is not a trusted license key`,
  );
}

function timestamp(value: unknown, field: string): Date | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !RFC3339.test(value) || Number.isNaN(Date.parse(value))) {
    throw new LicenseError('payload', `${field} is not an RFC 3339 timestamp`);
  }
  return new Date(value);
}
