/**
 * Stored inventories as pure rules (spec part A 2.1, 4.12; part B 8): their formats, the host
 * names an INI inventory names, the masking of secret-looking values below admin, and the limits.
 * YAML host names are read by PyYAML (tools/ansible-inventory.ts), which Ansible itself uses.
 */

export const INVENTORY_FORMATS = ['ini', 'yaml'] as const;
export type InventoryFormat = (typeof INVENTORY_FORMATS)[number];

/** `POST` and `PUT /v1/inventories` bodies may be this large (spec part B 8); every other write 1 MiB. */
export const INVENTORY_BODY_LIMIT = 26 * 1024 * 1024;

/** The most hosts one inventory may name (a configuration error past it, spec part B 7.3). */
export const MAX_INVENTORY_HOSTS = 100_000;

/** A fault in an inventory's content, with why: the caller reads it as a 400 naming `content`. */
export class InventoryError extends Error {}

/**
 * The format an inventory is in when its writer did not say: YAML when its first meaningful line
 * is a document start, a flow mapping or a `key:` line; INI otherwise.
 */
export function detectFormat(content: string): InventoryFormat {
  for (const raw of content.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    return line === '---' || line.startsWith('{') || /^[^\s=[\]]+:\s*(#.*)?$/.test(line) || /^[^\s=[\]]+:\s+\S/.test(line) ? 'yaml' : 'ini';
  }
  return 'ini';
}

/**
 * Expands Ansible's host ranges (`web[01:03].example`, `db-[a:c]`, `h[1:10:2]`) into names,
 * refusing more than `cap` of them.
 */
export function expandHostPattern(pattern: string, cap: number): string[] {
  const match = /^(.*?)\[([0-9a-zA-Z]+):([0-9a-zA-Z]+)(?::([0-9]+))?\](.*)$/.exec(pattern);
  if (!match) return [pattern];
  const [, head, from, to, stepText, tail] = match;
  const step = stepText ? Number(stepText) : 1;
  if (!(step >= 1)) throw new InventoryError(`host range ${pattern} has a step that is not a positive number`);
  const names: string[] = [];
  const rest = (piece: string) => {
    for (const name of expandHostPattern(`${head}${piece}${tail}`, cap - names.length)) {
      names.push(name);
      if (names.length > cap) throw new InventoryError(`the inventory names more than ${MAX_INVENTORY_HOSTS} hosts`);
    }
  };
  if (/^[0-9]+$/.test(from) && /^[0-9]+$/.test(to)) {
    const start = Number(from);
    const end = Number(to);
    if (end < start) throw new InventoryError(`host range ${pattern} ends before it starts`);
    if ((end - start) / step + 1 > cap) throw new InventoryError(`the inventory names more than ${MAX_INVENTORY_HOSTS} hosts`);
    const width = from.length > 1 && from.startsWith('0') ? from.length : 0;
    for (let n = start; n <= end; n += step) rest(width ? String(n).padStart(width, '0') : String(n));
  } else if (/^[a-zA-Z]$/.test(from) && /^[a-zA-Z]$/.test(to)) {
    const start = from.charCodeAt(0);
    const end = to.charCodeAt(0);
    if (end < start) throw new InventoryError(`host range ${pattern} ends before it starts`);
    for (let c = start; c <= end; c += step) rest(String.fromCharCode(c));
  } else {
    throw new InventoryError(`host range ${pattern} is neither numeric nor alphabetic`);
  }
  return names;
}

/** A host entry's name without its `:port` (INI `badwolf.example.com:5309`); IPv6 literals keep theirs. */
function withoutPort(entry: string): string {
  const m = /^([^:]+):([0-9]+)$/.exec(entry);
  return m ? m[1] : entry;
}

/**
 * A host of an inventory with the addresses its variables resolve to (spec part A 4.6: a
 * provisioning callback matches its caller to a host by these): `ansible_host`, and the older
 * `ansible_ssh_host`, as Ansible merges them: the host's own entries over its groups' variables.
 */
export interface InventoryHost {
  name: string;
  ansible_host?: string;
  ansible_ssh_host?: string;
}

/** The host variables that name the address a host is reached at. */
export const HOST_ADDRESS_VARS = ['ansible_host', 'ansible_ssh_host'] as const;

/** Whether `key` is one of HOST_ADDRESS_VARS. */
export function isAddressVar(key: string): key is (typeof HOST_ADDRESS_VARS)[number] {
  return (HOST_ADDRESS_VARS as readonly string[]).includes(key);
}

/** The address variables a host entry or a group's vars set. */
export type AddressVars = Partial<Record<(typeof HOST_ADDRESS_VARS)[number], string>>;

/** A group as a host's address needs it: its direct hosts and child groups, its address variables and `ansible_group_priority`. */
export interface LayoutGroup {
  hosts: Set<string>;
  children: Set<string>;
  vars: AddressVars;
  priority?: number;
}

/**
 * What a host's address is resolved from: each host's own address variables (its entries merged
 * in the order Ansible reads them, a later one overriding), hosts in first-seen order; each group
 * by name (a group named in several places merged, a later place's variables overriding).
 */
export interface InventoryLayout {
  hosts: Map<string, AddressVars>;
  groups: Map<string, LayoutGroup>;
}

export function emptyLayout(): InventoryLayout {
  return { hosts: new Map(), groups: new Map() };
}

/** The group named `name` of a layout, added empty when it is not there yet. */
export function layoutGroup(layout: InventoryLayout, name: string): LayoutGroup {
  let group = layout.groups.get(name);
  if (!group) {
    group = { hosts: new Set(), children: new Set(), vars: {} };
    layout.groups.set(name, group);
  }
  return group;
}

/** Adds a host entry's name to a layout (first-seen order kept) with the address variables it sets. */
export function layoutHost(layout: InventoryLayout, name: string, vars: Partial<Record<string, string>>): void {
  let host = layout.hosts.get(name);
  if (!host) {
    host = {};
    layout.hosts.set(name, host);
    if (layout.hosts.size > MAX_INVENTORY_HOSTS) throw new InventoryError(`the inventory names more than ${MAX_INVENTORY_HOSTS} hosts`);
  }
  for (const key of HOST_ADDRESS_VARS) if (vars[key] !== undefined && vars[key] !== '') host[key] = vars[key];
}

/**
 * Each host of a layout with the addresses it resolves to, as Ansible resolves a host's variables:
 * its groups' variables (every group it is in, their ancestors, and `all`; a host is in
 * `ungrouped` when, and only when, it is in no other group but `all`) merged from the shallowest group to the deepest (a group's depth its
 * longest path from `all`, which is 0; a group no other names as a child is a child of `all`),
 * then by `ansible_group_priority` (default 1), then by name, a later one overriding; the host's own
 * entries over them all. `ansible_host` and `ansible_ssh_host` resolve apart. A group cycle (which
 * Ansible refuses) lends its groups' variables to no host.
 */
export function resolveHostAddresses(layout: InventoryLayout): InventoryHost[] {
  const sets = (group: LayoutGroup | undefined) => group !== undefined && HOST_ADDRESS_VARS.some((k) => group.vars[k] !== undefined);
  if (![...layout.groups.values()].some(sets)) return [...layout.hosts].map(([name, vars]) => ({ name, ...vars }));

  const groups = layout.groups;
  const childrenOf = new Map<string, string[]>();
  const parentCount = new Map<string, number>();
  for (const [name, group] of groups) {
    for (const child of group.children) {
      if (child === 'all' || child === name) continue;
      (childrenOf.get(name) ?? childrenOf.set(name, []).get(name)!).push(child);
      parentCount.set(child, (parentCount.get(child) ?? 0) + 1);
    }
  }
  const roots = [...new Set([...groups.keys(), ...parentCount.keys(), 'ungrouped'])].filter((name) => name !== 'all' && !parentCount.has(name));
  childrenOf.set('all', [...(childrenOf.get('all') ?? []), ...roots]);
  for (const root of roots) parentCount.set(root, (parentCount.get(root) ?? 0) + 1);

  // Parents before children: each group's depth, and the groups setting an address among it and its ancestors.
  const depth = new Map<string, number>([['all', 0]]);
  const lineage = new Map<string, Set<string>>([['all', new Set(sets(groups.get('all')) ? ['all'] : [])]]);
  const queue = ['all'];
  for (let i = 0; i < queue.length; i++) {
    const parent = queue[i];
    for (const child of childrenOf.get(parent) ?? []) {
      depth.set(child, Math.max(depth.get(child) ?? 0, depth.get(parent)! + 1));
      const inherited = lineage.get(child) ?? new Set<string>();
      for (const g of lineage.get(parent)!) inherited.add(g);
      lineage.set(child, inherited);
      const left = parentCount.get(child)! - 1;
      parentCount.set(child, left);
      if (left === 0) {
        if (sets(groups.get(child))) inherited.add(child);
        queue.push(child);
      }
    }
  }
  const ready = new Set(queue);

  const memberOf = new Map<string, string[]>();
  for (const [name, group] of groups) for (const host of group.hosts) (memberOf.get(host) ?? memberOf.set(host, []).get(host)!).push(name);
  const order = (a: string, b: string) => depth.get(a)! - depth.get(b)! || (groups.get(a)!.priority ?? 1) - (groups.get(b)!.priority ?? 1) || (a < b ? -1 : a > b ? 1 : 0);
  // Hosts in the same groups share what those groups resolve to.
  const merged = new Map<string, AddressVars>();
  return [...layout.hosts].map(([name, own]) => {
    let direct = (memberOf.get(name) ?? []).filter((g) => ready.has(g));
    // As Ansible reconciles: `ungrouped` holds exactly the hosts in no other group.
    direct = direct.some((g) => g !== 'all' && g !== 'ungrouped') ? direct.filter((g) => g !== 'ungrouped') : [...direct, 'ungrouped', 'all'];
    const key = direct.join('\n');
    let fromGroups = merged.get(key);
    if (!fromGroups) {
      const from = new Set<string>();
      for (const g of direct) for (const setter of lineage.get(g) ?? []) from.add(setter);
      fromGroups = Object.assign({}, ...[...from].sort(order).map((g) => groups.get(g)!.vars)) as AddressVars;
      merged.set(key, fromGroups);
    }
    return { name, ...fromGroups, ...own };
  });
}

/**
 * The `key=value` words of an INI host line after its name, as Ansible's INI plugin splits them
 * (shell-like words, a word starting with `#` ends the line); quotes around a value are removed.
 */
export function iniHostVars(rest: string): Record<string, string> {
  const vars: Record<string, string> = Object.create(null);
  // One shell-like word: runs of quoted strings and unquoted characters, up to whitespace.
  const wordAt = /\s*((?:"(?:[^"\\]|\\.)*"|'[^']*'|[^\s"'])+)/y;
  const unquote = (v: string) =>
    v.replace(/"((?:[^"\\]|\\.)*)"|'([^']*)'/g, (_all, dq: string | undefined, sq: string | undefined) => (dq !== undefined ? dq.replace(/\\(.)/g, '$1') : (sq ?? '')));
  for (;;) {
    const found = wordAt.exec(rest);
    if (!found) break;
    const text = found[1];
    if (text.startsWith('#')) break;
    const eq = text.indexOf('=');
    if (eq > 0) vars[text.slice(0, eq)] = unquote(text.slice(eq + 1));
  }
  return vars;
}

