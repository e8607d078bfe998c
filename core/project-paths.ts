import path from 'node:path';
import { holdsControlCharacters } from './notifications/http-url';

/**
 * Pure rules for git projects (spec part A 4.5): which repository addresses Cairn hands to `git`,
 * and which paths inside a checkout a browse may name. The file system is asked (realpath) by
 * services/projects.ts; the rules it applies are these.
 */

/**
 * Where a repository address leads: a remote host git reaches over https or ssh (`ssh://` or the
 * scp-like `user@host:path`), or a path on the server's own disk (an absolute path or `file://`),
 * which only an install that names local roots accepts (services/projects.ts).
 */
export type RepositoryTarget =
  | { kind: 'remote'; scheme: 'https' | 'ssh'; host: string; port: number }
  | { kind: 'local'; path: string };

/** The repository address read, or why it is refused; a fault reads after "the repository address ". */
export function repositoryTarget(url: string): RepositoryTarget | { fault: string } {
  if (url.length === 0) return { fault: 'must not be empty' };
  if (holdsControlCharacters(url)) return { fault: 'must not hold control characters' };
  // An address beginning with `-` would be read by git as an option (`--upload-pack=...`).
  if (url.startsWith('-')) return { fault: 'must not begin with "-"' };
  // The `ext::` transport runs a command; `fd::` reads a descriptor. Neither is a repository.
  if (/^[a-z][a-z0-9+.-]*::/i.test(url)) return { fault: 'must not name a git remote helper (such as ext::)' };
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme !== undefined) {
    // Plain http:// and git:// are refused: nothing would show the checkout was not tampered with on the way.
    if (!['https', 'ssh', 'file'].includes(scheme)) return { fault: `must use https:// or ssh://, not ${scheme}://` };
    // A password in the address would be shown by every read of the project and in git's errors.
    if (/^[a-z+.-]+:\/\/[^/@]*:[^/@]*@/i.test(url)) return { fault: 'must not carry a password (user:password@); a source-control credential is to hold it' };
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return { fault: 'is not a valid URL' };
    }
    if (scheme === 'file') {
      if (parsed.host !== '' && parsed.host !== 'localhost') return { fault: 'file:// must name a path on this server (file:///path)' };
      return localTarget(decodeURIComponent(parsed.pathname));
    }
    const host = parsed.hostname.replace(/^\[|\]$/g, '');
    if (host === '') return { fault: `${scheme}:// must name a host` };
    return { kind: 'remote', scheme: scheme as 'https' | 'ssh', host, port: Number(parsed.port || (scheme === 'https' ? 443 : 22)) };
  }
  // scp-like `user@host:path/repo.git`
  const scp = /^[A-Za-z0-9._~-]+@([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):(.+)$/.exec(url);
  if (scp) {
    if (scp[2].startsWith('-')) return { fault: 'must not have a path beginning with "-"' };
    return { kind: 'remote', scheme: 'ssh', host: scp[1].replace(/^\[|\]$/g, ''), port: 22 };
  }
  if (path.isAbsolute(url)) return localTarget(url);
  return { fault: 'must be an https:// or ssh:// address, or user@host:path' };
}

function localTarget(file: string): RepositoryTarget | { fault: string } {
  if (!path.isAbsolute(file) || file.includes('\u0000')) return { fault: 'must name an absolute path' };
  return { kind: 'local', path: path.normalize(file) };
}

/** Why a repository address is refused as text, before anything is resolved; undefined when it reads well. */
export function gitUrlFault(url: string): string | undefined {
  const target = repositoryTarget(url);
  return 'fault' in target ? target.fault : undefined;
}

/**
 * A browse path as asked for (`GET /v1/projects/{id}/file?path=`), checked before the file system
 * is asked: relative, no NUL, no `..` segment. Returns the normalized relative path ("" is the
 * checkout's root) or a fault. Symlinks are checked after (isWithin over real paths).
 */
export function browsePath(asked: string): { path: string } | { fault: string } {
  if (/[\u0000-\u001f\u007f]/.test(asked)) return { fault: 'must not hold NUL or other control characters' };
  if (asked.startsWith('/') || asked.startsWith('\\') || path.isAbsolute(asked)) return { fault: 'must be relative to the checkout, not absolute' };
  const segments = asked.split(/[\\/]+/).filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) return { fault: 'must not hold a ".." segment: paths stay within the checkout' };
  if (segments[0] === '.git') return { fault: "must not name the checkout's .git directory" };
  return { path: segments.join('/') };
}

/** Whether `candidate` is `root` or lies under it; both real (symlinks resolved) absolute paths. */
export function isWithin(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/** Where a project's checkout lives under the projects directory. */
export function checkoutDir(projectsDir: string, projectId: string): string {
  if (!/^prj_[a-z0-9]+$/.test(projectId)) throw new Error(`not a project id: ${JSON.stringify(projectId)}`);
  return path.join(projectsDir, projectId);
}

/** Why a repository cannot be fetched or read; its message is what a project's `last_error` or a run's error shows. */
export class GitError extends Error {}

/** Where a fetch goes: a remote at the address checked against the egress rule, or a local repository. */
export type FetchSource = { target: Extract<RepositoryTarget, { kind: 'remote' }>; address: string } | { target: Extract<RepositoryTarget, { kind: 'local' }> };

/**
 * The one message for a remote that could not be reached, whatever the reason (refused by the
 * egress rule, no answer, a refused connection, a failed TLS handshake): telling them apart would
 * let a caller map which ports answer where. The server log keeps the detail.
 */
export const UNREACHABLE = 'the repository could not be reached: its address is refused by the egress rule, or it did not answer as a git server';

/** A source-control credential to fetch with (the `scm` kind): its secrets reach git only as 0600 files of the job's dir. */
export interface GitCredential {
  username?: string;
  password?: string;
  sshKey?: string;
  sshKeyPassphrase?: string;
}

/** An entry of a project's tree. */
export interface TreeEntry {
  path: string;
  type: 'file' | 'dir' | 'symlink';
  size: number;
}

/** What a path in a project's tree names, links within the tree followed. */
export type TreeRead =
  | { kind: 'dir'; entries: TreeEntry[]; truncated: boolean }
  | { kind: 'file'; size: number; bytes?: Buffer }
  | { kind: 'missing' }
  | { kind: 'outside' }
  | { kind: 'unresolvable' };

