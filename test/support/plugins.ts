import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { goBuildInto, isExecutable, onPath } from '../../embedded/temporal-binary';
import { machineCacheDir } from '../../embedded/machine-cache';

/**
 * The SDK's example, official and test plugins (sdk/go/examples, sdk/go/plugins, sdk/go/internal/testplugins), built with
 * `go build` once per machine into the machine cache under a hash of the SDK's sources, so a rerun
 * costs nothing and a change to the SDK builds anew.
 */
const SDK_DIR = path.join(__dirname, '..', '..', 'sdk', 'go');
export const TEST_PLUGINS = { hello: './examples/hello', crash: './internal/testplugins/crash', duplicate: './internal/testplugins/duplicate', ticket: './plugins/ticket-notifier', postgres: './plugins/postgres' } as const;

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sources(p)));
    else if (/\.(go|mod|sum|proto)$/.test(entry.name)) out.push(p);
  }
  return out.sort();
}

/** The built plugin's path (built when missing). */
export async function builtPlugin(name: keyof typeof TEST_PLUGINS): Promise<string> {
  const hash = createHash('sha256');
  for (const file of await sources(SDK_DIR)) hash.update(`${path.relative(SDK_DIR, file)}\0`).update(await fs.readFile(file)).update('\0');
  const target = path.join(machineCacheDir(), 'cairn-sdk-plugins', hash.digest('hex').slice(0, 16), name);
  if (!(await isExecutable(target))) {
    const go = (await onPath('go')) ?? ((await isExecutable('/usr/local/go/bin/go')) ? '/usr/local/go/bin/go' : undefined);
    if (!go) throw new Error('the test plugins need the Go toolchain to build sdk/go');
    await goBuildInto(go, SDK_DIR, TEST_PLUGINS[name], target, { ...process.env, GOFLAGS: `${process.env.GOFLAGS ?? ''} -mod=mod -buildvcs=false`.trim() });
  }
  return target;
}

/** A plugins dir holding `entries` (file name -> built plugin) as copies. */
export async function pluginsDir(dir: string, entries: Record<string, keyof typeof TEST_PLUGINS>): Promise<string> {
  await fs.mkdir(dir, { recursive: true, mode: 0o755 });
  for (const [file, name] of Object.entries(entries)) {
    await fs.copyFile(await builtPlugin(name), path.join(dir, file));
    await fs.chmod(path.join(dir, file), 0o755);
  }
  return dir;
}
