import { readFileSync } from 'node:fs';
import path from 'node:path';
import { installRoot } from '../core/install-root';
import {
  emptyLayout,
  expandHostPattern,
  HOST_ADDRESS_VARS,
  InventoryError,
  layoutGroup,
  layoutHost,
  MAX_INVENTORY_HOSTS,
  type InventoryLayout,
} from '../core/ansible/inventory';

/**
 * How Cairn reads an inventory with Ansible's own parts, as pure rules: the PyYAML script that
 * names a YAML inventory's hosts (tools/ansible/yaml_hosts.py; Ansible depends on PyYAML, so it is
 * there wherever ansible is), the environment `ansible-inventory` and `ansible --list-hosts` run
 * with, and how their answers are read. They run as sandboxed jobs (runtime/inventory-jobs.ts).
 */
export const YAML_HOSTS = readFileSync(path.join(installRoot(__dirname, 1), 'tools', 'ansible', 'yaml_hosts.py'), 'utf8');

/**
 * The ansible-core release series the inventory engine (and the ansible tool) is tested against:
 * the one Debian 12 ships, which the image and CI install. The diagnostics check reports it beside
 * the version this server has (spec part B 9.5).
 */
export const ANSIBLE_CORE_TESTED_RELEASES: readonly string[] = ['2.14'];

/** The environment Ansible reads an inventory in: only the INI and YAML plugins (no script, nothing that reaches out), unparsed input an error. */
export const STATIC_INVENTORY_ENV: Record<string, string> = {
  ANSIBLE_NOCOLOR: '1',
  ANSIBLE_INVENTORY_ENABLED: 'ini,yaml',
  ANSIBLE_INVENTORY_UNPARSED_FAILED: 'true',
  ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED: 'true',
  ANSIBLE_LOCALHOST_WARNING: 'false',
};

/** What resolving an inventory reached: its hosts, the engine that resolved it and, for Ansible's own, its version. */
export interface ResolvedInventory {
  hosts: string[];
  engine: 'ansible-inventory' | 'cairn';
  ansible_core: string | null;
}

/** The host names of yaml_hosts.py's answer, ranges expanded; a fault is an InventoryError naming why. */
export function yamlHostNames(answer: unknown): string[] {
  if (!Array.isArray(answer)) throw new InventoryError(`the YAML inventory is not valid: ${(answer as { error?: string } | null)?.error ?? 'unreadable'}`);
  const hosts = new Set<string>();
  for (const name of answer.map(String)) {
    for (const host of expandHostPattern(name, MAX_INVENTORY_HOSTS - hosts.size)) hosts.add(host);
    if (hosts.size > MAX_INVENTORY_HOSTS) throw new InventoryError(`the inventory names more than ${MAX_INVENTORY_HOSTS} hosts`);
  }
  return [...hosts];
}

/** yaml_hosts.py's `--layout` answer as a layout (core/inventory.ts): each host, each group's hosts and children, ranges expanded. */
export function yamlLayout(answer: unknown): InventoryLayout {
  const read = (answer ?? {}) as { groups?: unknown; hosts?: unknown; error?: unknown };
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
  return layout;
}

/** The host names of `ansible-inventory --list` output: every group's hosts, groups walked once. */
export function listedHosts(list: Record<string, unknown>): string[] {
  const hosts = new Set<string>();
  for (const [name, group] of Object.entries(list)) {
    if (name === '_meta' || !group || typeof group !== 'object') continue;
    for (const host of ((group as { hosts?: unknown }).hosts as unknown[]) ?? []) if (typeof host === 'string') hosts.add(host);
  }
  return [...hosts];
}

/** The hosts `ansible all --list-hosts` prints, one a line indented by four spaces. */
export function listHostsOutput(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => /^ {4}\S/.test(line))
    .map((line) => line.trim());
}

/** Whether Ansible's words say a limit or filter matched no host (it exits 1 for that too). */
export const NO_HOSTS_MATCHED = /no hosts matched|no hosts to target/i;
