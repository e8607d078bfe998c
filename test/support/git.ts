import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Runs git in `cwd` as a test's repository author would: no system or user config, a fixed
 * author and committer; answers its output, trimmed.
 */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: cwd, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@e', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@e' },
  }).trim();
}

/**
 * A bare repository `<root>/repo.git` (branch main) holding one commit of `files`, pushed from a
 * work tree `<root>/work` that later commits can be made in. Answers both paths.
 */
export function bareRepository(root: string, files: Record<string, string>): { bare: string; work: string } {
  const bare = path.join(root, 'repo.git');
  const work = path.join(root, 'work');
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', bare]);
  mkdirSync(work);
  git(work, 'init', '-q', '-b', 'main');
  git(work, 'remote', 'add', 'origin', bare);
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(work, name), text);
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'first');
  git(work, 'push', '-q', 'origin', 'HEAD:main');
  return { bare, work };
}
