import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { generateKeyPair, type JsonWebKey } from 'node:crypto';
import { promisify } from 'node:util';
import type { Sealer } from '../../core/credentials/seal';
import { federationKeyContext } from '../../core/credentials/seal-contexts';
import { conflict, DomainError } from '../../core/errors';
import {
  FEDERATION_ALGORITHM,
  FEDERATION_KEY_OVERLAP_SECONDS,
  federationKeyView,
  PUBLISHED_STATES,
  rotationUnderWay,
  type PublicJwk,
} from '../../core/federation/keys';
import { newId } from '../../core/ids';
import type { Db, Sql } from '../../store/db';
import { activateKey, insertFederationKey, listFederationKeys, removeKeys, retireKey } from '../../store/federation-keys';
import { LOCKS, takeLock } from '../../store/locks';
import { oweEffects } from '../../store/outbox';
import { KEY_ROTATION_WORKFLOW, keyRotationWorkflowId, type KeyRotationWorkflowInput } from '../../workflows/definitions';
import { scheduleTaskQueue } from '../../workflows/ids';
import { recordMutation, serviceOrigin, unchanged, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { carryOut } from '../effects';

/**
 * The federation signing keys (spec part A 2.14, 3.4, 4.10; core/federation/keys.ts for the
 * states): the first key, the published key set, normal and emergency rotation. Private halves are
 * sealed under the install key and never leave this module and run-tokens.ts; every change is one
 * transaction under the federation lock, with its audit entry.
 */

const generateRsa = promisify(generateKeyPair);

/** The install key is required: a signing key is never stored in clear. */
export function federationSealerFault(sealer: Sealer | undefined): string | undefined {
  return sealer ? undefined : '--federation-issuer needs the install key (SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT): federation signing keys are sealed under it';
}

interface NewKey {
  id: string;
  public_jwk: PublicJwk;
  private_jwk_sealed: string;
}

/** A fresh RSA 2048 key pair, its private half sealed to its id. Made outside any transaction: it takes a moment. */
async function newKey(sealer: Sealer): Promise<NewKey> {
  const id = newId('fkey');
  const { publicKey, privateKey } = await generateRsa('rsa', { modulusLength: 2048, publicExponent: 0x10001 });
  const pub = publicKey.export({ format: 'jwk' }) as JsonWebKey;
  const priv = privateKey.export({ format: 'jwk' }) as JsonWebKey;
  const jwkExtras = { kid: id, alg: FEDERATION_ALGORITHM, use: 'sig' } as const;
  return {
    id,
    public_jwk: { kty: 'RSA', n: pub.n!, e: pub.e!, ...jwkExtras },
    private_jwk_sealed: sealer.seal(JSON.stringify({ ...priv, ...jwkExtras }), federationKeyContext(id)),
  };
}

/**
 * At the start of a server with --federation-issuer: makes the first signing key when none signs
 * (a fresh install, or every key removed). Servers starting at once make one between them.
 */
export async function ensureSigningKey(sql: Sql, sealer: Sealer): Promise<void> {
  const current = await listFederationKeys(sql, ['signing']);
  if (current.length > 0) return;
  const key = await newKey(sealer);
  await recordMutation(sql, serviceOrigin('FEDERATION', '/federation/keys'), 'successful', async (tx, entry) => {
    await takeLock(tx, LOCKS.federationKeys);
    if ((await listFederationKeys(tx, ['signing'])).length > 0) return unchanged(undefined);
    await insertFederationKey(tx, { ...key, state: 'signing', at: new Date() });
    entry.body = { kind: 'federation.key_created', key_id: key.id };
  });
}

/** The published key set (`/.well-known/jwks.json`): public halves of the keys waiting to sign, signing, and retired within the overlap. */
export async function publishedKeySet(db: Db): Promise<{ keys: PublicJwk[] }> {
  return { keys: (await listFederationKeys(db, PUBLISHED_STATES)).map((k) => k.public_jwk) };
}

export async function listKeyViews(db: Db) {
  return (await listFederationKeys(db)).map(federationKeyView);
}

/** Every federation route and action answers this 404 while --federation-issuer is unset (spec part A 1.1 rule 4). */
export const federationNotConfigured = () => new DomainError('not_found', 'federation is not configured: --federation-issuer is not set');

/**
 * A normal rotation (`POST /v1/federation/keys/rotate`): a new key published now, its workflow
 * owed in the same transaction. 409 while a rotation is under way.
 */
export async function rotateKeys(ctx: ServerContext, origin: AuditOrigin) {
  if (!ctx.config.federationIssuer) throw federationNotConfigured();
  const key = await newKey(ctx.sealer!);
  const { input, effects } = await recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    await takeLock(tx, LOCKS.federationKeys);
    const keys = await listFederationKeys(tx);
    if (rotationUnderWay(keys)) {
      throw conflict('a key rotation is under way: a new key is waiting to sign or a retired key is still published; see GET /v1/federation/keys', {
        keys: keys.filter((k) => k.state === 'next' || k.state === 'retired').map(federationKeyView),
      });
    }
    const signing = keys.find((k) => k.state === 'signing');
    if (!signing) throw conflict('no federation key is signing; restart the server with --federation-issuer to make one');
    const publishedAt = new Date();
    await insertFederationKey(tx, { ...key, state: 'next', at: publishedAt });
    entry.body = { kind: 'federation.rotate', mode: 'normal', key_id: key.id, old_key_id: signing.id };
    const input: KeyRotationWorkflowInput = { newKeyId: key.id, oldKeyId: signing.id, publishedAt: publishedAt.getTime(), overlapSeconds: FEDERATION_KEY_OVERLAP_SECONDS };
    return { input, effects: await oweEffects(tx, [{ effect: 'federation.rotate', subject: key.id, payload: input }], true) };
  });
  await carryOut(ctx, effects, 'starting the key rotation', () => startKeyRotationWorkflow(ctx, input));
  return listKeyViews(ctx.sql);
}

