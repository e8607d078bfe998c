import { createHash } from 'node:crypto';
import { promises as fs, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../core/config';
import { accountCanEnter, runningAsRoot, systemAccount, SystemAccountError, type SystemAccount } from '../embedded/system-accounts';
import { spawnTool } from '../activities/process';
import { ISOLATED_NAMESERVER, sandboxPath, type RunNetwork, type SandboxSettings } from '../activities/sandbox';
import type { JobSandbox } from '../activities/sandboxed-job';
import { configureToolSearchPath } from '../tools/registry';

export interface RunIsolationSettings {
  runIsolation: 'sandbox' | 'none';
  runNetwork: RunNetwork;
  runUser: string;
}

/** Host directories a tool sees read-only: programs, libraries and system configuration. */
const SYSTEM_ROOTS = ['/usr', '/etc', '/opt'];
/** Top-level entries that are links into /usr on a merged-/usr system, or directories elsewhere. */
const TOP_LEVEL = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

const FIX =
  'install Debian\'s bubblewrap and slirp4netns packages (`npm install` does it when run as root), or start with ' +
  '--run-isolation none to run tools unsandboxed as the server\'s own user (they can then read its files and reach its database)';

async function onPath(name: string): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? '').split(':').concat(['/usr/bin', '/usr/sbin', '/bin'])) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      await fs.access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

/** The unprivileged account tools run as, created when missing. */
async function runAccount(name: string, log: (line: string) => void): Promise<SystemAccount> {
  try {
    return await systemAccount(name, log);
  } catch (err) {
    if (err instanceof SystemAccountError) throw new ConfigError(`${err.message}; create it, or name another with --run-user`);
    throw err;
  }
}

/** Where a sandbox finds the host's resolver: /etc/resolv.conf, or the file it links to. */
async function resolverTarget(): Promise<string> {
  const file = '/etc/resolv.conf';
  try {
    const link = await fs.readlink(file);
    return path.resolve(path.dirname(file), link);
  } catch {
    return file;
  }
}

/** The resolver configuration a sandbox reads: the isolated network's forwarder, or a copy of the host's. */
async function resolverFile(network: RunNetwork, workRoot: string): Promise<SandboxSettings['resolvConf']> {
  if (network === 'none') return undefined;
  const content =
    network === 'isolated'
      ? `nameserver ${ISOLATED_NAMESERVER}\n`
      : await fs.readFile('/etc/resolv.conf', 'utf8').catch(() => '');
  const source = path.join(workRoot, `resolv.${network}.conf`);
  await fs.writeFile(source, content, { mode: 0o644 });
  return { source, target: await resolverTarget() };
}

/**
 * Everything a worker needs to run tools in a sandbox, checked once at start: bubblewrap (and
 * slirp4netns for the isolated network) installed, the run account present when the server is
 * root, and a real sandbox started and ended. A machine that cannot sandbox refuses to start with
 * one line naming the fix, rather than run tools unsandboxed by surprise.
 */
export async function prepareSandbox(
  settings: RunIsolationSettings,
  workRoot: string,
  log: (line: string) => void,
): Promise<SandboxSettings | undefined> {
  await fs.mkdir(workRoot, { recursive: true, mode: 0o711 });
  await fs.chmod(workRoot, 0o711);
  if (settings.runIsolation === 'none') {
    configureToolSearchPath(process.env.PATH ?? '');
    log('run isolation is off (--run-isolation none): tools run as the server\'s own user and can read its files and reach its database');
    return undefined;
  }
  const bwrap = await onPath('bwrap');
  if (!bwrap) throw new ConfigError(`tools run in a bubblewrap sandbox, and bwrap is not installed: ${FIX}`);
  const slirp4netns = settings.runNetwork === 'isolated' ? await onPath('slirp4netns') : undefined;
  if (settings.runNetwork === 'isolated' && !slirp4netns) {
    throw new ConfigError(`a run's isolated network (--run-network isolated) needs slirp4netns, which is not installed: ${FIX}`);
  }
  const root = runningAsRoot();
  const readOnlyRoots: string[] = [];
  const symlinks: [string, string][] = [];
  for (const dir of [...SYSTEM_ROOTS, ...TOP_LEVEL]) {
    const stat = await fs.lstat(dir).catch(() => undefined);
    if (stat?.isSymbolicLink()) symlinks.push([await fs.readlink(dir), dir]);
    else if (stat?.isDirectory()) readOnlyRoots.push(dir);
  }
  const sandbox: SandboxSettings = {
    bwrap,
    network: settings.runNetwork,
    slirp4netns,
    user: root ? await runAccount(settings.runUser, log) : undefined,
    readOnlyRoots,
    symlinks,
    resolvConf: await resolverFile(settings.runNetwork, workRoot),
  };
  configureToolSearchPath(sandboxPath(sandbox, process.env.PATH ?? ''));
  await probe(sandbox, workRoot);
  return sandbox;
}

