import { promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { execFile } from 'node:child_process';
import { GitError, UNREACHABLE, type FetchSource, type GitCredential, type TreeEntry, type TreeRead } from '../core/project-paths';
import { JobFailed, runSandboxedJob, type JobSandbox } from './sandboxed-job';
import type { SandboxBind } from './sandbox';

const execFileAsync = promisify(execFile);

/**
 * Git for projects (spec part A 4.5), always as a sandboxed job (runtime/sandboxed-job.ts): the
 * server never runs git itself, so neither a repository's content nor a remote's answers reach
 * anything but the sandbox, which sees the repository it works on and nothing else of the server.
 *
 * Each project has a repository of its own under the projects directory, `<dir>/.git`, holding
 * every commit fetched (kept under `refs/cairn/commits/`, so a rerun of an older run still finds
 * its commit) and never a working tree: a run unpacks its commit's tree into its own work dir
 * (`extractCommit`), and browsing reads the tree from git's objects (`readTree`), where a link is
 * only a blob and is followed only within the tree.
 *
 * Every git gets a scrubbed environment (no system or global config, no terminal prompt, hooks
 * off, only the transports the address needs; never `ext::` or `fd::`), the address always after
 * `--`. A remote address was resolved and checked against the egress rule by the caller, and git
 * connects to exactly the address checked (`http.curloptResolve`, or ssh's `HostName`).
 */


/** The repository dir of a project's checkout. */
export const gitDirOf = (checkout: string) => path.join(checkout, '.git');

const ASKPASS_SCRIPT = `#!/bin/sh
dir="$(dirname "$0")"
case "$1" in
  Username*|username*) exec cat "$dir/.cairn-git-username" ;;
  *passphrase*)
    [ -e "$dir/.cairn-git-passphrase.asked" ] && exit 1
    : > "$dir/.cairn-git-passphrase.asked"
    exec cat "$dir/.cairn-git-passphrase" ;;
  *) exec cat "$dir/.cairn-git-password" ;;
esac
`;

/** Configuration every git gets (as GIT_CONFIG_* variables, which outrank every config file). */
const BASE_CONFIG: [string, string][] = [
  ['protocol.ext.allow', 'never'],
  ['protocol.fd.allow', 'never'],
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['gc.auto', '0'],
  // The job is alone in its sandbox with the repositories it was shown; their owners do not matter there.
  ['safe.directory', '*'],
];

/** The environment of every git: no system or global config, no prompt, only `protocols`, and `config`. */
function gitEnvironment(protocols: string, config: [string, string][] = []): Record<string, string> {
  const env: Record<string, string> = {
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_ALLOW_PROTOCOL: protocols,
  };
  const all = [...BASE_CONFIG, ...config];
  all.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  env.GIT_CONFIG_COUNT = String(all.length);
  return env;
}

/** The files a credential adds to a fetch job's dir (0600, the run account's), and the switches telling FETCH_SCRIPT they are there. */
function credentialFiles(credential: GitCredential | undefined): { files: Record<string, string>; env: Record<string, string> } {
  const files: Record<string, string> = {};
  const env: Record<string, string> = {};
  if (!credential) return { files, env };
  files['.cairn-git-askpass'] = ASKPASS_SCRIPT;
  if (credential.username) files['.cairn-git-username'] = credential.username;
  if (credential.password) {
    files['.cairn-git-password'] = credential.password;
    env.CAIRN_GIT_PASSWORD = '1';
  }
  if (credential.sshKey) {
    files['.cairn-git-ssh-key'] = credential.sshKey.endsWith('\n') ? credential.sshKey : `${credential.sshKey}\n`;
    env.CAIRN_GIT_SSH_KEY = '1';
    if (credential.sshKeyPassphrase) {
      files['.cairn-git-passphrase'] = credential.sshKeyPassphrase;
      env.CAIRN_GIT_PASSPHRASE = '1';
    }
  }
  return { files, env };
}

/**
 * What a fetch runs in its sandbox, in its own dir ($1 repository, $2 address, $3 ref or empty for
 * the remote's HEAD; CAIRN_SSH_TARGET the checked address for ssh): ssh and askpass pointed at the
 * credential's files, the repository made on the first fetch, the ref fetched, its commit kept
 * under refs/cairn/commits/ and printed.
 */
const FETCH_SCRIPT = `set -eu
repo=$1; url=$2; ref=\${3:-HEAD}
# git clears config variables for the upload-pack a local fetch starts; a global file reaches it.
export GIT_CONFIG_GLOBAL="$PWD/.cairn-gitconfig"
chmod 700 .cairn-git-askpass 2>/dev/null || true
ssh="ssh -o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=/dev/null \${CAIRN_SSH_TARGET:-}"
if [ -n "\${CAIRN_GIT_SSH_KEY:-}" ]; then
  ssh="$ssh -i '$PWD/.cairn-git-ssh-key' -o IdentitiesOnly=yes"
  if [ -n "\${CAIRN_GIT_PASSPHRASE:-}" ]; then
    ssh="$ssh -o NumberOfPasswordPrompts=1"
    export SSH_ASKPASS="$PWD/.cairn-git-askpass" SSH_ASKPASS_REQUIRE=force DISPLAY=cairn
  else ssh="$ssh -o BatchMode=yes"; fi
else ssh="$ssh -o BatchMode=yes"; fi
export GIT_SSH_COMMAND="$ssh"
[ -z "\${CAIRN_GIT_PASSWORD:-}" ] || export GIT_ASKPASS="$PWD/.cairn-git-askpass"
[ -e "$repo/HEAD" ] || git init --quiet --bare "$repo"
git --git-dir="$repo" fetch --quiet --no-tags --no-recurse-submodules -- "$url" "$ref"
commit=$(git --git-dir="$repo" rev-parse --verify --quiet 'FETCH_HEAD^{commit}')
git --git-dir="$repo" update-ref "refs/cairn/commits/$commit" "$commit"
printf '%s' "$commit"`;

export interface FetchOptions {
  timeoutMs: number;
  /** Ends the fetch when aborted (an activity's cancellation). */
  signal?: AbortSignal;
  credential?: GitCredential;
  /** SERVICE_EGRESS_PROXY, for https. */
  proxy?: string;
}

/** Git's words for a remote that never answered as a git server. */
const NETWORK_FAILURE = /could not resolve|couldn't connect|connection refused|connection timed out|timed out|no route to host|network is unreachable|ssl|tls|certificate|gnutls|handshake|empty reply|recv failure|send failure|connection reset|kex_exchange|could not read from remote repository|host key verification|port \d+:|proxy/i;

/**
 * Fetches `branch` (null: the remote's HEAD) of `url` into the project's repository in `checkout`,
 * made on the first fetch; answers the commit. The repository is handed to the run account first
 * (a checkout an earlier release made as the server's own user included, whose working tree is
 * removed: runs and browsing read from git's objects now).
 */
export async function fetchProject(
  where: JobSandbox,
  checkout: string,
  url: string,
  branch: string | null,
  source: FetchSource,
  options: FetchOptions,
  onDetail: (detail: string) => void,
): Promise<string> {
  if (branch !== null && (branch.startsWith('-') || /[\u0000-\u001f\u007f ~^:?*[\\]/.test(branch))) throw new GitError('the branch is not a valid ref name');
  await prepareCheckout(checkout, where.sandbox?.user);
  const config: [string, string][] = [];
  const env: Record<string, string> = {};
  let protocols: string;
  const binds = [{ path: checkout, writable: true }];
  if (source.target.kind === 'local') {
    protocols = 'file';
    binds.push({ path: source.target.path, writable: false });
  } else {
    protocols = source.target.scheme;
    const { host, port } = source.target;
    const { address } = source as Extract<FetchSource, { address: string }>;
    if (source.target.scheme === 'https') {
      config.push(['http.curloptResolve', `${host}:${port}:${net.isIPv6(address) ? `[${address}]` : address}`]);
      if (options.proxy) config.push(['http.proxy', options.proxy]);
    } else {
      // ssh connects to the checked address and still checks the key under the host's name.
      env.CAIRN_SSH_TARGET = `-o HostName=${address} -o HostKeyAlias=${host}`;
    }
  }
  const credential = credentialFiles(options.credential);
  try {
    const out = await runSandboxedJob(where, {
      what: 'git fetch',
      name: 'git-fetch',
      argv: ['sh', '-c', FETCH_SCRIPT, 'cairn-git-fetch', gitDirOf(checkout), url, branch ?? ''],
      files: { ...credential.files, '.cairn-gitconfig': '[safe]\n\tdirectory = *\n' },
      binds,
      env: { ...gitEnvironment(protocols, config), ...env, ...credential.env },
      timeoutMs: options.timeoutMs,
      maxOutputBytes: 200,
      signal: options.signal,
    });
    const commit = out.toString('utf8').trim();
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) throw new GitError('git fetch answered no commit');
    return commit;
  } catch (err) {
    if (!(err instanceof JobFailed)) throw err;
    onDetail(err.message);
    if (source.target.kind === 'remote' && NETWORK_FAILURE.test(err.printed)) throw new GitError(UNREACHABLE);
    throw new GitError(withoutPaths(err.message, [checkout, where.workRoot]));
  }
}

/** A message with the server's own paths left out. */
function withoutPaths(message: string, paths: string[]): string {
  let text = message;
  for (const p of paths) if (p) text = text.split(p).join('<checkout>');
  return text;
}

/**
 * Makes the checkout dir the run account's, with nothing in it but its repository: a checkout an
 * earlier release kept (a working tree beside `.git`, owned by the server's user) loses its
 * working tree and keeps every commit it holds.
 */
async function prepareCheckout(checkout: string, owner: { uid: number; gid: number } | undefined): Promise<void> {
  await fs.mkdir(checkout, { recursive: true, mode: 0o700 });
  for (const entry of await fs.readdir(checkout)) {
    if (entry !== '.git') await fs.rm(path.join(checkout, entry), { recursive: true, force: true });
  }
  if (!owner) return;
  const stat = await fs.lstat(checkout);
  if (stat.uid === owner.uid) {
    const repo = await fs.lstat(gitDirOf(checkout)).catch(() => undefined);
    if (!repo || repo.uid === owner.uid) return;
  }
  // `chown -R -h` changes links themselves and follows none.
  await execFileAsync('chown', ['-R', '-h', `${owner.uid}:${owner.gid}`, '--', checkout]);
}

/** The tree of `commit` is unpacked with `tar --keep-old-files`, which refuses to replace a file there already. */
const EXTRACT_SCRIPT = `set -euo pipefail
git --git-dir="$1" archive --format=tar "$2" | tar -x --keep-old-files --no-same-owner -f -`;

/** What tar says of a name it would not replace. */
const KEPT_FILE = /tar: (.+?): Cannot (?:open|mkdir|create symlink[^:]*|hard link[^:]*): File exists/g;

/**
 * Unpacks the tree of `commit` into a run's work dir, in the sandbox as the run account: the work
 * dir holds the tool's files already, and a tree that would replace one of them (a link named
 * `script.sh`, say) is refused with an error naming it, nothing run.
 */
export async function extractCommit(where: JobSandbox, checkout: string, commit: string, workDir: string, timeoutMs: number): Promise<void> {
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) throw new GitError(`not a commit id: ${commit}`);
  await unpackIntoWorkDir(where, ['bash', '-c', EXTRACT_SCRIPT, 'cairn-extract', gitDirOf(checkout), commit], [{ path: checkout }], workDir, timeoutMs, [checkout, workDir]);
}

