import { randomUUID } from 'node:crypto';
import type { OpenedCredential } from '../../core/credentials/credential-kinds';
import { identityTokenAudience, isFederatedKind } from '../../core/credentials/federated-kinds';
import type { Sealer } from '../../core/credentials/seal';
import { federationKeyContext } from '../../core/credentials/seal-contexts';
import { FEDERATION_ALGORITHM } from '../../core/federation/keys';
import { runTokenClaims, runTokenLifetimeSeconds, runTokenSubject } from '../../core/federation/run-token';
import { loadJose } from '../../core/jose';
import type { Run } from '../../core/runs/run';
import type { Db } from '../../store/db';
import { signingKeyRow } from '../../store/federation-keys';

/**
 * Run identity tokens (spec part B 5.4): each federated credential a run is given gets a JWT
 * signed with the current federation key, minted as the run's credentials are opened for its
 * execution (services/credentials.ts openRunCredentials). The token is a secret: it goes only into
 * the run's work dir and its output masker (core/credentials/credential-kinds.ts injectionOf).
 */

/** A run's federated credential cannot be given its token; the message names the fix, never a value. */
export class IdentityTokenError extends Error {
  override readonly name = 'IdentityTokenError';
}

/** The credentials with a token minted for each federated one; the others as they were. */
export async function withIdentityTokens(
  db: Db,
  sealer: Sealer | undefined,
  issuer: string | undefined,
  run: Run,
  credentials: OpenedCredential[],
): Promise<OpenedCredential[]> {
  const federated = credentials.filter((c) => isFederatedKind(c.kind));
  if (federated.length === 0) return credentials;
  const named = `credential ${federated[0].id} (${federated[0].kind})`;
  if (!issuer) throw new IdentityTokenError(`${named} needs an identity token, and this server issues none: start it with --federation-issuer <its public URL>`);
  if (!sealer) throw new IdentityTokenError(`${named} needs an identity token, signed with a key sealed under the install key: set SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT`);
  const key = await signingKeyRow(db);
  if (!key) throw new IdentityTokenError(`${named} needs an identity token, and no federation key signs yet: start cairn serve with --federation-issuer`);
  const jose = await loadJose();
  let privateKey: Awaited<ReturnType<typeof jose.importJWK>>;
  try {
    privateKey = await jose.importJWK(JSON.parse(sealer.open(key.private_jwk_sealed, federationKeyContext(key.id))), FEDERATION_ALGORITHM);
  } catch {
    throw new IdentityTokenError(`the federation signing key ${key.id} does not open under this server's SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT`);
  }
  const now = Math.floor(Date.now() / 1000);
  const lifetime = runTokenLifetimeSeconds(run.timeout_seconds);
  return Promise.all(
    credentials.map(async (credential) => {
      if (!isFederatedKind(credential.kind)) return credential;
      const token = await new jose.SignJWT(runTokenClaims(run, credential.id))
        .setProtectedHeader({ alg: FEDERATION_ALGORITHM, kid: key.id, typ: 'JWT' })
        .setIssuer(issuer)
        .setSubject(runTokenSubject(run, credential.values.subject))
        .setAudience(identityTokenAudience(credential))
        .setIssuedAt(now)
        .setNotBefore(now)
        .setExpirationTime(now + lifetime)
        .setJti(randomUUID())
        .sign(privateKey);
      return { ...credential, identityToken: token };
    }),
  );
}
