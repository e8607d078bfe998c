import { spawn } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gitUrlFault } from '../core/project-paths';

/**
 * The system `git`, run for git projects (spec part A 4.5): a checkout made or brought up to date,
 * and a run's copy of it at the commit the run records.
 *
 * Every `git` is a child process with a scrubbed environment (none of the server's: no database
 * URL, no encryption key; no system or global git config; no terminal prompt), its own process
 * group, and a timeout after which the group is killed. Remote helpers are off (`ext::` and
 * `fd::` never run), and the address is checked again here (core/project-paths.ts) and always
 * passed after `--`, so an address cannot be read as an option.
 */

/**
 * A source-control credential to clone with (the `scm` kind, opened by services/projects.ts):
 * `withGitCredential` writes its secrets into 0600 files of a private temporary directory for
 * the length of one update, and `credentialEnvironment` points git at them: an SSH key through
 * `GIT_SSH_COMMAND` (`-i`, only that identity; a passphrase answered once by an askpass program),
 * a username and password or token for https through a `GIT_ASKPASS` program reading the files.
 * No secret is ever in an argument or the environment, and the directory is removed after.
 */
export interface GitCredential {
  kind: 'scm';
  username?: string;
  password?: string;
  sshKey?: string;
  sshKeyPassphrase?: string;
}

/** A credential's files written for one update: where they are. */
interface GitCredentialFiles {
  dir: string;
  credential: GitCredential;
}

export interface GitOptions {
  /** Kills the whole process group after this long. */
  timeoutMs: number;
  /** The credential's files (withGitCredential); absent clones with none. */
  credential?: GitCredentialFiles;
}

const ASKPASS_SCRIPT = `#!/bin/sh
dir="$(dirname "$0")"
case "$1" in
  Username*|username*) exec cat "$dir/username" ;;
  *passphrase*)
    [ -e "$dir/passphrase.asked" ] && exit 1
    : > "$dir/passphrase.asked"
    exec cat "$dir/passphrase" ;;
  *) exec cat "$dir/password" ;;
esac
`;

/** Runs `work` with the credential's files in a private 0700 directory, removed afterwards. */
export async function withGitCredential<T>(credential: GitCredential | undefined, work: (files: GitCredentialFiles | undefined) => Promise<T>): Promise<T> {
  if (!credential) return work(undefined);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-git-credential-'));
  try {
    await fs.chmod(dir, 0o700);
    const write = (name: string, content: string, mode = 0o600) => fs.writeFile(path.join(dir, name), content, { mode });
    await write('askpass', ASKPASS_SCRIPT, 0o700);
    if (credential.username) await write('username', credential.username);
    if (credential.password) await write('password', credential.password);
    if (credential.sshKey) await write('ssh_key', credential.sshKey.endsWith('\n') ? credential.sshKey : `${credential.sshKey}\n`);
    if (credential.sshKeyPassphrase) await write('passphrase', credential.sshKeyPassphrase);
    return await work({ dir, credential });
  } finally {
    await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

export class GitError extends Error {}

/** The environment every `git` gets: nothing of the server's. */
function gitEnvironment(home: string, credential: GitCredentialFiles | undefined): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    LANG: 'C.UTF-8',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_SSH_COMMAND: 'ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new',
    // Remote helpers that run commands or read descriptors are never allowed.
    GIT_ALLOW_PROTOCOL: 'file:https:ssh',
    ...credentialEnvironment(credential),
  };
}

/** What a credential adds to git's environment: paths of its files and helpers, never a secret. */
function credentialEnvironment(files: GitCredentialFiles | undefined): Record<string, string> {
  if (!files) return {};
  const { dir, credential } = files;
  const env: Record<string, string> = {};
  const askpass = path.join(dir, 'askpass');
  if (credential.password) env.GIT_ASKPASS = askpass;
  if (credential.sshKey) {
    // The path is quoted for the shell git runs the command with; the directory name is mkdtemp's.
    const key = `'${path.join(dir, 'ssh_key')}'`;
    const common = `-i ${key} -o IdentitiesOnly=yes -o StrictHostKeyChecking=accept-new`;
    if (credential.sshKeyPassphrase) {
      env.GIT_SSH_COMMAND = `ssh ${common} -o NumberOfPasswordPrompts=1`;
      env.SSH_ASKPASS = askpass;
      env.SSH_ASKPASS_REQUIRE = 'force';
      env.DISPLAY = 'cairn';
    } else {
      env.GIT_SSH_COMMAND = `ssh ${common} -o BatchMode=yes`;
    }
  }
  return env;
}

