import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);
/** The account tools live in the system directories, whatever the server's own PATH holds. */
const SYSTEM_PATH = { env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } };

export interface SystemAccount {
  name: string;
  uid: number;
  gid: number;
}

export class SystemAccountError extends Error {}

/** The lock every Cairn process takes to create a system account (flock(1), util-linux). */
const ACCOUNTS_LOCK = '/run/lock/cairn-accounts.lock';

/** True when this process runs as root, and so may act as other accounts. */
export const runningAsRoot = (): boolean => process.getuid?.() === 0;

/**
 * A system account by name, created when missing (a system account with its own group, no home
 * and no login shell). Only root can create one; the caller checks that first.
 */
export async function systemAccount(name: string, log: (line: string) => void): Promise<SystemAccount> {
  const ids = async (): Promise<SystemAccount> => {
    const [{ stdout: uid }, { stdout: gid }] = await Promise.all([execFileAsync('id', ['-u', name], SYSTEM_PATH), execFileAsync('id', ['-g', name], SYSTEM_PATH)]);
    return { name, uid: Number(uid.trim()), gid: Number(gid.trim()) };
  };
  try {
    return await ids();
  } catch {
    log(`creating the system account ${name}`);
  }
  // Several processes may start at once on a fresh machine (jest workers, a server and its
  // workers), and useradd run side by side can write one name twice with two ids: take a
  // machine-wide lock, and create the account under it only if it is still missing.
  try {
    await execFileAsync(
      'flock',
      [ACCOUNTS_LOCK, 'sh', '-c', 'id -u "$1" >/dev/null 2>&1 || exec useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$1"', 'sh', name],
      SYSTEM_PATH,
    );
  } catch (err) {
    throw new SystemAccountError(`could not create the system account ${name}: ${(err as Error).message.split('\n')[0]}`);
  }
  return ids();
}

/** Whether the account can pass into the directory: it and every directory above it must let it through. */
export function accountCanEnter(account: SystemAccount, dir: string): boolean {
  const result = spawnSync('/bin/sh', ['-c', 'cd "$1"', 'sh', dir], {
    uid: account.uid,
    gid: account.gid,
    stdio: 'ignore',
    env: { PATH: '/usr/bin:/bin' },
  });
  return result.status === 0;
}

/** Where a root server keeps what a system account must reach when the data dir is out of its reach. */
export const SYSTEM_HOME = '/var/lib/cairn';

/** The install's own directory of one kind under SYSTEM_HOME, named by a digest of its data dir (`/var/lib/cairn/runs/<digest>`). */
export function perInstallDir(kind: string, dataDir: string): string {
  const digest = createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 16);
  return path.join(SYSTEM_HOME, kind, digest);
}
