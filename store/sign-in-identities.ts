import type { SignInProtocol } from '../core/access/sign-in-mapping';
import type { Db } from './db';

/** A person at an identity provider and the account they sign in to (schema/029, schema/030). */
export interface SignInIdentity {
  protocol: SignInProtocol;
  /** The OpenID issuer, or the SAML identity provider's entity id. */
  issuer: string;
  /** The ID token's `sub`, or the assertion's NameID. */
  subject: string;
  account_id: string;
}

type IdentityKey = Pick<SignInIdentity, 'protocol' | 'issuer' | 'subject'>;

/** The account this person signs in to, locked until the transaction ends. */
export async function getIdentityForUpdate(db: Db, key: IdentityKey): Promise<SignInIdentity | undefined> {
  const [row] = await db<SignInIdentity[]>`
    SELECT protocol, issuer, subject, account_id FROM sign_in_identities
    WHERE protocol = ${key.protocol} AND issuer = ${key.issuer} AND subject = ${key.subject} FOR UPDATE`;
  return row;
}

/** Links the person to their new account; a second link of the same person is a unique violation. */
export async function insertIdentity(db: Db, identity: SignInIdentity): Promise<void> {
  await db`
    INSERT INTO sign_in_identities (protocol, issuer, subject, account_id)
    VALUES (${identity.protocol}, ${identity.issuer}, ${identity.subject}, ${identity.account_id})`;
}

export async function touchIdentity(db: Db, key: IdentityKey): Promise<void> {
  await db`UPDATE sign_in_identities SET last_sign_in_at = now() WHERE protocol = ${key.protocol} AND issuer = ${key.issuer} AND subject = ${key.subject}`;
}
