import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
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
    const local = await localAccount(name);
    if (local) return local;
    // An account from another source (LDAP, sssd): ask the system's resolver.
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

/**
 * The account as /etc/passwd lists it (where useradd puts a system account), read in process:
 * a server starts several sandboxes' worth of checks, and each child process forked from a large
 * server costs far more than reading one file.
 */
async function localAccount(name: string): Promise<SystemAccount | undefined> {
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of passwd.split('\n')) {
    const [entry, , uid, gid] = line.split(':');
    if (entry === name && /^\d+$/.test(uid ?? '') && /^\d+$/.test(gid ?? '')) return { name, uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}

/** Whether the mode bits of the directory and every one above it let the account search it (owner, group or other x). */
function modeBitsLetThrough(account: SystemAccount, dir: string): boolean {
  try {
    for (let at = path.resolve(dir); ; at = path.dirname(at)) {
      const { mode, uid, gid } = statSync(at);
      const bit = uid === account.uid ? 0o100 : gid === account.gid ? 0o010 : 0o001;
      if (!(mode & bit)) return false;
      if (at === path.dirname(at)) return true;
    }
  } catch {
    return false;
  }
}

/**
 * Whether the account can pass into the directory: it and every directory above it must let it
 * through. Mode bits that let it through answer at once; otherwise the account itself tries (an
 * access control list may still let it in), in a child process run as that account.
 */
export function accountCanEnter(account: SystemAccount, dir: string): boolean {
  if (modeBitsLetThrough(account, dir)) return true;
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