/** Starts and ends one real sandbox, so a machine that cannot run one says so at start. */
async function probe(sandbox: SandboxSettings, workRoot: string): Promise<void> {
  const dir = await fs.mkdtemp(path.join(workRoot, 'probe-'));
  let output = '';
  try {
    if (sandbox.user) await fs.chown(dir, sandbox.user.uid, sandbox.user.gid);
    const tool = await spawnTool(['/bin/sh', '-c', 'exit 0'], {
      cwd: dir,
      env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
      sandbox,
      onOutput: (chunk) => (output += chunk.toString()),
    });
    const exit = await tool.exited;
    if (exit.exitCode !== 0) throw new Error(output.trim().split('\n').pop() || `exit ${exit.exitCode ?? exit.signal}`);
  } catch (err) {
    throw new ConfigError(
      `the run sandbox does not work on this machine (${(err as Error).message}); it needs user namespaces ` +
        `(kernel.unprivileged_userns_clone=1, and no AppArmor or container policy refusing them). Otherwise ${FIX}`,
    );
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

const jobSandboxes = new Map<string, Promise<JobSandbox>>();

/**
 * Where this process runs tools and Cairn's own sandboxed jobs (activities/sandboxed-job.ts) for
 * these settings: the sandbox prepared and checked once, on first use, and the project cache.
 */
export function jobSandbox(settings: RunIsolationSettings & { dataDir: string }, workRoot: string, log: (line: string) => void): Promise<JobSandbox> {
  const key = JSON.stringify([settings.runIsolation, settings.runNetwork, settings.runUser, settings.dataDir, workRoot]);
  let prepared = jobSandboxes.get(key);
  if (!prepared) {
    prepared = prepareSandbox(settings, workRoot, log).then(async (sandbox) => ({ sandbox, workRoot, projectsDir: await runAccountDir(settings.dataDir, 'projects', sandbox?.user) }));
    prepared.catch(() => jobSandboxes.delete(key));
    jobSandboxes.set(key, prepared);
  }
  return prepared;
}

/** Where a directory the run account must enter lives when the data dir is out of its reach (a data dir in a private home). */
const SYSTEM_HOME = '/var/lib/cairn';

/**
 * A directory of the install the run account must be able to enter (bubblewrap, running as that
 * account, binds paths inside it): `<data dir>/<name>`, with the data dir made passable (0711: it
 * may list nothing there), or, when the data dir is out of the account's reach all the same,
 * `/var/lib/cairn/<name>/<digest of the data dir>`. Without a run account (the server is not root)
 * it is `<data dir>/<name>`.
 */
export async function runAccountDir(dataDir: string, name: string, user: SandboxSettings['user']): Promise<string> {
  const inDataDir = path.join(path.resolve(dataDir), name);
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (!user) {
    await fs.mkdir(inDataDir, { recursive: true, mode: 0o700 });
    return inDataDir;
  }
  await fs.chmod(dataDir, 0o711);
  const dir = accountCanEnter(user, dataDir) ? inDataDir : path.join(SYSTEM_HOME, name, createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 16));
  await fs.mkdir(dir, { recursive: true, mode: 0o711 });
  await fs.chmod(dir, 0o711);
  return dir;
}