/**
 * Unpacks a project's tree received as a tar archive (a relay worker's, fetched through the
 * relay) into a run's work dir, the same way as {@link extractCommit}: in the sandbox as the run
 * account, with no network, refusing to replace any of the tool's files.
 */
export async function extractArchive(where: JobSandbox, archive: string, workDir: string, timeoutMs: number): Promise<void> {
  await unpackIntoWorkDir(where, ['bash', '-c', 'set -euo pipefail; tar -x --keep-old-files --no-same-owner -f "$1"', 'cairn-extract', archive], [{ path: archive }], workDir, timeoutMs, [archive, workDir]);
}

async function unpackIntoWorkDir(where: JobSandbox, argv: string[], binds: SandboxBind[], workDir: string, timeoutMs: number, paths: string[]): Promise<void> {
  try {
    await runSandboxedJob(where, {
      what: "unpacking the project's tree",
      name: 'extract',
      argv,
      env: gitEnvironment(''),
      binds,
      timeoutMs,
      maxOutputBytes: 0,
      network: 'none',
      dir: workDir,
    });
  } catch (err) {
    if (!(err instanceof JobFailed)) throw err;
    const kept = [...err.printed.matchAll(KEPT_FILE)].map((m) => m[1]);
    if (kept.length) {
      throw new GitError(
        `the project's tree holds ${kept.map((k) => JSON.stringify(k)).join(', ')}, which Cairn writes for the run's tool; ` +
          'rename it in the repository (nothing was run)',
      );
    }
    throw new GitError(withoutPaths(err.message, paths));
  }
}

