import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import os from 'node:os';
import { hostPatternFault } from '../core/ansible-spec';
import { iniHosts, iniLayout, InventoryError, resolveHostAddresses, type InventoryFormat, type InventoryHost, type InventoryLayout } from '../core/inventory';
import { inventoryFile } from '../tools/ansible';
import {
  listedHosts,
  listHostsOutput,
  NO_HOSTS_MATCHED,
  STATIC_INVENTORY_ENV,
  YAML_HOSTS,
  yamlHostNames,
  yamlLayout,
  type ResolvedInventory,
} from '../tools/ansible-inventory';
import { JobFailed, runSandboxedJob, type JobSandbox } from './sandboxed-job';

/**
 * An inventory's content read by Ansible's own parts (spec part A 4.12), each a sandboxed job
 * (activities/sandboxed-job.ts) with no network: PyYAML for a YAML inventory's host names and
 * addresses, `ansible-inventory --list` and `ansible all --list-hosts` for a preview. An INI
 * inventory's names and addresses are Cairn's own reading (core/inventory.ts), run nowhere.
 */

const JOB_TIMEOUT_MS = 60_000;
/** The most an answer about an inventory of at most 26 MiB and 100,000 hosts may print. */
const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

/** A job's message with its scratch dir left out: the reason a person reads names the inventory, not the server's paths. */
function reasonOf(where: JobSandbox, err: JobFailed): string {
  const root = where.workRoot.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return err.message.replace(new RegExp(`${root}/[^/\\s]+/`, 'g'), '').replace(/\[WARNING\]:\s*/g, '').replace(/\s+/g, ' ').trim();
}

/** What yaml_hosts.py answers for `content` (`--layout` with `layout`), parsed. */
async function readYaml(where: JobSandbox, content: string, layout: boolean): Promise<unknown> {
  let out: Buffer;
  try {
    out = await runSandboxedJob(where, {
      what: 'reading the YAML inventory',
      name: 'inventory-yaml',
      argv: ['sh', '-c', 'exec python3 -I -c "$1" $2 < inventory.yml', 'cairn-yaml', YAML_HOSTS, layout ? '--layout' : ''],
      files: { 'inventory.yml': content },
      timeoutMs: JOB_TIMEOUT_MS,
      maxOutputBytes: MAX_ANSWER_BYTES,
      network: 'none',
    });
  } catch (err) {
    if (err instanceof JobFailed) throw new InventoryError(`the YAML inventory could not be read: ${reasonOf(where, err).split('\n')[0]}`);
    throw err;
  }
  try {
    return JSON.parse(out.toString('utf8'));
  } catch {
    throw new InventoryError('the YAML inventory could not be read');
  }
}

/** The host names a stored inventory names, ranges expanded; a fault in the content is an InventoryError naming why. */
export async function inventoryHostNames(where: JobSandbox, format: InventoryFormat, content: string): Promise<string[]> {
  if (format === 'ini') return iniHosts(content);
  return yamlHostNames(await readYaml(where, content, false));
}

/** A stored inventory as a provisioning callback reads it: its hosts and groups, and each host with the addresses it resolves to. */
export interface InventoryReading {
  layout: InventoryLayout;
  hosts: readonly Readonly<InventoryHost>[];
}

/**
 * The few contents resolved last, by hash, so callbacks from many hosts of one inventory (a fleet
 * booting) read it once; a content that cannot be read is not kept.
 */
const READING_CACHE_SIZE = 4;
const readingCache = new Map<string, Promise<Readonly<InventoryReading>>>();

/**
 * A stored inventory's hosts and groups (its layout: what a callback's limit is evaluated over) and
 * each host with the `ansible_host` and `ansible_ssh_host` it resolves to (what a callback matches
 * its caller against). The answer is shared (kept for the next call with the same content): it is
 * not to be changed.
 */
