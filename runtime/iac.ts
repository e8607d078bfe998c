import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { findIacBinary, type IacBinary } from '../embedded/iac-binaries';
import type { SandboxBind } from './sandbox';
import type { JobSandbox } from './sandboxed-job';

/**
 * What terraform, opentofu and go runs keep beyond one run, under `<data dir>/iac` (a directory the
 * run account can pass into, runtime/sandbox-setup.ts runAccountDir):
 *
 * - `bin/<tool>-<version>-<hash>/<binary>`: the binary, copied from the machine cache (which the run
 *   account cannot reach under the server's home) and shown read-only in the sandbox;
 * - `state/<key>/terraform.tfstate`: the local backend of a template (or of a run without one),
 *   owned by the run account and shown writable in the sandbox of that template's runs only;
 * - `providers/`: the default filesystem mirror of providers, filled by the operator;
 * - `go/`: the install's Go module and build caches.
 */

export class IacSiteError extends Error {}

function iacRoot(site: JobSandbox): string {
  if (!site.iacDir) throw new IacSiteError('this worker keeps no infrastructure-as-code directory');
  return site.iacDir;
}

/** Whether the sandbox shows `file` from the host already (under one of its read-only roots). */
function visibleInSandbox(site: JobSandbox, file: string): boolean {
  if (!site.sandbox) return true;
  return site.sandbox.readOnlyRoots.some((root) => file === root || file.startsWith(`${root}/`));
}

/**
 * The binary a run starts, where its sandbox can run it: found or built (embedded/iac-binaries.ts,
 * with `log` saying how the build goes), then copied once into `<iac>/bin` unless the sandbox sees
 * it where it is. Answers its path and the binds that show it.
 */
export async function stageIacBinary(site: JobSandbox, which: IacBinary, log: (line: string) => void): Promise<{ binary: string; binds: SandboxBind[] }> {
  const source = await findIacBinary(which, log);
  if (visibleInSandbox(site, source)) return { binary: source, binds: [] };
  const stat = await fs.stat(source);
  const tag = createHash('sha256').update(`${source}\u0000${stat.size}\u0000${stat.mtimeMs}`).digest('hex').slice(0, 12);
  const dir = path.join(iacRoot(site), 'bin', `${which.tool}-${which.version}-${tag}`);
  const target = path.join(dir, which.binary);
  try {
    await fs.access(target);
    return { binary: target, binds: [{ path: dir }] };
  } catch {
    /* not staged yet */
  }
  await fs.mkdir(dir, { recursive: true, mode: 0o755 });
  await fs.chmod(path.dirname(dir), 0o755);
  await fs.chmod(dir, 0o755);
  const partial = `${target}.partial-${process.pid}`;
  try {
    await fs.copyFile(source, partial);
    await fs.chmod(partial, 0o755);
    await fs.rename(partial, target);
  } finally {
    await fs.rm(partial, { force: true });
  }
  return { binary: target, binds: [{ path: dir }] };
}

/** A directory of `<iac>` the run account owns, made when missing. */
async function accountDir(site: JobSandbox, ...segments: string[]): Promise<string> {
  const root = iacRoot(site);
  let dir = root;
  for (const segment of segments) {
    dir = path.join(dir, segment);
    await fs.mkdir(dir, { mode: 0o711 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
  await fs.chmod(dir, 0o700);
  const user = site.sandbox?.user;
  if (user) await fs.chown(dir, user.uid, user.gid);
  return dir;
}

/** The key a state is kept under: a template's id, else the run's own. Ids are plain names; anything else is refused. */
export function stateKeyOf(run: { id: string; template_id: string | null }): string {
  const key = run.template_id ? `template-${run.template_id}` : `run-${run.id}`;
  if (!/^[A-Za-z0-9_-]+$/.test(key)) throw new IacSiteError(`cannot keep state under the key ${JSON.stringify(key)}`);
  return key;
}

/** The local backend's state file of one key, its directory made and shown writable in the sandbox. */
export async function stateSite(site: JobSandbox, key: string): Promise<{ stateFile: string; binds: SandboxBind[] }> {
  const dir = await accountDir(site, 'state', key);
  // The holding directory is passable, not listable: a run sees its own state's path only.
  await fs.chmod(path.join(iacRoot(site), 'state'), 0o711);
  return { stateFile: path.join(dir, 'terraform.tfstate'), binds: [{ path: dir, writable: true }] };
}

/** The provider mirror: --iac-provider-mirror, else `<iac>/providers`; shown read-only, and only when it exists. */
export async function providerMirror(site: JobSandbox): Promise<{ dir?: string; binds: SandboxBind[] }> {
  const dir = site.iacProviderMirror ?? path.join(iacRoot(site), 'providers');
  const stat = await fs.stat(dir).catch(() => undefined);
  if (!stat?.isDirectory()) return { binds: [] };
  return { dir, binds: [{ path: dir }] };
}

/** The install's Go caches, shared by its go runs, owned by the run account. */
export async function goSite(site: JobSandbox): Promise<{ modCache: string; buildCache: string; goPath: string; binds: SandboxBind[] }> {
  const dir = await accountDir(site, 'go');
  return {
    modCache: path.join(dir, 'pkg', 'mod'),
    buildCache: path.join(dir, 'build'),
    goPath: dir,
    binds: [{ path: dir, writable: true }],
  };
}

/**
 * Where a terraform or opentofu run executes on this side: its binary staged, the state it keeps
 * under its key, the provider mirror; the same on the pool and on a relay worker.
 */
export async function iacSite(
  site: JobSandbox,
  which: IacBinary,
  run: { id: string; template_id: string | null },
  log: (line: string) => void,
): Promise<{ binary: string; stateFile: string; providerMirror?: string; providerDownloads: boolean; moduleFetchTimeout?: number; binds: SandboxBind[]; stateKey: string }> {
  const staged = await stageIacBinary(site, which, log);
  const stateKey = stateKeyOf(run);
  const state = await stateSite(site, stateKey);
  const mirror = await providerMirror(site);
  return {
    binary: staged.binary,
    stateFile: state.stateFile,
    providerMirror: mirror.dir,
    providerDownloads: site.iacProviderDownloads ?? false,
    moduleFetchTimeout: site.moduleFetchTimeout,
    binds: [...staged.binds, ...state.binds, ...mirror.binds],
    stateKey,
  };
}
