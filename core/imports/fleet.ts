import { indentedVars, yamlKey } from './values';

/**
 * A fleet (the `cookbook` and `manifest` formats, spec part A 4.14 rule 2) as one YAML inventory:
 * hosts with their variables, groups with their hosts, child groups and variables.
 */

export interface FleetHost {
  name: string;
  vars: Record<string, unknown>;
  groups: string[];
}

export interface FleetGroup {
  vars: Record<string, unknown>;
  children: string[];
}

/** A name as an Ansible group name: letters, digits and `_`, not starting with a digit. */
export function groupName(prefix: string, name: string): string {
  return `${prefix}_${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
}

export function fleetInventory(hosts: FleetHost[], groups: Map<string, FleetGroup>): string {
  const lines = ['all:', hosts.length ? '  hosts:' : '  hosts: {}'];
  for (const host of hosts) lines.push(`    ${yamlKey(host.name)}:${indentedVars(host.vars, '      ')}`);
  const names = new Set([...groups.keys(), ...hosts.flatMap((h) => h.groups)]);
  lines.push(names.size ? '  children:' : '  children: {}');
  for (const name of [...names].sort()) {
    const group = groups.get(name) ?? { vars: {}, children: [] };
    const members = hosts.filter((h) => h.groups.includes(name)).map((h) => h.name);
    lines.push(`    ${yamlKey(name)}:`, `      vars:${indentedVars(group.vars, '        ')}`);
    lines.push(members.length ? '      hosts:' : '      hosts: {}', ...members.map((m) => `        ${yamlKey(m)}: {}`));
    lines.push(group.children.length ? '      children:' : '      children: {}', ...group.children.map((c) => `        ${yamlKey(c)}: {}`));
  }
  return lines.join('\n') + '\n';
}
