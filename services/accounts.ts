import { newId } from '../core/ids';
import { newBearerSecret, hashBearerSecret } from '../core/secrets';
import type { Db } from '../store/db';
import type { Account } from '../store/accounts';
import { createToken, type Token, type TokenKind } from '../store/tokens';

/** Who minted a token: a person or agent through the API, or the server itself at first start. */
export interface Minter {
  name: string;
  type: 'user' | 'agent' | 'system';
}

/** Mints a token for an account; the secret exists only in the return value and is stored hashed. */
export async function mintToken(
  db: Db,
  account: Account,
  options: { name: string; kind: TokenKind; minter: Minter; expiresAt?: Date | null },
): Promise<{ token: Token; secret: string }> {
  const secret = newBearerSecret();
  const token = await createToken(db, {
    id: newId('tok'),
    account_id: account.id,
    name: options.name,
    kind: options.kind,
    secret_hash: hashBearerSecret(secret),
    created_by: options.minter.name,
    created_by_type: options.minter.type,
    expires_at: options.expiresAt ?? null,
  });
  return { token, secret };
}

export function tokenView(token: Token & { username?: string }) {
  return {
    id: token.id,
    name: token.name,
    kind: token.kind,
    username: token.username,
    created_by: token.created_by,
    created_by_type: token.created_by_type,
    created_at: token.created_at.toISOString(),
    expires_at: token.expires_at?.toISOString() ?? null,
    last_used_at: token.last_used_at?.toISOString() ?? null,
  };
}

export function userView(account: Account) {
  return {
    id: account.id,
    username: account.username,
    role: account.role,
    profile: account.profile,
    created_at: account.created_at.toISOString(),
    updated_at: account.updated_at.toISOString(),
  };
}
