import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hostPatternFault } from '../core/ansible-spec';
import {
  emptyLayout,
  expandHostPattern,
  HOST_ADDRESS_VARS,
  iniHostEntries,
  iniHosts,
  InventoryError,
  layoutGroup,
  layoutHost,
  MAX_INVENTORY_HOSTS,
  resolveHostAddresses,
  type InventoryFormat,
  type InventoryHost,
} from '../core/inventory';

/**
 * The host names a stored inventory names (spec part A 4.12): INI by Cairn's parser
 * (core/inventory.ts), YAML by PyYAML's safe loader in a `python3` child (tools/ansible/yaml_hosts.py;
 * Ansible depends on PyYAML, so it is there wherever ansible is), its ranges expanded by Cairn.
 * A fault in the content is an InventoryError naming why.
 */
const YAML_HOSTS = readFileSync(path.join(__dirname, 'ansible', 'yaml_hosts.py'), 'utf8');
const YAML_TIMEOUT_MS = 60_000;

export async function inventoryHostNames(format: InventoryFormat, content: string): Promise<string[]> {
  if (format === 'ini') return iniHosts(content);
  const names = await yamlHostNames(content);
  const hosts = new Set<string>();
  for (const name of names) {
    for (const host of expandHostPattern(name, MAX_INVENTORY_HOSTS - hosts.size)) hosts.add(host);
    if (hosts.size > MAX_INVENTORY_HOSTS) throw new InventoryError(`the inventory names more than ${MAX_INVENTORY_HOSTS} hosts`);
  }
  return [...hosts];
}

/**
 * The hosts a stored inventory names, each with the `ansible_host` and `ansible_ssh_host` it
 * resolves to, its own entries over its groups' variables as Ansible merges them (core/inventory.ts
 * resolveHostAddresses), ranges expanded: what a provisioning callback matches its caller against.
 * INI by Cairn's parser, YAML's layout read by PyYAML as for the names. The answer is shared
 * (kept for the next call with the same content): it is not to be changed.
 */
export async function inventoryHostAddresses(format: InventoryFormat, content: string): Promise<readonly Readonly<InventoryHost>[]> {
  const key = createHash('sha256').update(format).update('\0').update(content).digest('base64');
  let resolved = addressCache.get(key);
  if (resolved) {
    // The most recently used last.
    addressCache.delete(key);
  } else {
    resolved = readHostAddresses(format, content);
    resolved.catch(() => addressCache.delete(key));
    if (addressCache.size >= ADDRESS_CACHE_SIZE) addressCache.delete(addressCache.keys().next().value!);
  }
  addressCache.set(key, resolved);
  return resolved;
}

/**
 * The few contents resolved last, by hash, so callbacks from many hosts of one inventory (a fleet
 * booting) read it once; a content that cannot be read is not kept.
 */
const ADDRESS_CACHE_SIZE = 4;
const addressCache = new Map<string, Promise<readonly Readonly<InventoryHost>[]>>();

async function readHostAddresses(format: InventoryFormat, content: string): Promise<InventoryHost[]> {
  if (format === 'ini') return iniHostEntries(content);
  const read = ((await readYaml(content, ['--layout'])) ?? {}) as { groups?: unknown; hosts?: unknown; error?: unknown };
  if (!Array.isArray(read.groups) || !Array.isArray(read.hosts)) throw new InventoryError(`the YAML inventory is not valid: ${typeof read.error === 'string' ? read.error : 'unreadable'}`);
  const layout = emptyLayout();
  const expand = (pattern: unknown) => expandHostPattern(String(pattern), MAX_INVENTORY_HOSTS - layout.hosts.size);
  for (const [name, hosts, children, vars] of read.groups as [string, string[], string[], Record<string, unknown>][]) {
    const group = layoutGroup(layout, name);
    for (const pattern of hosts) {
      for (const host of expand(pattern)) {
        layoutHost(layout, host, {});
        group.hosts.add(host);
      }
    }
    for (const child of children) {
      group.children.add(child);
      layoutGroup(layout, child);
    }
    for (const key of HOST_ADDRESS_VARS) if (typeof vars[key] === 'string') group.vars[key] = vars[key];
    if (typeof vars.ansible_group_priority === 'number') group.priority = vars.ansible_group_priority;
  }
  for (const [pattern, vars] of read.hosts as [string, Record<string, string>][]) for (const host of expand(pattern)) layoutHost(layout, host, vars);
  return resolveHostAddresses(layout);
}

async function yamlHostNames(content: string): Promise<string[]> {
  const answer = await readYaml(content, []);
  if (Array.isArray(answer)) return answer.map(String);
  throw new InventoryError(`the YAML inventory is not valid: ${(answer as { error?: string } | null)?.error ?? 'unreadable'}`);
}

/** What tools/ansible/yaml_hosts.py answers for `content`, parsed. */
function readYaml(content: string, args: string[]): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'python3',
      ['-I', '-c', YAML_HOSTS, ...args],
      { env: { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' }, timeout: YAML_TIMEOUT_MS, maxBuffer: 256 * 1024 * 1024 },
      (err, stdout) => {
        if (err) return reject(new InventoryError(`the YAML inventory could not be read: ${(err as Error).message.split('\n')[0]}`));
        let answer: unknown;
        try {
          answer = JSON.parse(stdout);
        } catch {
          return reject(new InventoryError('the YAML inventory could not be read'));
        }
        resolve(answer);
      },
    );
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(content);
  });
}