/** A `:vars` line's value as Ansible's INI plugin reads it: trimmed, quotes around the whole value removed. */
function iniVarValue(text: string): string {
  const value = text.trim();
  const quoted = /^"((?:[^"\\]|\\.)*)"$|^'([^']*)'$/.exec(value);
  return quoted ? (quoted[1] !== undefined ? quoted[1].replace(/\\(.)/g, '$1') : quoted[2]) : value;
}

/**
 * An INI inventory's layout (InventoryLayout): host lines of `[group]` sections and before any
 * section (those in `ungrouped`), ranges expanded, each host with the addresses its host lines set;
 * with `groups`, also each group's hosts, `:children` and the address variables and priority its
 * `:vars` set. A host line's first word is the host; `key=value` words after it are its variables.
 */
export function iniLayout(content: string, groups = true): InventoryLayout {
  const layout = emptyLayout();
  let section: 'hosts' | 'vars' | 'children' = 'hosts';
  let group = layoutGroup(layout, 'ungrouped');
  const lines = content.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    if (line.startsWith('[')) {
      const header = /^\[([^\]]+)\]\s*([#;].*)?$/.exec(line);
      if (!header) throw new InventoryError(`line ${i + 1}: a section header must be [name], [name:vars] or [name:children]`);
      const [, name] = header;
      const suffix = name.includes(':') ? name.slice(name.lastIndexOf(':') + 1) : '';
      if (suffix && suffix !== 'vars' && suffix !== 'children') {
        throw new InventoryError(`line ${i + 1}: section [${name}] must end in :vars or :children, or name a group`);
      }
      section = suffix === 'vars' ? 'vars' : suffix === 'children' ? 'children' : 'hosts';
      if (groups) group = layoutGroup(layout, suffix ? name.slice(0, name.lastIndexOf(':')) : name);
      continue;
    }
    if (section === 'vars') {
      const eq = line.indexOf('=');
      if (!groups || eq <= 0) continue;
      const key = line.slice(0, eq).trim();
      const value = iniVarValue(line.slice(eq + 1));
      if (isAddressVar(key)) {
        if (value === '') delete group.vars[key];
        else group.vars[key] = value;
      } else if (key === 'ansible_group_priority' && /^-?[0-9]+$/.test(value)) {
        group.priority = Number(value);
      }
      continue;
    }
    if (section === 'children') {
      if (groups) {
        const child = line.split(/\s+/)[0];
        group.children.add(child);
        layoutGroup(layout, child);
      }
      continue;
    }
    const first = line.split(/\s+/)[0];
    if (first.includes('=')) throw new InventoryError(`line ${i + 1}: a host line starts with the host's name, not a variable`);
    const rest = line.slice(first.length);
    const vars = /ansible_(ssh_)?host=/.test(rest) ? iniHostVars(rest) : {};
    for (const name of expandHostPattern(withoutPort(first), MAX_INVENTORY_HOSTS - layout.hosts.size)) {
      layoutHost(layout, name, vars);
      if (groups) group.hosts.add(name);
    }
  }
  return layout;
}

