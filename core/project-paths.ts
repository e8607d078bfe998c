import path from 'node:path';
import { holdsControlCharacters } from './http-url';

/**
 * Pure rules for git projects (spec part A 4.5): which repository addresses Cairn hands to `git`,
 * and which paths inside a checkout a browse may name. The file system is asked (realpath) by
 * services/projects.ts; the rules it applies are these.
 */

/** Why a repository address is refused; undefined when it is one `git` may be given. */
export function gitUrlFault(url: string): string | undefined {
  if (url.length === 0) return 'must not be empty';
  if (holdsControlCharacters(url)) return 'must not hold control characters';
  // An address beginning with `-` would be read by git as an option (`--upload-pack=...`).
  if (url.startsWith('-')) return 'must not begin with "-"';
  // The `ext::` transport runs a command; `fd::` reads a descriptor. Neither is a repository.
  if (/^[a-z][a-z0-9+.-]*::/i.test(url)) return 'must not name a git remote helper (such as ext::)';
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme !== undefined) {
    // Plain http:// and git:// are refused: nothing would show the checkout was not tampered with on the way.
    if (!['https', 'ssh', 'file'].includes(scheme)) return `must use https://, ssh:// or file://, not ${scheme}://`;
    // A password in the address would be shown by every read of the project and in git's errors.
    if (/^[a-z+.-]+:\/\/[^/@]*:[^/@]*@/i.test(url)) return 'must not carry a password (user:password@); a source-control credential is to hold it';
    return undefined;
  }
  // scp-like `user@host:path/repo.git`
  if (/^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:[^/]/.test(url) || /^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:\//.test(url)) return undefined;
  // A local path: absolute only, so it never depends on the server's working directory.
  if (path.isAbsolute(url)) return undefined;
  return 'must be an https://, ssh:// or file:// address, user@host:path, or an absolute local path';
}

/**
 * A browse path as asked for (`GET /v1/projects/{id}/file?path=`), checked before the file system
 * is asked: relative, no NUL, no `..` segment. Returns the normalized relative path ("" is the
 * checkout's root) or a fault. Symlinks are checked after (isWithin over real paths).
 */
export function browsePath(asked: string): { path: string } | { fault: string } {
  if (asked.includes('\u0000')) return { fault: 'must not hold NUL' };
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

/** The projects directory of a data dir. */
export function projectsDirOf(dataDir: string): string {
  return path.join(dataDir, 'projects');
}
