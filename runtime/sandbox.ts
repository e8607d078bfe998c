import path from 'node:path';
import type { RunBoundsSettings } from './run-bounds';

/**
 * The sandbox a tool runs in (bubblewrap), described so it can cross to the launcher process.
 *
 * A run is untrusted code. Inside the sandbox it has its own user, mount, PID, IPC, UTS and
 * cgroup namespaces and, unless the operator chose otherwise, its own network namespace. It sees
 * the system's programs and libraries read-only (`readOnlyRoots`), a private /tmp, a minimal /dev,
 * a /proc of its own processes only, and its work dir: nothing of the data dir, the checkout, the
 * server's home, its /proc entries, its sockets or its environment. What it may use of memory,
 * processes, CPU and disk is bounded (runtime/run-bounds.ts).
 */
export type RunNetwork = 'isolated' | 'host' | 'none';

export interface SandboxSettings {
  /** Absolute path of the bwrap binary. */
  bwrap: string;
  /**
   * `isolated`: a network namespace of its own, reaching the outside through slirp4netns with the
   * host's loopback closed (so no service on 127.0.0.1: PostgreSQL, the Temporal frontend, the
   * API). `host`: the host's network, loopback included. `none`: loopback only.
   */
  network: RunNetwork;
  /** Absolute path of slirp4netns, for the isolated network. */
  slirp4netns?: string;
  /** The unprivileged account tools run as when the server runs as root. */
  user?: { name: string; uid: number; gid: number };
  /** Host directories bound read-only at the same place (programs, libraries, configuration). */
  readOnlyRoots: string[];
  /** Top-level links such as /bin -> usr/bin on a merged-/usr system: [target, link]. */
  symlinks: [string, string][];
  /** A resolver configuration written for the sandbox, and where the sandbox reads it. */
  resolvConf?: { source: string; target: string };
  /** What one start may use (--run-memory, --run-pids, --run-disk, --run-cpu) and how that holds. */
  bounds: RunBoundsSettings;
}

/** Where the isolated network's resolver (slirp4netns's built-in DNS forwarder) answers. */
export const ISOLATED_NAMESERVER = '10.0.2.3';

/**
 * File descriptors bwrap reports its sandbox's pid on, and waits on before starting the tool: the
 * sandbox is put in its cgroup (and its isolated network wired up) meanwhile.
 */
export const INFO_FD = 3;
export const BLOCK_FD = 4;

/** The bwrap arguments that start `argv` in the sandbox with `workDir` as its only writable place. */
/**
 * A host path shown inside the sandbox at the same place: read-only unless `writable`. A job on a
 * project's repository binds it (runtime/git.ts); a run binds nothing beyond its work dir.
 */
export interface SandboxBind {
  path: string;
  writable?: boolean;
}

/** The bwrap arguments that start `argv` in the sandbox with `workDir` (and writable `binds`) as its only writable places. */
export function sandboxArgs(settings: SandboxSettings, workDir: string, argv: string[], binds: SandboxBind[] = []): string[] {
  const args = ['--unshare-user', '--unshare-ipc', '--unshare-pid', '--unshare-uts', '--unshare-cgroup-try'];
  if (settings.network !== 'host') args.push('--unshare-net');
  args.push('--die-with-parent', '--hostname', 'cairn-run', '--info-fd', String(INFO_FD), '--block-fd', String(BLOCK_FD));
  for (const root of settings.readOnlyRoots) args.push('--ro-bind', root, root);
  for (const [target, link] of settings.symlinks) args.push('--symlink', target, link);
  if (settings.resolvConf) args.push('--ro-bind', settings.resolvConf.source, settings.resolvConf.target);
  // The private /tmp is memory, held to the disk bound (the watcher counts it with the work dir).
  args.push('--proc', '/proc', '--dev', '/dev', '--size', String(settings.bounds.diskBytes), '--tmpfs', '/tmp');
  for (const dir of holdingDirs(settings, workDir)) args.push('--perms', '0111', '--dir', dir);
  for (const bind of binds) args.push(bind.writable ? '--bind' : '--ro-bind', bind.path, bind.path);
  args.push('--bind', workDir, workDir, '--chdir', workDir);
  // sh joins stdout and stderr into one pipe, so the log keeps the order the tool wrote in.
  args.push('--', '/bin/sh', '-c', 'exec "$@" 2>&1', 'sh', ...argv);
  return args;
}

/**
 * The directories the sandbox makes above the work dir only to hold it (`<data dir>/runs` and
 * up): passable, not listable, so a run sees no more of the host's layout than its own path.
 * Directories the sandbox shows from the host (under a read-only root) keep their own modes.
 */
function holdingDirs(settings: SandboxSettings, workDir: string): string[] {
  const shown = ['/proc', '/dev', ...settings.readOnlyRoots, ...settings.symlinks.map(([, link]) => link)];
  const dirs: string[] = [];
  for (let dir = path.dirname(workDir); dir !== '/' && dir !== '/tmp'; dir = path.dirname(dir)) {
    if (shown.some((root) => dir === root || dir.startsWith(`${root}/`))) break;
    dirs.unshift(dir);
  }
  return dirs;
}

/** The directories a sandboxed tool finds programs in: the standard ones, then the server's own that the sandbox can see. */
export function sandboxPath(settings: SandboxSettings, serverPath: string): string {
  const standard = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
  const visible = (dir: string) => settings.readOnlyRoots.some((root) => dir === root || dir.startsWith(`${root}/`));
  const extra = serverPath.split(':').filter((dir) => dir.startsWith('/') && visible(dir) && !standard.includes(dir));
  return [...standard, ...extra].join(':');
}
