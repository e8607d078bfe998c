import path from 'node:path';
import { machineCacheDir } from './machine-cache';
import { buildGoModule, isExecutable, onPath } from './temporal-binary';

/**
 * The infrastructure-as-code tools Cairn installs the way it installs the Temporal CLI: built once
 * from their Go modules at a pinned release into the machine's cache (embedded/machine-cache.ts),
 * shared by every checkout of that version. OpenTofu at its current release; Terraform at its last
 * release under the MPL (1.5.x), since later ones are under the BSL. The functions here serve any
 * such binary (a GoBinary): Open Policy Agent for the policy file is one too (embedded/opa.ts).
 */
export interface GoBinary {
  /** Its name in `cairn tools` and its folder in the cache (for a run tool, the tool's name, spec part A 1). */
  tool: string;
  /** What a person calls it. */
  title: string;
  module: string;
  version: string;
  /** The package of the module that is the command. */
  pkg: string;
  /** The executable's name, on PATH and in the cache. */
  binary: string;
  /** The environment variable naming a binary to use instead. */
  envVar: string;
  /** Link flags a release build sets (the version without its -dev marker). */
  ldflags: string;
}

export interface IacBinary extends GoBinary {
  tool: 'opentofu' | 'terraform';
}

export const OPENTOFU: IacBinary = {
  tool: 'opentofu',
  title: 'OpenTofu',
  module: 'github.com/opentofu/opentofu',
  version: 'v1.12.6',
  pkg: './cmd/tofu',
  binary: 'tofu',
  envVar: 'CAIRN_TOFU',
  ldflags: '-s -w -X github.com/opentofu/opentofu/version.dev=no',
};

export const TERRAFORM: IacBinary = {
  tool: 'terraform',
  title: 'Terraform',
  module: 'github.com/hashicorp/terraform',
  version: 'v1.5.7',
  pkg: '.',
  binary: 'terraform',
  envVar: 'CAIRN_TERRAFORM',
  ldflags: '-s -w -X github.com/hashicorp/terraform/version.Prerelease=',
};

export const IAC_BINARIES: Record<IacBinary['tool'], IacBinary> = { opentofu: OPENTOFU, terraform: TERRAFORM };

export function iacCachePath(which: GoBinary): string {
  return path.join(machineCacheDir(), which.tool, which.version, which.binary);
}

export class IacBinaryUnavailable extends Error {}

/** Where the binary is without building anything: its variable, PATH, or the cache. Undefined when none. */
export async function locateIacBinary(which: GoBinary): Promise<{ path: string; from: 'env' | 'path' | 'cache' } | undefined> {
  const fromEnv = process.env[which.envVar];
  if (fromEnv) {
    if (await isExecutable(fromEnv)) return { path: fromEnv, from: 'env' };
    throw new IacBinaryUnavailable(`${which.envVar} is set to ${fromEnv}, which is not an executable file`);
  }
  const fromPath = await onPath(which.binary);
  if (fromPath) return { path: fromPath, from: 'path' };
  const cached = iacCachePath(which);
  if (await isExecutable(cached)) return { path: cached, from: 'cache' };
  return undefined;
}

/** Whether this machine could build the binary: a Go toolchain on PATH. */
export async function canBuildIacBinary(): Promise<boolean> {
  return (await onPath('go')) !== undefined;
}

const builds = new Map<string, Promise<string>>();

/** How often a build in progress says it is still going. */
const PROGRESS_EVERY_MS = 15_000;

/**
 * Finds the binary (its variable, PATH, the cache) or builds it from its Go module into the cache,
 * saying what it does through `log` while it builds (a line at the start, one every 15 seconds, one
 * at the end). Builds in one process are shared; a second process waits for the first's build
 * (goBuildInto's lock) and uses it.
 */
export async function findIacBinary(which: GoBinary, log: (line: string) => void = () => {}): Promise<string> {
  const found = await locateIacBinary(which);
  if (found) return found.path;
  let build = builds.get(which.tool);
  if (!build) {
    build = buildIacBinary(which, log);
    builds.set(which.tool, build);
    build.catch(() => builds.delete(which.tool));
  } else {
    log(`${which.title} ${which.version} is being built by this process already; waiting for it`);
  }
  return build;
}

async function buildIacBinary(which: GoBinary, log: (line: string) => void): Promise<string> {
  const target = iacCachePath(which);
  if (!(await canBuildIacBinary())) {
    throw new IacBinaryUnavailable(
      `${which.title} is not installed and cannot be built here (no Go toolchain on PATH). Provide it one of three ways: ` +
        `set ${which.envVar} to the path of a ${which.binary} binary, put \`${which.binary}\` on PATH, or install Go so Cairn can build ` +
        `${which.module}@${which.version} into ${path.dirname(target)}`,
    );
  }
  const started = Date.now();
  log(`building ${which.title} ${which.version} from its Go module ${which.module} into ${path.dirname(target)} (first use only; takes a few minutes)`);
  let phase = 'starting';
  const progress = setInterval(() => log(`still building ${which.title} ${which.version}: ${phase} (${Math.round((Date.now() - started) / 1000)} s)`), PROGRESS_EVERY_MS);
  try {
    const built = await buildGoModule(which.module, which.version, which.pkg, target, ['-trimpath', `-ldflags=${which.ldflags}`], (next) => {
      phase = next;
      log(`building ${which.title} ${which.version}: ${next} (${Math.round((Date.now() - started) / 1000)} s)`);
    });
    log(`built ${which.title} ${which.version} in ${Math.round((Date.now() - started) / 1000)} s: ${built}`);
    return built;
  } catch (err) {
    throw new IacBinaryUnavailable(`building ${which.title} ${which.version} failed: ${(err as Error).message.split('\n').slice(0, 3).join(' ')}`);
  } finally {
    clearInterval(progress);
  }
}