/** What resolving an inventory reached: its hosts, the engine that resolved it and, for Ansible's own, its version. */
export interface ResolvedInventory {
  hosts: string[];
  engine: 'ansible-inventory' | 'cairn';
  ansible_core: string | null;
}

const RESOLVE_TIMEOUT_MS = 60_000;
const TOOL_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
let coreVersion: Promise<string | null> | undefined;

function run(args: string[], cwd: string, home: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      args[0],
      args.slice(1),
      {
        cwd,
        timeout: RESOLVE_TIMEOUT_MS,
        maxBuffer: 512 * 1024 * 1024,
        env: {
          PATH: TOOL_PATH,
          HOME: home,
          LANG: 'C.UTF-8',
          ANSIBLE_NOCOLOR: '1',
          // Only the two static formats: no script, no plugin that reaches out or runs code.
          ANSIBLE_INVENTORY_ENABLED: 'ini,yaml',
          ANSIBLE_INVENTORY_UNPARSED_FAILED: 'true',
          ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED: 'true',
          ANSIBLE_LOCALHOST_WARNING: 'false',
        },
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : null) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/**
 * The ansible-core release series the inventory engine (and the ansible tool) is tested against:
 * the one Debian 12 ships, which the image and CI install. The diagnostics check reports it beside
 * the version this server has (spec part B 9.5).
 */
export const ANSIBLE_CORE_TESTED_RELEASES: readonly string[] = ['2.14'];

/** The `ansible_core` version `ansible-inventory --version` reports, or null without the tool. */
export function ansibleCoreVersion(): Promise<string | null> {
  coreVersion ??= run(['ansible-inventory', '--version'], os.tmpdir(), os.tmpdir()).then((r) => /\[core ([^\]]+)\]/.exec(r.stdout)?.[1] ?? null);
  return coreVersion;
}

/** The host names of `ansible-inventory --list` output: every group's hosts, groups walked once. */
function listedHosts(list: Record<string, unknown>): string[] {
  const hosts = new Set<string>();
  for (const [name, group] of Object.entries(list)) {
    if (name === '_meta' || !group || typeof group !== 'object') continue;
    for (const host of ((group as { hosts?: unknown }).hosts as unknown[]) ?? []) if (typeof host === 'string') hosts.add(host);
  }
  return [...hosts];
}

/**
 * Resolves an inventory's content as a launch would see it (spec part A 4.12 preview): by
 * `ansible-inventory --list` when the server has it (a `limit` then applied by
 * `ansible all --list-hosts`, which connects to nothing), restricted to the INI and YAML plugins,
 * in a private temporary directory; by Cairn's own reading otherwise (no limit then). A fault is
 * an InventoryError with the reason, the temporary path left out.
 */
export async function resolveInventory(format: InventoryFormat, content: string, limit?: string): Promise<ResolvedInventory> {
  // Checked where a limit is taken; here too, since this reads it with Ansible on the server itself.
  const fault = limit ? hostPatternFault(limit) : undefined;
  if (fault) throw new InventoryError(`the limit ${fault}`);
  const version = await ansibleCoreVersion();
  if (!version) {
    if (limit) throw new InventoryError('a limit can be evaluated only by ansible-inventory, which this server lacks');
    return { hosts: await inventoryHostNames(format, content), engine: 'cairn', ansible_core: null };
  }
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-inventory-'));
  try {
    const file = path.join(dir, format === 'yaml' ? 'inventory.yml' : 'inventory.ini');
    await fs.writeFile(file, content, { mode: 0o600 });
    const clean = (text: string) => text.split(dir).join('').replace(/\[WARNING\]:\s*/g, '').replace(/\s+/g, ' ').trim();
    // The inventory read whole first, so a fault in it is told apart from a limit matching nothing.
    const listed = await run(['ansible-inventory', `--inventory=${file}`, '--list'], dir, dir);
    if (listed.code !== 0) throw new InventoryError(`ansible-inventory could not resolve it: ${clean(listed.stderr).slice(0, 2000) || 'it failed'}`);
    let list: Record<string, unknown>;
    try {
      list = JSON.parse(listed.stdout);
    } catch {
      throw new InventoryError('ansible-inventory gave an answer that is not JSON');
    }
    if (!limit) return { hosts: listedHosts(list), engine: 'ansible-inventory', ansible_core: version };
    // ansible-inventory takes no limit: `ansible all --list-hosts` applies it as a launch would, connecting to nothing.
    const limited = await run(['ansible', 'all', `--inventory=${file}`, '--list-hosts', `--limit=${limit}`], dir, dir);
    if (limited.code !== 0) {
      if (/no hosts to target|No hosts matched/.test(limited.stderr + limited.stdout)) return { hosts: [], engine: 'ansible-inventory', ansible_core: version };
      throw new InventoryError(`the limit could not be applied: ${clean(limited.stderr).slice(0, 2000) || 'it failed'}`);
    }
    const hosts = limited.stdout
      .split('\n')
      .filter((line) => /^ {4}\S/.test(line))
      .map((line) => line.trim());
    return { hosts, engine: 'ansible-inventory', ansible_core: version };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
