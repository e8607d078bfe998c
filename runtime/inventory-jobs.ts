import { execFile } from 'node:child_process';
import os from 'node:os';
import { hostPatternFault } from '../core/ansible/ansible-spec';
import { iniHosts, INVENTORY_BODY_LIMIT, InventoryError, type ComposedHosts, type InventoryFormat } from '../core/ansible/inventory';
import { composedInputFile, CONSTRUCTED_FILE, constructedFile, inventoryFile } from '../tools/ansible';
import {
  listedHosts,
  listHostsOutput,
  NO_HOSTS_MATCHED,
  STATIC_INVENTORY_ENV,
  YAML_HOSTS,
  yamlHostNames,
  type ResolvedInventory,
} from '../tools/ansible-inventory';
import { JobFailed, runSandboxedJob, type JobSandbox } from './sandboxed-job';

/**
 * An inventory's content read by Ansible's own parts (spec part A 4.12), each a sandboxed job
 * (runtime/sandboxed-job.ts) with no network: PyYAML for a YAML inventory's host names and
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

/**
 * What PyYAML (tools/ansible/yaml_hosts.py `--layout`) reads of a YAML inventory: each group's
 * hosts, children and address variables, and each host entry's; a layout is made of it
 * (tools/ansible-inventory.ts yamlLayout) where it is read.
 */
export function yamlLayoutAnswer(where: JobSandbox, content: string): Promise<unknown> {
  return readYaml(where, content, true);
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

/** A smart or constructed inventory over its inputs' contents (services/composed-inventories.ts), as Ansible resolves it. */
export interface ComposedJob {
  kind: 'smart' | 'constructed';
  inputs: { format: InventoryFormat; content: string }[];
  host_filter?: string;
  source_vars?: Record<string, unknown>;
}

/**
 * Resolves a smart inventory (`ansible all --list-hosts --limit=<filter>` over its inputs, which
 * connects to nothing) or a constructed one (`ansible-inventory --list` over its inputs and the
 * constructed plugin's file: `compose` and `groups` are Jinja2, lookups included, so this runs in
 * the sandbox only). Only the INI, YAML and constructed inventory plugins are enabled. Ansible's
 * refusal is a JobFailed with its words.
 */
export async function resolveComposed(where: JobSandbox, job: ComposedJob): Promise<ComposedHosts> {
  const files: Record<string, string> = {};
  const inventoryArgs: string[] = [];
  job.inputs.forEach((input, i) => {
    const name = composedInputFile(i, input.format);
    files[name] = input.content;
    inventoryArgs.push(`--inventory=${name}`);
  });
  const base = { files, timeoutMs: JOB_TIMEOUT_MS, maxOutputBytes: MAX_ANSWER_BYTES, network: 'none' as const, name: `preview-${job.kind}` };
  if (job.kind === 'smart') {
    // The filter is an argument of its own: no shell reads it.
    const out = await runSandboxedJob(where, { ...base, what: 'ansible', argv: ['ansible', 'all', ...inventoryArgs, '--list-hosts', `--limit=${job.host_filter ?? ''}`], env: STATIC_INVENTORY_ENV }).catch((err: unknown) => {
      if (err instanceof JobFailed && NO_HOSTS_MATCHED.test(err.printed)) return Buffer.alloc(0);
      throw err;
    });
    return { hosts: listHostsOutput(out.toString('utf8')), ansible_core: await ansibleCoreVersion() };
  }
  files[CONSTRUCTED_FILE] = constructedFile(job.source_vars ?? {});
  const out = await runSandboxedJob(where, {
    ...base,
    what: 'ansible-inventory',
    argv: ['ansible-inventory', ...inventoryArgs, `--inventory=${CONSTRUCTED_FILE}`, '--list'],
    env: { ...STATIC_INVENTORY_ENV, ANSIBLE_INVENTORY_ENABLED: 'ini,yaml,constructed' },
  });
  let list: Record<string, unknown>;
  try {
    list = JSON.parse(out.toString('utf8'));
  } catch {
    throw new InventoryError('ansible-inventory gave an answer that is not JSON');
  }
  const hosts = new Set<string>();
  const groups: Record<string, string[]> = {};
  for (const [name, group] of Object.entries(list)) {
    if (name === '_meta' || !group || typeof group !== 'object') continue;
    const members = ((group as { hosts?: unknown }).hosts as unknown[] | undefined)?.filter((h): h is string => typeof h === 'string') ?? [];
    for (const host of members) hosts.add(host);
    if (members.length) groups[name] = members;
  }
  return { hosts: [...hosts], groups, ansible_core: await ansibleCoreVersion() };
}

/** A dynamic inventory source's script run with `--list` (spec part A 4.12): its standard output. */
export async function runInventoryScript(where: JobSandbox, job: { name: string; script: string; timeoutSeconds: number }, signal?: AbortSignal): Promise<string> {
  const out = await runSandboxedJob(where, {
    what: 'the script',
    name: job.name,
    // Executable for the run account: its files are written 0600, so the shell makes it so first.
    argv: ['sh', '-c', 'chmod 700 inventory-script && exec ./inventory-script --list'],
    files: { 'inventory-script': job.script },
    timeoutMs: job.timeoutSeconds * 1000,
    maxOutputBytes: INVENTORY_BODY_LIMIT,
    signal,
  });
  return out.toString('utf8');
}
