import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { goBuildInto, isExecutable, onPath } from '../../embedded/temporal-binary';
import { machineCacheDir } from '../../embedded/machine-cache';

/**
 * A real terraform provider for tests (test/support/tf-provider: one resource, `cairntest_note`,
 * on the terraform-plugin-framework), so a run installs a provider from a filesystem mirror with no
 * registry reached. Built from its Go module once per machine into the machine cache under a hash
 * of its sources (seconds once Go's build cache holds the framework), like embedded/temporal-dev.
 */
const SOURCE_DIR = path.join(__dirname, 'tf-provider');
const SOURCES = ['main.go', 'go.mod', 'go.sum'];
export const TEST_PROVIDER = { source: 'cairn/cairntest', version: '0.1.0' };
/** Where each tool looks a bare `cairn/cairntest` up: OpenTofu's registry host and Terraform's; the mirror holds it under both. */
const REGISTRY_HOSTS = ['registry.opentofu.org', 'registry.terraform.io'];

async function providerBuildPath(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of SOURCES) hash.update(`${file}\0`).update(await fs.readFile(path.join(SOURCE_DIR, file))).update('\0');
  return path.join(machineCacheDir(), 'tf-provider-cairntest', hash.digest('hex').slice(0, 16), 'terraform-provider-cairntest');
}

/** Builds the provider if needed and lays it out as a filesystem mirror (the unpacked layout) under `mirror`. */
export async function fillProviderMirror(mirror: string, log: (line: string) => void = () => {}): Promise<void> {
  const target = await providerBuildPath();
  if (!(await isExecutable(target))) {
    const go = (await onPath('go')) ?? ((await isExecutable('/usr/local/go/bin/go')) ? '/usr/local/go/bin/go' : undefined);
    if (!go) throw new Error('the test provider needs the Go toolchain to build test/support/tf-provider');
    log(`building the test provider (test/support/tf-provider) into ${path.dirname(target)}`);
    await goBuildInto(go, SOURCE_DIR, '.', target, { ...process.env, GOFLAGS: `${process.env.GOFLAGS ?? ''} -buildvcs=false`.trim() });
  }
  const [namespace, type] = TEST_PROVIDER.source.split('/');
  for (const host of REGISTRY_HOSTS) {
    const dir = path.join(mirror, host, namespace, type, TEST_PROVIDER.version, 'linux_amd64');
    await fs.mkdir(dir, { recursive: true, mode: 0o755 });
    const file = path.join(dir, `terraform-provider-${type}_v${TEST_PROVIDER.version}`);
    await fs.copyFile(target, file);
    await fs.chmod(file, 0o755);
    // The run account reads the mirror in its sandbox.
    for (let d = dir; d.startsWith(mirror) && d !== path.dirname(mirror); d = path.dirname(d)) await fs.chmod(d, 0o755);
  }
}