/** The tree of `commit` as a tar archive (for a relay worker), read in the sandbox from the project's repository; at most `maxBytes`. */
export async function archiveCommit(where: JobSandbox, checkout: string, commit: string, maxBytes: number, timeoutMs: number): Promise<Buffer> {
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) throw new GitError(`not a commit id: ${commit}`);
  try {
    return await runSandboxedJob(where, {
      what: "archiving the project's tree",
      name: 'archive',
      argv: ['git', '--git-dir', gitDirOf(checkout), 'archive', '--format=tar', commit],
      env: gitEnvironment(''),
      binds: [{ path: checkout }],
      timeoutMs,
      maxOutputBytes: maxBytes,
      network: 'none',
    });
  } catch (err) {
    if (!(err instanceof JobFailed)) throw err;
    throw new GitError(withoutPaths(err.message, [checkout]));
  }
}

/**
 * Reads a path of the tree at $2 ($3 the path, "" the root): cat-file resolves it, following links
 * only within the tree, and prints what it is; then the tree's entries or the blob's bytes follow.
 */
const READ_SCRIPT = `set -eu
repo=$1; commit=$2; p=$3; max=$4
if [ -z "$p" ]; then spec="$commit^{tree}"; else spec="$commit:$p"; fi
info=$(printf '%s\\n' "$spec" | git --git-dir="$repo" cat-file --batch-check --follow-symlinks | head -n 1)
printf '%s\\n' "$info"
set -- $info
case "\${2:-}" in
  tree) git --git-dir="$repo" ls-tree -r -t -z --long "$1" ;;
  blob) [ "$3" -le "$max" ] && git --git-dir="$repo" cat-file blob "$1" || true ;;
esac`;

