/**
 * Every context a secret is sealed under (core/seal.ts: AES-256-GCM with the context as additional
 * data), in one place: a value sealed for one record and field never opens for another, so a row
 * copied onto another record, or one field's ciphertext moved into another's, does not open. A
 * context is never changed once values are sealed under it.
 */

/** A secret survey answer or carried secret sealed to one run, bound to the spec digest the run was created with. */
export const runSecretContext = (runId: string, stateDigest: string | null, name: string) => `run:${runId}:${stateDigest ?? ''}:${name}`;

/** A secret survey field's default on a template. */
export const templateSecretContext = (templateId: string, name: string) => `template:${templateId}:${name}`;

/** One secret field of a credential. */
export const credentialSecretContext = (credentialId: string, field: string) => `credential:${credentialId}:${field}`;

/** A webhook trigger's signing secret. */
export const signingSecretContext = (triggerId: string) => `trigger:${triggerId}:signing-secret`;

/** A review trigger's forge API token. */
export const forgeTokenContext = (triggerId: string) => `trigger:${triggerId}:forge-token`;

/** A template's host config key for provisioning callbacks. */
export const callbackKeyContext = (templateId: string) => `callback:${templateId}:host-config-key`;

/** A named notification target's `url` or `key`. */
export const targetSecretContext = (targetId: string, field: 'url' | 'key') => `notification:${targetId}:${field}`;

/** The `url` and `key` of a run's or template's own notification entries, sealed to their owner. */
export const entrySecretContext = (ownerId: string) => `notification-entry:${ownerId}`;

/** The install's Ed25519 audit signing key. */
export const SIGNING_KEY_CONTEXT = 'install:signing-key';

/** The private half (a JWK) of one federation signing key, by its key id. */
export const federationKeyContext = (keyId: string) => `federation-key:${keyId}`;

/** A terraform or opentofu run's saved plan file, bound to the run and the plan's digest. */
export const runPlanContext = (runId: string, digest: string) => `run-plan:${runId}:${digest}`;
