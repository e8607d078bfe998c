import { execFile } from 'node:child_process';
import { promises as fs, constants as fsConstants } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { machineCacheDir } from './machine-cache';
import { processAlive } from './state';

const execFileAsync = promisify(execFile);

/** The official Temporal CLI release Cairn builds when no binary is provided. */
export const TEMPORAL_CLI_MODULE = 'github.com/temporalio/cli';
export const TEMPORAL_CLI_VERSION = 'v1.5.1';

/** Where a built CLI is kept: the machine's cache (embedded/machine-cache.ts), so every checkout of this version shares one build. */
export function temporalCliCachePath(): string {
  return path.join(machineCacheDir(), 'temporal-cli', TEMPORAL_CLI_VERSION, 'temporal');
}

export class TemporalCliUnavailable extends Error {}

export async function isExecutable(file: string): Promise<boolean> {
  try {
    await fs.access(file, fsConstants.X_OK);
    return (await fs.stat(file)).isFile();
  } catch {
    return false;
  }
}

export async function onPath(name: string): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (await isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/**
 * `go build` of a package into `finalPath`, through a partial file renamed into place: rename is
 * atomic, so a reader never sees half a binary. One process builds a given path at a time (a lock
 * file beside it): on a fresh machine every test worker asks for OpenTofu at once, and three
 * compiles of it side by side on two cores take three times as long as one. A process that finds
 * the lock held waits, then uses what the holder built.
 */
export async function goBuildInto(goBinary: string, cwd: string, pkg: string, finalPath: string, env: NodeJS.ProcessEnv = process.env, flags: string[] = []): Promise<string> {
  await fs.mkdir(path.dirname(finalPath), { recursive: true });
  return withBuildLock(finalPath, async () => {
    if (await isExecutable(finalPath)) return finalPath;
    const partial = `${finalPath}.partial-${process.pid}`;
    try {
      await execFileAsync(goBinary, ['build', ...flags, '-o', partial, pkg], { cwd, env, maxBuffer: 64 * 1024 * 1024 });
      await fs.rename(partial, finalPath);
    } finally {
      await fs.rm(partial, { force: true });
    }
    return finalPath;
  });
}

const LOCK_POLL_MS = 1_000;

/**
 * Runs `build` holding `${target}.lock`, a file naming the holder's process id. A lock whose holder
 * has died (a killed test run) is taken over; one whose holder lives is waited for.
 */
export async function withBuildLock<T>(target: string, build: () => Promise<T>): Promise<T> {
  const lock = `${target}.lock`;
  const holderOf = async () => Number((await fs.readFile(lock, 'utf8').catch(() => '')).trim());
  for (;;) {
    try {
      await fs.writeFile(lock, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = await holderOf();
    await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
    // Taken over only when it still names a holder that is gone: a lock caught between its
    // creation and its write names none at first, and has had a poll's time to be written.
    const gone = !(Number.isInteger(holder) && holder > 0 && processAlive(holder));
    if (gone && (await holderOf()) === holder) await fs.rm(lock, { force: true });
  }
  try {
    return await build();
  } finally {
    await fs.rm(lock, { force: true });
  }
}

/**
 * Builds `pkg` of a Go module at a pinned version into `finalPath`. `go install` refuses a module
 * whose go.mod carries replace directives (the Temporal CLI's and OpenTofu's do), so the module is
 * downloaded, copied somewhere writable and built there.
 */
export async function buildGoModule(
  module: string,
  version: string,
  pkg: string,
  finalPath: string,
  flags: string[] = [],
  onPhase: (phase: string) => void = () => {},
): Promise<string> {
  const goBinary = await onPath('go');
  if (!goBinary) throw new Error('no Go toolchain on PATH');
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-go-build-'));
  try {
    const env = { ...process.env, GOFLAGS: '-mod=mod', GO111MODULE: 'on' };
    onPhase(`downloading ${module}@${version}`);
    const { stdout } = await execFileAsync(goBinary, ['mod', 'download', '-json', `${module}@${version}`], {
      cwd: work,
      env,
      maxBuffer: 16 * 1024 * 1024,
    });
    const moduleDir = (JSON.parse(stdout) as { Dir?: string; Error?: string });
    if (!moduleDir.Dir) throw new Error(moduleDir.Error ?? 'go mod download returned no directory');
    const source = path.join(work, 'src');
    onPhase('copying the module source');
    await fs.cp(moduleDir.Dir, source, { recursive: true });
    await execFileAsync('chmod', ['-R', 'u+w', source]);
    onPhase(`compiling ${pkg} (go build; its dependencies are downloaded as it goes)`);
    return await goBuildInto(goBinary, source, pkg, finalPath, env, flags);
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

/** How often a long build says it is still going. */
export const BUILD_PROGRESS_EVERY_MS = 15_000;

const elapsed = (ms: number) => {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
};

/**
 * Runs a long build, saying what it is doing as it goes: each phase as it begins, with the time
 * spent so far, and every BUILD_PROGRESS_EVERY_MS the phase still under way; then the total.
 */
export async function withBuildProgress<T>(what: string, log: (line: string) => void, build: (onPhase: (phase: string) => void) => Promise<T>): Promise<T> {
  const started = Date.now();
  let phase = 'starting';
  const ticker = setInterval(() => log(`${what}: still ${phase}, ${elapsed(Date.now() - started)} elapsed`), BUILD_PROGRESS_EVERY_MS);
  ticker.unref();
  try {
    const result = await build((next) => {
      phase = next;
      log(`${what}: ${next} (${elapsed(Date.now() - started)} elapsed)`);
    });
    log(`${what}: done in ${elapsed(Date.now() - started)}`);
    return result;
  } finally {
    clearInterval(ticker);
  }
}

/** Builds the pinned CLI from its Go module into the machine cache, showing its progress. */
async function buildFromModule(log: (line: string) => void): Promise<string> {
  log(`building the Temporal CLI ${TEMPORAL_CLI_VERSION} from its Go module into ${path.dirname(temporalCliCachePath())} (first start only; takes a few minutes)`);
  return withBuildProgress(`building the Temporal CLI ${TEMPORAL_CLI_VERSION}`, log, (onPhase) =>
    buildGoModule(TEMPORAL_CLI_MODULE, TEMPORAL_CLI_VERSION, './cmd/temporal', temporalCliCachePath(), [], onPhase),
  );
}

/**
 * Finds the Temporal CLI, in this order: TEMPORAL_CLI, `temporal` on PATH, a copy built earlier into
 * the machine's cache folder, and finally a fresh build from the official Go module into it.
 */
export async function findTemporalCli(log: (line: string) => void = () => {}): Promise<string> {
  const fromEnv = process.env.TEMPORAL_CLI;
  if (fromEnv) {
    if (await isExecutable(fromEnv)) return fromEnv;
    throw new TemporalCliUnavailable(`TEMPORAL_CLI is set to ${fromEnv}, which is not an executable file`);
  }
  const fromPath = await onPath('temporal');
  if (fromPath) return fromPath;
  const cached = temporalCliCachePath();
  if (await isExecutable(cached)) return cached;
  try {
    return await buildFromModule(log);
  } catch (err) {
    throw new TemporalCliUnavailable(
      `the Temporal CLI could not be found or built (${(err as Error).message.split('\n')[0]}). Provide it one of three ways: ` +
        `set TEMPORAL_CLI to the path of a temporal binary, put \`temporal\` on PATH, or install Go so Cairn can build ` +
        `${TEMPORAL_CLI_MODULE}@${TEMPORAL_CLI_VERSION} into ${path.dirname(cached)}. ` +
        `Or point Cairn at a running server with --temporal-address.`,
    );
  }
}