/** Reads `relative` ("" the root) at `commit` from the project's repository, listing at most `maxEntries` and reading files of at most `maxFileBytes`. */
export async function readTree(where: JobSandbox, checkout: string, commit: string, relative: string, limits: { maxEntries: number; maxFileBytes: number; timeoutMs: number }): Promise<TreeRead> {
  let out: Buffer;
  try {
    out = await runSandboxedJob(where, {
      what: "reading the project's tree",
      name: 'tree',
      argv: ['sh', '-c', READ_SCRIPT, 'cairn-tree', gitDirOf(checkout), commit, relative, String(limits.maxFileBytes)],
      env: gitEnvironment(''),
      binds: [{ path: checkout }],
      timeoutMs: limits.timeoutMs,
      maxOutputBytes: 256 * 1024 * 1024,
      network: 'none',
    });
  } catch (err) {
    if (err instanceof JobFailed) throw new GitError(withoutPaths(err.message, [checkout]));
    throw err;
  }
  const newline = out.indexOf(10);
  const info = out.subarray(0, newline < 0 ? out.length : newline).toString('utf8').split(' ');
  const rest = newline < 0 ? Buffer.alloc(0) : out.subarray(newline + 1);
  if (info[1] === 'tree') return { kind: 'dir', ...treeEntries(rest, limits.maxEntries) };
  if (info[1] === 'blob') {
    const size = Number(info[2]);
    return size <= limits.maxFileBytes ? { kind: 'file', size, bytes: rest } : { kind: 'file', size };
  }
  if (info[0] === 'symlink') return { kind: 'outside' };
  if (info[0] === 'loop' || info[0] === 'dangling' || info[0] === 'notdir') return info[0] === 'dangling' ? { kind: 'missing' } : { kind: 'unresolvable' };
  return { kind: 'missing' };
}

/** `git ls-tree -r -t -z --long` entries: `<mode> <type> <oid> <size>\t<path>`, NUL-terminated. */
function treeEntries(listing: Buffer, maxEntries: number): { entries: TreeEntry[]; truncated: boolean } {
  const entries: TreeEntry[] = [];
  let truncated = false;
  for (const record of listing.toString('utf8').split('\u0000')) {
    if (!record) continue;
    if (entries.length >= maxEntries) {
      truncated = true;
      break;
    }
    const tab = record.indexOf('\t');
    const [mode, type, , size] = record.slice(0, tab).split(/ +/);
    const entryPath = record.slice(tab + 1);
    if (mode === '120000') entries.push({ path: entryPath, type: 'symlink', size: 0 });
    else if (type === 'tree') entries.push({ path: entryPath, type: 'dir', size: 0 });
    else if (type === 'blob') entries.push({ path: entryPath, type: 'file', size: Number(size) });
  }
  return { entries, truncated };
}

/** Whether the project's repository in `checkout` holds `commit` (a worker's cache may not have it yet). */
export async function hasCommit(where: JobSandbox, checkout: string, commit: string): Promise<boolean> {
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) throw new GitError(`not a commit id: ${commit}`);
  try {
    await fs.access(path.join(gitDirOf(checkout), 'HEAD'));
  } catch {
    return false;
  }
  try {
    await runSandboxedJob(where, {
      what: 'git cat-file',
      name: 'git-has',
      argv: ['git', `--git-dir=${gitDirOf(checkout)}`, 'cat-file', '-e', `${commit}^{commit}`],
      binds: [{ path: checkout }],
      env: gitEnvironment(''),
      timeoutMs: 60_000,
      maxOutputBytes: 0,
      network: 'none',
    });
    return true;
  } catch (err) {
    if (err instanceof JobFailed && err.exitCode !== null) return false;
    throw err;
  }
}
