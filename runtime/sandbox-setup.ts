import { promises as fs, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../core/config';
import { formatByteSize } from '../core/byte-size';
import { accountCanEnter, perInstallDir, runningAsRoot, systemAccount, SystemAccountError, type SystemAccount } from '../embedded/system-accounts';
import { spawnTool } from './process';
import { boundingCgroups, runCgroups, type RunBoundsSettings } from './run-bounds';
import { enforcementOf, type ExecutionFacts } from '../core/runs/run-bound-settings';
import { ansibleCoreVersion } from './inventory-jobs';
import { ISOLATED_NAMESERVER, sandboxPath, type RunNetwork, type SandboxSettings } from './sandbox';
import type { JobSandbox } from './sandboxed-job';
import { configureToolSearchPath } from '../tools/registry';

/** The settings that shape the sandbox and where runs work (--run-isolation, --run-network, --run-user, the run bounds, --data-dir). */
export interface RunIsolationSettings {
  runIsolation: 'sandbox' | 'none';
  runNetwork: RunNetwork;
  runUser: string;
  runMemory: number;
  runPids: number;
  runDisk: number;
  runCpu: number;
  dataDir: string;
  /** --iac-provider-mirror: where terraform and opentofu runs install providers from (default <data dir>/iac/providers). */
  iacProviderMirror?: string;
  /** --iac-provider-downloads: providers may also come from their registries. */
  iacProviderDownloads?: boolean;
  /** --module-fetch-timeout, seconds: how long a plan's module fetch may take. */
  moduleFetchTimeout?: number;
}

/** A worker's sandbox (undefined with --run-isolation none) and the root its runs' work dirs are made under. */
export interface PreparedSandbox {
  sandbox: SandboxSettings | undefined;
  workRoot: string;
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
 * A directory of the install the run account must be able to pass into (when the server is root,
 * bubblewrap runs as that account and binds paths inside it): `<data dir>/<name>`, so the data dir
 * is made 0711 (passable, not listable); when the account still cannot enter it (a data dir inside
 * a private home), a directory of the install's own under /var/lib/cairn/<name>. Made 0711 itself:
 * what is made in it is 0700. `runs` holds runs' work dirs, `projects` the project cache.
 */
export async function runAccountDir(settings: RunIsolationSettings, name: 'runs' | 'projects' | 'iac', log: (line: string) => void): Promise<string> {
  let dir = path.join(path.resolve(settings.dataDir), name);
  await fs.mkdir(settings.dataDir, { recursive: true, mode: 0o700 });
  if (runningAsRoot() && settings.runIsolation === 'sandbox') {
    const account = await runAccount(settings.runUser, log);
    if (!accountCanEnter(account, settings.dataDir)) {
      await fs.chmod(settings.dataDir, 0o711);
      if (!accountCanEnter(account, settings.dataDir)) {
        dir = perInstallDir(name, settings.dataDir);
        log(`the ${account.name} account cannot enter ${settings.dataDir}; the ${name} directory is ${dir}`);
      }
    }
  }
  await fs.mkdir(dir, { recursive: true, mode: 0o711 });
  await fs.chmod(dir, 0o711);
  return dir;
}

/** The run bounds a sandbox holds, and the cgroups (or rlimits) that hold them on this machine, said once in the log. */
async function runBounds(settings: RunIsolationSettings, prlimit: string, log: (line: string) => void): Promise<RunBoundsSettings> {
  const cgroups = await runCgroups();
  const bounds: RunBoundsSettings = {
    memoryBytes: settings.runMemory,
    pids: settings.runPids,
    diskBytes: settings.runDisk,
    cpu: settings.runCpu,
    cgroups: 'plan' in cgroups ? cgroups.plan : undefined,
    prlimit,
  };
  const by = enforcementOf(boundingCgroups(bounds.cgroups));
  log(
    `runs are bounded to memory ${formatByteSize(bounds.memoryBytes)} (${by.memory}), ${bounds.pids} processes (${by.process}), ` +
      `${bounds.cpu} ${bounds.cpu === 1 ? 'core' : 'cores'} (${by.cpu}) and disk ${formatByteSize(bounds.diskBytes)} (${by.disk})` +
      ('reason' in cgroups ? `; no cgroup could be made: ${cgroups.reason}` : ''),
  );
  return bounds;
}

/**
 * Everything a worker needs to run tools in a sandbox, checked once at start: bubblewrap (and
 * slirp4netns for the isolated network) and prlimit installed, the run account present when the
 * server is root, the run bounds' cgroups, and a real sandbox started and ended. A machine that
 * cannot sandbox refuses to start with one line naming the fix, rather than run tools unsandboxed
 * by surprise.
 */
export async function prepareSandbox(settings: RunIsolationSettings, log: (line: string) => void): Promise<PreparedSandbox> {
  const workRoot = await runAccountDir(settings, 'runs', log);
  if (settings.runIsolation === 'none') {
    configureToolSearchPath(process.env.PATH ?? '');
    log('run isolation is off (--run-isolation none): tools run as the server\'s own user and can read its files and reach its database; the run bounds do not hold');
    return { sandbox: undefined, workRoot };
  }
  const bwrap = await onPath('bwrap');
  if (!bwrap) throw new ConfigError(`tools run in a bubblewrap sandbox, and bwrap is not installed: ${FIX}`);
  const prlimit = await onPath('prlimit');
  if (!prlimit) throw new ConfigError('a sandbox starts with its run bounds set by prlimit, which is not installed: install util-linux');
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
    bounds: await runBounds(settings, prlimit, log),
  };
  configureToolSearchPath(sandboxPath(sandbox, process.env.PATH ?? ''));
  await probe(sandbox, workRoot);
  return { sandbox, workRoot };
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
 * Where this process runs tools and Cairn's own sandboxed jobs (runtime/sandboxed-job.ts) for
 * these settings: the sandbox prepared and checked once, on first use, the work root and the
 * project cache.
 */
export function jobSandbox(settings: RunIsolationSettings, log: (line: string) => void): Promise<JobSandbox> {
  const key = JSON.stringify([settings.runIsolation, settings.runNetwork, settings.runUser, settings.runMemory, settings.runPids, settings.runDisk, settings.runCpu, settings.dataDir]);
  let prepared = jobSandboxes.get(key);
  if (!prepared) {
    prepared = prepareSandbox(settings, log).then(async ({ sandbox, workRoot }) => ({
      sandbox,
      workRoot,
      projectsDir: await runAccountDir(settings, 'projects', log),
      iacDir: await runAccountDir(settings, 'iac', log),
      iacProviderMirror: settings.iacProviderMirror,
      iacProviderDownloads: settings.iacProviderDownloads ?? false,
      moduleFetchTimeout: settings.moduleFetchTimeout,
    }));
    prepared.catch(() => jobSandboxes.delete(key));
    jobSandboxes.set(key, prepared);
  }
  return prepared;
}

/** What this process's execution side found at start, for the diagnostics check (core/run-bound-settings.ts ExecutionFacts). */
export async function executionFacts(settings: RunIsolationSettings, log: (line: string) => void): Promise<ExecutionFacts> {
  const [site, ansibleCore, found] = await Promise.all([jobSandbox(settings, log), ansibleCoreVersion(), settings.runIsolation === 'sandbox' ? runCgroups() : undefined]);
  return {
    sandboxed: site.sandbox !== undefined,
    cgroups: boundingCgroups(site.sandbox?.bounds.cgroups),
    ...(found && 'reason' in found ? { cgroupsReason: found.reason } : {}),
    ansibleCore,
  };
}
