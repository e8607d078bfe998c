import type { Db } from './db';

/** An AuthnRequest Cairn sent and awaits the answer to (schema/030). */
export interface SamlRequest {
  request_id: string;
  mode: 'console' | 'token';
  created_at: Date;
  expires_at: Date;
}

/** Records a request sent; sweeps those past their expiry on the way. */
export async function insertSamlRequest(db: Db, request: Pick<SamlRequest, 'request_id' | 'mode' | 'expires_at'>): Promise<void> {
  await db`DELETE FROM saml_requests WHERE expires_at < now()`;
  await db`INSERT INTO saml_requests (request_id, mode, expires_at) VALUES (${request.request_id}, ${request.mode}, ${request.expires_at})`;
}

/** The request, while it is unanswered and unexpired; it stays until taken. */
export async function getSamlRequest(db: Db, requestId: string): Promise<SamlRequest | undefined> {
  const [row] = await db<SamlRequest[]>`
    SELECT request_id, mode, created_at, expires_at FROM saml_requests WHERE request_id = ${requestId} AND expires_at > now()`;
  return row;
}

/** Takes the request, deleting it in the same statement: of two answers to it, one gets it. */
export async function takeSamlRequest(db: Db, requestId: string): Promise<SamlRequest | undefined> {
  const [row] = await db<SamlRequest[]>`
    DELETE FROM saml_requests WHERE request_id = ${requestId}
    RETURNING request_id, mode, created_at, expires_at`;
  return row && row.expires_at.getTime() > Date.now() ? row : undefined;
}

/**
 * Remembers an assertion as used until `expiresAt`; false when it was already used. Sweeps the
 * assertions past their expiry on the way, which could not be used again anyway.
 */
export async function rememberAssertion(db: Db, issuer: string, assertionId: string, expiresAt: Date): Promise<boolean> {
  await db`DELETE FROM saml_assertions WHERE expires_at < now()`;
  const rows = await db`
    INSERT INTO saml_assertions (issuer, assertion_id, expires_at) VALUES (${issuer}, ${assertionId}, ${expiresAt})
    ON CONFLICT DO NOTHING RETURNING assertion_id`;
  return rows.length === 1;
}