/** Runs `git args` in `cwd`; resolves with stdout, rejects with a GitError carrying the last lines of stderr. */
export function runGit(args: string[], cwd: string, options: GitOptions, stdoutTo?: NodeJS.WritableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const home = os.tmpdir();
    const child = spawn('git', ['-c', 'protocol.ext.allow=never', '-c', 'protocol.fd.allow=never', '-c', 'core.hooksPath=/dev/null', ...args], {
      cwd,
      env: gitEnvironment(home, options.credential),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    let err = '';
    if (stdoutTo) child.stdout.pipe(stdoutTo);
    else child.stdout.on('data', (chunk: Buffer) => (out.length < 1_000_000 ? (out += chunk.toString('utf8')) : undefined));
    child.stderr.on('data', (chunk: Buffer) => {
      err = (err + chunk.toString('utf8')).slice(-4000);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    }, options.timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new GitError(`git could not start: ${e.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (timedOut) return reject(new GitError(`git ${args[0]} did not finish within ${Math.round(options.timeoutMs / 1000)} s and was stopped`));
      if (code === 0) return resolve(out);
      const detail = err.trim().split('\n').slice(-3).join(' ').trim();
      reject(new GitError(`git ${args[0]} failed (${signal ?? `exit ${code}`})${detail ? `: ${detail}` : ''}`));
    });
  });
}

/**
 * Makes `dir` a checkout of `url` at `branch` (null: the remote's HEAD), cloning on the first
 * update and fetching after; answers the commit checked out. The checkout is detached and cleaned
 * (untracked files removed), so it holds exactly the commit's tree. Earlier commits stay in the
 * repository, so a rerun of an older run still finds its commit.
 */
export async function updateCheckout(dir: string, url: string, branch: string | null, options: GitOptions): Promise<string> {
  const fault = gitUrlFault(url);
  if (fault) throw new GitError(`the repository address ${fault}`);
  if (branch !== null && (branch.startsWith('-') || /[\u0000-\u001f\u007f ~^:?*[\\]/.test(branch))) throw new GitError('the branch is not a valid ref name');
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  const initialized = await fs
    .stat(path.join(dir, '.git'))
    .then(() => true)
    .catch(() => false);
  if (!initialized) await runGit(['init', '--quiet'], dir, options);
  // An update stopped between init and adding the remote leaves a checkout with none.
  await runGit(['remote', 'set-url', '--', 'origin', url], dir, options).catch(() => runGit(['remote', 'add', '--', 'origin', url], dir, options));
  await runGit(['fetch', '--quiet', '--no-tags', 'origin', branch ?? 'HEAD'], dir, options);
  await runGit(['checkout', '--quiet', '--force', '--detach', 'FETCH_HEAD'], dir, options);
  await runGit(['clean', '--quiet', '-ffdx'], dir, options);
  return (await runGit(['rev-parse', 'HEAD'], dir, options)).trim();
}

/**
 * Puts the tree of `commit` from the checkout in `dir` into `workDir` (which exists), without the
 * repository itself: a run works in its own copy and never changes the checkout.
 */
export async function copyCommitTree(dir: string, commit: string, workDir: string, options: GitOptions): Promise<void> {
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) throw new GitError(`not a commit id: ${commit}`);
  const tar = spawn('tar', ['-x', '--no-same-owner', '--no-same-permissions', '-C', workDir], { stdio: ['pipe', 'ignore', 'pipe'] });
  let tarErr = '';
  tar.stderr.on('data', (chunk: Buffer) => (tarErr = (tarErr + chunk.toString('utf8')).slice(-2000)));
  const tarDone = new Promise<void>((resolve, reject) => {
    tar.on('error', (e) => reject(new GitError(`tar could not start: ${e.message}`)));
    tar.on('close', (code) => (code === 0 ? resolve() : reject(new GitError(`unpacking the checkout failed: ${tarErr.trim()}`))));
  });
  try {
    await runGit(['archive', '--format=tar', commit], dir, options, tar.stdin);
  } catch (err) {
    tar.kill('SIGKILL');
    await tarDone.catch(() => undefined);
    throw err;
  }
  await tarDone;
}
