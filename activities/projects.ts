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
 * A source-control credential to clone with. Credentials are not served yet; when they are, the
 * service opens the project's credential and passes it here, and `credentialEnvironment` turns it
 * into what `git` reads (an askpass helper or an ssh command).
 */
export interface GitCredential {
  kind: 'none';
}

export interface GitOptions {
  /** Kills the whole process group after this long. */
  timeoutMs: number;
  credential?: GitCredential;
}

export class GitError extends Error {}

/** The environment every `git` gets: nothing of the server's. */
function gitEnvironment(home: string, credential: GitCredential | undefined): Record<string, string> {
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

/** What a credential adds to git's environment; none until credentials are served. */
function credentialEnvironment(_credential: GitCredential | undefined): Record<string, string> {
  return {};
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
