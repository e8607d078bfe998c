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
 * A host of an inventory with the addresses its own variables give it (spec part A 4.6: a
 * provisioning callback matches its caller to a host by these): `ansible_host`, and the older
 * `ansible_ssh_host`, when the host's entry sets them. Group variables are not read.
 */
export interface InventoryHost {
  name: string;
  ansible_host?: string;
  ansible_ssh_host?: string;
}

/** The host variables that name the address a host is reached at. */
export const HOST_ADDRESS_VARS = ['ansible_host', 'ansible_ssh_host'] as const;

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

/**
 * The hosts an INI inventory names, in first-seen order, each with the addresses its host lines
 * set (a later line for the same host overriding an earlier one, as Ansible merges them): host
 * lines of `[group]` sections and before any section, ranges expanded; `:vars` and `:children`
 * sections name none. A host line's first word is the host; `key=value` words after it are its
 * variables.
 */
export function iniHostEntries(content: string): InventoryHost[] {
  const seen = new Map<string, InventoryHost>();
  let section: 'hosts' | 'other' = 'hosts';
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
      section = suffix ? 'other' : 'hosts';
      continue;
    }
    if (section !== 'hosts') continue;
    const first = line.split(/\s+/)[0];
    if (first.includes('=')) throw new InventoryError(`line ${i + 1}: a host line starts with the host's name, not a variable`);
    const rest = line.slice(first.length);
    const vars = /ansible_(ssh_)?host=/.test(rest) ? iniHostVars(rest) : {};
    for (const name of expandHostPattern(withoutPort(first), MAX_INVENTORY_HOSTS - seen.size)) {
      let host = seen.get(name);
      if (!host) {
        host = { name };
        seen.set(name, host);
        if (seen.size > MAX_INVENTORY_HOSTS) throw new InventoryError(`the inventory names more than ${MAX_INVENTORY_HOSTS} hosts`);
      }
      for (const key of HOST_ADDRESS_VARS) if (vars[key] !== undefined && vars[key] !== '') host[key] = vars[key];
    }
  }
  return [...seen.values()];
}

/** The host names an INI inventory names, in first-seen order (iniHostEntries without the addresses). */
export function iniHosts(content: string): string[] {
  return iniHostEntries(content).map((h) => h.name);
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
