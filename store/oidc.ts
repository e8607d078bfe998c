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