/** Starts a normal rotation's workflow; safe to repeat (the workflow id is the new key's). */
export async function startKeyRotationWorkflow(ctx: Pick<ServerContext, 'temporal' | 'config'>, input: KeyRotationWorkflowInput): Promise<void> {
  try {
    await ctx.temporal.workflow.start<(input: KeyRotationWorkflowInput) => Promise<void>>(KEY_ROTATION_WORKFLOW, {
      workflowId: keyRotationWorkflowId(input.newKeyId),
      taskQueue: scheduleTaskQueue(ctx.config.poolQueue),
      args: [input],
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/**
 * An emergency rotation (`POST /v1/federation/keys/rotate/emergency`): a new key signs at once and
 * every other key leaves the key set with its private half erased, so no token they signed
 * verifies once a relying party reads the key set again. A normal rotation under way is ended with
 * it (its workflow's later steps find nothing to do).
 */
export async function rotateKeysInEmergency(ctx: ServerContext, origin: AuditOrigin) {
  if (!ctx.config.federationIssuer) throw federationNotConfigured();
  const key = await newKey(ctx.sealer!);
  await recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    await takeLock(tx, LOCKS.federationKeys);
    const at = new Date();
    const removed = await removeKeys(tx, at, { except: key.id });
    await insertFederationKey(tx, { ...key, state: 'signing', at });
    entry.body = { kind: 'federation.rotate', mode: 'emergency', key_id: key.id, removed_key_ids: removed };
  });
  return listKeyViews(ctx.sql);
}

/** A rotation's first step (activities/federation.ts): the new key signs and the old one retires, unless an emergency came first. */
export async function activateRotatedKey(sql: Sql, newKeyId: string, oldKeyId: string, at: Date): Promise<void> {
  await recordMutation(sql, serviceOrigin('FEDERATION', `/federation/keys/${newKeyId}/activate`), 'successful', async (tx, entry) => {
    await takeLock(tx, LOCKS.federationKeys);
    const [waiting] = (await listFederationKeys(tx, ['next'])).filter((k) => k.id === newKeyId);
    if (!waiting) return unchanged(undefined);
    // The old key first: one key signs at a time (schema/031_federation.sql).
    await retireKey(tx, oldKeyId, at);
    await activateKey(tx, newKeyId, at);
    entry.body = { kind: 'federation.key_activated', key_id: newKeyId, retired_key_id: oldKeyId };
  });
}

/** A rotation's last step: the retired key leaves the key set, its private half erased. */
export async function removeRetiredKey(sql: Sql, oldKeyId: string, at: Date): Promise<void> {
  await recordMutation(sql, serviceOrigin('FEDERATION', `/federation/keys/${oldKeyId}/remove`), 'successful', async (tx, entry) => {
    await takeLock(tx, LOCKS.federationKeys);
    const removed = await removeKeys(tx, at, { ids: [oldKeyId], from: ['retired'] });
    if (removed.length === 0) return unchanged(undefined);
    entry.body = { kind: 'federation.key_removed', key_id: oldKeyId };
  });
}
