import { accessSync, constants as fsConstants, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { installRoot } from '../core/install-root';

const PROJECT_ROOT = installRoot(__dirname, 1);

/**
 * The folder for what Cairn builds once per machine rather than once per checkout (the Temporal
 * CLI, the test suite's time-skipping server): `$XDG_CACHE_HOME/cairn`, else `~/.cache/cairn`.
 * Where neither can be created and written (an account with no writable home), the checkout's
 * git-ignored `.cache` instead. Entries inside are named by version or source hash, so checkouts
 * of different revisions share it safely.
 */
export function machineCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const candidates: string[] = [];
  // The XDG spec: a relative XDG_CACHE_HOME is invalid and ignored.
  if (env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME)) candidates.push(path.join(env.XDG_CACHE_HOME, 'cairn'));
  const home = env.HOME || os.homedir();
  if (home && path.isAbsolute(home)) candidates.push(path.join(home, '.cache', 'cairn'));
  for (const dir of candidates) if (writableDir(dir)) return dir;
  return path.join(PROJECT_ROOT, '.cache');
}

function writableDir(dir: string): boolean {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, fsConstants.W_OK);
    return true;
  } catch {
    return false;
  }
}
