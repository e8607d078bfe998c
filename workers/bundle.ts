import { bundleWorkflowCode, type WorkflowBundleOption } from '@temporalio/worker';
import { createHash, randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { installRoot } from '../core/install-root';

/** The install's root: the workflow bundle is always built from the TypeScript sources, also when Cairn runs compiled. */
const ROOT = installRoot(__dirname, 1);
const ENTRY = path.join(ROOT, 'workflows', 'index.ts');
/** Git-ignored cache folder of the project, beside the Temporal CLI build. */
export const BUNDLE_CACHE_DIR = path.join(ROOT, '.cache', 'workflow-bundle');
/** Packages whose code the bundler adds to every bundle whatever the sources import. */
const SDK_PACKAGES = ['@temporalio/worker', '@temporalio/workflow', '@temporalio/common'];
/** Raised when the way the bundle is built changes, so older cached bundles are not reused. */
const BUNDLE_FORMAT = '1';
const STALE_BUNDLE_MS = 3600_000;

const IMPORT = /^(?:import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?'([^']+)'/gm;

/** A relative import as the bundler resolves it: the `.ts` file, or the folder's index.ts. */
async function resolveLocal(from: string, specifier: string): Promise<string> {
  const base = path.resolve(path.dirname(from), specifier);
  for (const candidate of [`${base}.ts`, path.join(base, 'index.ts'), base]) {
    if ((await fs.stat(candidate).catch(() => undefined))?.isFile()) return candidate;
  }
  throw new Error(`workflow bundle: ${path.relative(ROOT, from)} imports ${specifier}, which was not found`);
}

const packageName = (specifier: string) => specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');

/**
 * What the bundle is made of: the workflow entry and every local module it imports at run time
 * (type-only imports are erased by the compiler, so they are left out), and the npm packages they
 * import. Over-counting only costs a rebuild; a missed file would mean a stale bundle, so any
 * import the bundler could follow is counted.
 */
export async function bundleInputs(): Promise<{ files: string[]; packages: string[] }> {
  const files = new Set<string>();
  const packages = new Set(SDK_PACKAGES);
  const pending = [ENTRY];
  while (pending.length) {
    const file = pending.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const text = await fs.readFile(file, 'utf8');
    for (const [, typeOnly, specifier] of text.matchAll(IMPORT)) {
      if (typeOnly) continue;
      if (specifier.startsWith('.')) pending.push(await resolveLocal(file, specifier));
      else if (!specifier.startsWith('node:')) packages.add(packageName(specifier));
    }
  }
  return { files: [...files].sort(), packages: [...packages].sort() };
}

/** The installed version of a package; a package whose version cannot be read fails the digest (and so the cache). */
async function packageVersion(name: string): Promise<string> {
  const manifest = JSON.parse(await fs.readFile(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string };
  return manifest.version;
}

/** SHA-256 over the bundle's sources and the versions of the packages bundled with them. */
export async function workflowBundleDigest(): Promise<string> {
  const { files, packages } = await bundleInputs();
  const hash = createHash('sha256').update(`cairn workflow bundle ${BUNDLE_FORMAT}\n`);
  for (const file of files) hash.update(`${path.relative(ROOT, file)}\n`).update(await fs.readFile(file)).update('\n');
  for (const name of packages) hash.update(`${name}@${await packageVersion(name)}\n`);
  return hash.digest('hex');
}

export interface BundleLog {
  info(message: string): void;
  warn(message: string): void;
}

const quietBundlerLogger = {
  log: () => {},
  trace: () => {},
  debug: () => {},
  info: () => {},
  warn: (message: string) => process.stderr.write(`workflow bundler: ${message}\n`),
  error: (message: string) => process.stderr.write(`workflow bundler: ${message}\n`),
};

/**
 * The workflow bundle on disk, built only when no bundle of the same sources and SDK exists
 * (first start, or after an upgrade); returns its path. The file is written under a unique name
 * and renamed into place, so two processes starting at once each see either no bundle or a whole
 * one, and if both build, the second rename replaces the first with identical code.
 */
export async function buildWorkflowBundle(log?: BundleLog): Promise<string> {
  const file = path.join(BUNDLE_CACHE_DIR, `${await workflowBundleDigest()}.js`);
  if (await fs.stat(file).catch(() => undefined)) return file;
  const started = Date.now();
  const { code } = await bundleWorkflowCode({ workflowsPath: ENTRY, logger: quietBundlerLogger });
  await fs.mkdir(BUNDLE_CACHE_DIR, { recursive: true });
  const partial = `${file}.${process.pid}-${randomBytes(4).toString('hex')}.partial`;
  try {
    await fs.writeFile(partial, code);
    await fs.rename(partial, file);
  } finally {
    await fs.rm(partial, { force: true });
  }
  log?.info(`workflow code bundled in ${Date.now() - started} ms into ${path.relative(ROOT, file)}`);
  await removeStaleBundles(file);
  return file;
}

/**
 * Bundles of earlier sources, left an hour for any process that is still starting with one; a
 * process already running has read its bundle at start and needs the file no more.
 */
async function removeStaleBundles(current: string): Promise<void> {
  const cutoff = Date.now() - STALE_BUNDLE_MS;
  for (const name of await fs.readdir(BUNDLE_CACHE_DIR)) {
    const file = path.join(BUNDLE_CACHE_DIR, name);
    if (file === current) continue;
    const stat = await fs.stat(file).catch(() => undefined);
    if (stat && stat.mtimeMs < cutoff) await fs.rm(file, { force: true });
  }
}

let bundle: Promise<WorkflowBundleOption> | undefined;

/**
 * The workflow bundle every worker and replay in this process uses: the cached file, or, when
 * the cache cannot be written (a read-only install), a bundle built in memory for this process.
 */
export function workflowBundle(log?: BundleLog): Promise<WorkflowBundleOption> {
  bundle ??= buildWorkflowBundle(log).then(
    (codePath) => ({ codePath }),
    async (err) => {
      log?.warn(`the workflow bundle cache ${BUNDLE_CACHE_DIR} cannot be used (${(err as Error).message}); bundling in memory for this process`);
      return { code: (await bundleWorkflowCode({ workflowsPath: ENTRY, logger: quietBundlerLogger })).code };
    },
  );
  return bundle;
}