/**
 * The hosts an INI inventory names, in first-seen order, each with the addresses it resolves to
 * (resolveHostAddresses): its host lines' (a later line for the same host overriding an earlier
 * one) over its groups' `:vars`.
 */
export function iniHostEntries(content: string): InventoryHost[] {
  return resolveHostAddresses(iniLayout(content));
}

/** The host names an INI inventory names, in first-seen order. */
export function iniHosts(content: string): string[] {
  return [...iniLayout(content, false).hosts.keys()];
}

/** A variable name whose value looks secret: passwords, secrets, tokens, keys and credentials. */
export const SECRET_NAME = /(pass|secret|token|credential|private|api_?key|_key$|^key$)/i;
export const INVENTORY_MASK = '[masked]';

/**
 * The content with secret-looking values masked, as a reader below admin sees it: INI
 * `name=value` words and YAML `name: value` lines whose name looks secret (SECRET_NAME), and
 * every `!vault` block. Everything else, including the host names and layout, is kept.
 */
export function maskInventory(content: string, format: InventoryFormat): string {
  const lines = content.split('\n');
  if (format === 'ini') {
    return lines
      .map((line) =>
        line.replace(/([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)("(?:[^"\\]|\\.)*"|'[^']*'|\S+)/g, (all, name: string, eq: string) =>
          SECRET_NAME.test(name) ? `${name}${eq}${INVENTORY_MASK}` : all,
        ),
      )
      .join('\n');
  }
  const out: string[] = [];
  let blockIndent = -1;
  for (const line of lines) {
    const indent = line.length - line.trimStart().length;
    if (blockIndent >= 0) {
      if (line.trim() === '' || indent > blockIndent) continue;
      blockIndent = -1;
    }
    const m = /^(\s*-?\s*)(["']?)([A-Za-z_][A-Za-z0-9_.-]*)\2(\s*:\s+)(.*)$/.exec(line);
    if (m && (SECRET_NAME.test(m[3]) || m[5].startsWith('!vault'))) {
      const [, lead, quote, name, colon, value] = m;
      out.push(`${lead}${quote}${name}${quote}${colon}${INVENTORY_MASK}`);
      if (/^(!vault\s*)?[|>][-+0-9]*\s*$/.test(value.trim())) blockIndent = indent;
      continue;
    }
    out.push(line);
  }
  return out.join('\n');
}

/** A `source_vars` position a read below admin masks: a secret-looking key, but not a `keyed_groups` entry's `key` option. */
function maskedAt(path: readonly (string | number)[]): boolean {
  const key = path[path.length - 1];
  if (typeof key !== 'string' || !SECRET_NAME.test(key)) return false;
  // The constructed plugin's `keyed_groups[i].key` is the expression a group name is made from, not a value.
  return !(path.length === 3 && path[0] === 'keyed_groups' && key === 'key');
}

/** A `source_vars` path as an error names it: `source_vars.compose.db_password`, `source_vars.keyed_groups[0].prefix`. */
function sourceVarsField(path: readonly (string | number)[]): string {
  return path.reduce<string>((field, part) => (typeof part === 'number' ? `${field}[${part}]` : `${field}.${part}`), 'source_vars');
}

const isMapping = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * A constructed inventory's `source_vars` (the constructed plugin's options, and whatever variables
 * its writer put there) as a reader below admin sees them: the value under every secret-looking
 * key (SECRET_NAME, the rule stored content is masked by), at any depth and whatever it holds, is
 * INVENTORY_MASK. A `keyed_groups` entry's `key`, the plugin's own option, is kept.
 */
export function maskSourceVars(vars: Record<string, unknown>): Record<string, unknown> {
  const walk = (value: unknown, path: (string | number)[]): unknown => {
    if (path.length && maskedAt(path)) return INVENTORY_MASK;
    if (Array.isArray(value)) return value.map((v, i) => walk(v, [...path, i]));
    if (isMapping(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, [...path, k])]));
    return value;
  };
  return walk(vars, []) as Record<string, unknown>;
}

