import { randomBytes } from 'node:crypto';
import { newId } from '../core/ids';
import { hashPassword } from '../core/secrets';
import { createAccount } from '../store/accounts';
import type { Sql } from '../store/db';
import { insertSettingOnce } from '../store/settings';
import { mintToken } from './accounts';
import { appendEntry, serviceOrigin } from './audit';

const BOOTSTRAP_LOCK = 7_201_772;

/**
 * First start only: creates the `admin` account and mints its token, returned to be printed once.
 * The settings row marks it done in the same transaction, so a later start (or a second server
 * starting at the same moment) never mints another.
 */
export async function bootstrapAdmin(sql: Sql): Promise<string | undefined> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${BOOTSTRAP_LOCK})`;
    if (!(await insertSettingOnce(tx, 'bootstrap', { at: new Date().toISOString() }))) return undefined;
    const account = await createAccount(tx, {
      id: newId('usr'),
      username: 'admin',
      role: 'admin',
      // A random password nobody knows: the admin signs in with the token, and may set one later.
      password_hash: await hashPassword(randomBytes(24).toString('base64url')),
      profile: {},
    });
    const { token, secret } = await mintToken(tx, account, {
      name: 'first-start admin token',
      kind: 'user',
      minter: { name: 'cairn', type: 'system' },
    });
    await appendEntry(tx, serviceOrigin('START', 'cairn serve'), 'created', {
      id: newId('aud'),
      body: { kind: 'install.bootstrapped', account_id: account.id, token_id: token.id },
      run_id: null,
    });
    return secret;
  });
}