export async function inventoryReading(where: JobSandbox, format: InventoryFormat, content: string): Promise<Readonly<InventoryReading>> {
  if (format === 'ini') {
    const layout = iniLayout(content);
    return { layout, hosts: resolveHostAddresses(layout) };
  }
  const key = createHash('sha256').update(content).digest('base64');
  let reading = readingCache.get(key);
  if (reading) {
    // The most recently used last.
    readingCache.delete(key);
  } else {
    reading = readYaml(where, content, true).then((answer) => {
      const layout = yamlLayout(answer);
      return { layout, hosts: resolveHostAddresses(layout) };
    });
    reading.catch(() => readingCache.delete(key));
    if (readingCache.size >= READING_CACHE_SIZE) readingCache.delete(readingCache.keys().next().value!);
  }
  readingCache.set(key, reading);
  return reading;
}

/** The hosts a stored inventory names, each with the addresses it resolves to (inventoryReading). */
export async function inventoryHostAddresses(where: JobSandbox, format: InventoryFormat, content: string): Promise<readonly Readonly<InventoryHost>[]> {
  return (await inventoryReading(where, format, content)).hosts;
}

let coreVersion: Promise<string | null> | undefined;

/** The `ansible_core` version `ansible-inventory --version` reports, or null without the tool. It reads nothing of a user's. */
export function ansibleCoreVersion(): Promise<string | null> {
  coreVersion ??= new Promise((resolve) => {
    execFile('ansible-inventory', ['--version'], { cwd: os.tmpdir(), timeout: JOB_TIMEOUT_MS, env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: os.tmpdir(), LANG: 'C.UTF-8' } }, (err, stdout) =>
      resolve(err ? null : (/\[core ([^\]]+)\]/.exec(String(stdout))?.[1] ?? null)),
    );
  });
  return coreVersion;
}

/**
 * Resolves an inventory's content as a launch would see it (spec part A 4.12 preview): by
 * `ansible-inventory --list` when the server has it, a `limit` then applied by
 * `ansible all --list-hosts` (which connects to nothing); by Cairn's own reading otherwise (no
 * limit then). A fault is an InventoryError with the reason.
 */
export async function resolveInventory(where: JobSandbox, format: InventoryFormat, content: string, limit?: string): Promise<ResolvedInventory> {
  // Checked where a limit is taken; here too, the one place a limit reaches Ansible outside a run.
  const fault = limit ? hostPatternFault(limit) : undefined;
  if (fault) throw new InventoryError(`the limit ${fault}`);
  const version = await ansibleCoreVersion();
  if (!version) {
    if (limit) throw new InventoryError('a limit can be evaluated only by ansible-inventory, which this server lacks');
    return { hosts: await inventoryHostNames(where, format, content), engine: 'cairn', ansible_core: null };
  }
  const file = inventoryFile(format);
  const job = { files: { [file]: content }, env: STATIC_INVENTORY_ENV, timeoutMs: JOB_TIMEOUT_MS, maxOutputBytes: MAX_ANSWER_BYTES, network: 'none' as const };
  // The inventory read whole first, so a fault in it is told apart from a limit matching nothing.
  let listed: Buffer;
  try {
    listed = await runSandboxedJob(where, { ...job, what: 'ansible-inventory', name: 'inventory-list', argv: ['ansible-inventory', `--inventory=${file}`, '--list'] });
  } catch (err) {
    if (err instanceof JobFailed) throw new InventoryError(`ansible-inventory could not resolve it: ${reasonOf(where, err).slice(0, 2000)}`);
    throw err;
  }
  let list: Record<string, unknown>;
  try {
    list = JSON.parse(listed.toString('utf8'));
  } catch {
    throw new InventoryError('ansible-inventory gave an answer that is not JSON');
  }
  if (!limit) return { hosts: listedHosts(list), engine: 'ansible-inventory', ansible_core: version };
  try {
    const limited = await runSandboxedJob(where, { ...job, what: 'ansible', name: 'inventory-limit', argv: ['ansible', 'all', `--inventory=${file}`, '--list-hosts', `--limit=${limit}`] });
    return { hosts: listHostsOutput(limited.toString('utf8')), engine: 'ansible-inventory', ansible_core: version };
  } catch (err) {
    if (!(err instanceof JobFailed)) throw err;
    if (NO_HOSTS_MATCHED.test(err.printed)) return { hosts: [], engine: 'ansible-inventory', ansible_core: version };
    throw new InventoryError(`the limit could not be applied: ${reasonOf(where, err).slice(0, 2000)}`);
  }
}