/**
 * The `source_vars` an edit stores: where it sends INVENTORY_MASK at a position a masked read
 * shows it (maskSourceVars), the stored value there is kept, so a read sent back changes nothing
 * it could not see. The mask where nothing is stored is refused with the field it is at
 * (`unknown`): there is nothing to keep, and storing the mask as the value would surprise.
 */
export function keepMaskedSourceVars(
  sent: Record<string, unknown>,
  stored: Record<string, unknown> | null | undefined,
): { vars: Record<string, unknown> } | { unknown: string } {
  let unknown: string | undefined;
  const walk = (value: unknown, kept: unknown, path: (string | number)[]): unknown => {
    if (path.length && value === INVENTORY_MASK && maskedAt(path)) {
      if (kept === undefined) unknown ??= sourceVarsField(path);
      return kept;
    }
    if (Array.isArray(value)) return value.map((v, i) => walk(v, Array.isArray(kept) ? kept[i] : undefined, [...path, i]));
    if (isMapping(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, isMapping(kept) && Object.hasOwn(kept, k) ? kept[k] : undefined, [...path, k])]));
    return value;
  };
  const vars = walk(sent, stored ?? undefined, []) as Record<string, unknown>;
  return unknown !== undefined ? { unknown } : { vars };
}

/** The hosts a composed inventory reaches, and for a constructed one its groups. */
export interface ComposedHosts {
  hosts: string[];
  groups?: Record<string, string[]>;
  /** The ansible-core version that resolved it. */
  ansible_core: string | null;
}

