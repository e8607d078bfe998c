import type { Db } from './db';

/** A sign-in under way (schema/028): what the callback checks and needs, found by the browser's cookie. */
export interface PendingSignIn {
  state: string;
  nonce: string;
  code_verifier: string;
  mode: 'console' | 'token';
  expires_at: Date;
}

/** Records a sign-in under way; sweeps those past their expiry on the way. */
export async function insertPendingSignIn(db: Db, bindingHash: Buffer, signIn: PendingSignIn): Promise<void> {
  await db`DELETE FROM oidc_sign_ins WHERE expires_at < now()`;
  await db`
    INSERT INTO oidc_sign_ins (binding_hash, state, nonce, code_verifier, mode, expires_at)
    VALUES (${bindingHash}, ${signIn.state}, ${signIn.nonce}, ${signIn.code_verifier}, ${signIn.mode}, ${signIn.expires_at})`;
}

/** Takes the sign-in this cookie started, deleting it in the same statement: a callback finishes it once. */
export async function takePendingSignIn(db: Db, bindingHash: Buffer): Promise<PendingSignIn | undefined> {
  const [row] = await db<PendingSignIn[]>`
    DELETE FROM oidc_sign_ins WHERE binding_hash = ${bindingHash}
    RETURNING state, nonce, code_verifier, mode, expires_at`;
  return row;
}

export interface OidcIdentity {
  issuer: string;
  subject: string;
  account_id: string;
}

/** The account this provider's subject signs in to, locked until the transaction ends. */
export async function getOidcIdentityForUpdate(db: Db, issuer: string, subject: string): Promise<OidcIdentity | undefined> {
  const [row] = await db<OidcIdentity[]>`
    SELECT issuer, subject, account_id FROM oidc_identities WHERE issuer = ${issuer} AND subject = ${subject} FOR UPDATE`;
  return row;
}

/** Links the subject to its new account; a second link of the same subject is a unique violation. */
export async function insertOidcIdentity(db: Db, identity: OidcIdentity): Promise<void> {
  await db`INSERT INTO oidc_identities (issuer, subject, account_id) VALUES (${identity.issuer}, ${identity.subject}, ${identity.account_id})`;
}

export async function touchOidcIdentity(db: Db, issuer: string, subject: string): Promise<void> {
  await db`UPDATE oidc_identities SET last_sign_in_at = now() WHERE issuer = ${issuer} AND subject = ${subject}`;
}
