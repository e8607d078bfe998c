import { randomBytes } from 'node:crypto';
import { newId } from '../../core/ids';
import { hashPassword } from '../../core/credentials/secrets';
import { createAccount } from '../../store/accounts';
import type { Sql } from '../../store/db';
import { LOCKS, takeLock } from '../../store/locks';
import { insertSettingOnce } from '../../store/settings';
import { fillUsernameKeys, mintToken } from './accounts';
import { appendEntry, serviceOrigin } from '../audit/audit';

/**
 * The accounts' start-up work, before the server serves. Every start: accounts made before
 * usernames were folded get their username key. First start only: creates the `admin` account
 * and mints its token, returned to be printed once (none when the install starts open, --open). The settings row marks it done in the same
 * transaction, so a later start (or a second server starting at the same moment) never mints another.
 */
export async function bootstrapAdmin(sql: Sql, options: { open?: boolean } = {}): Promise<string | undefined> {
  await fillUsernameKeys(sql);
  return sql.begin(async (tx) => {
    await takeLock(tx, LOCKS.bootstrap);
    if (!(await insertSettingOnce(tx, 'bootstrap', { at: new Date().toISOString() }))) return undefined;
    const account = await createAccount(tx, {
      id: newId('usr'),
      username: 'admin',
      role: 'admin',
      // A random password nobody knows: the admin signs in with the token, and may set one later.
      password_hash: await hashPassword(randomBytes(24).toString('base64url')),
      profile: {},
    });
    if (options.open) {
      // An install started open mints no token: its token-less requests act as this admin.
      await appendEntry(tx, serviceOrigin('START', 'cairn serve'), 'created', {
        id: newId('aud'),
        body: { kind: 'install.bootstrapped', account_id: account.id, open: true },
        run_id: null,
      });
      return undefined;
    }
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
