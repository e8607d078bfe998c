import { isIPv6 } from 'node:net';
import type { InventoryLayout } from './inventory';

/**
 * Ansible host patterns (a template's `limit`) read as ansible-core reads them
 * (ansible/inventory/manager.py), over an inventory's hosts and groups: which hosts a pattern
 * selects. Pure: no I/O, and no regular expression made from the pattern.
 *
 * - Separators: a pattern holding a comma is split at commas only; one without a comma is a single
 *   pattern when it is one host (a name, an IPv4 or IPv6 address, with an optional `:port`, host
 *   ranges allowed), else split at colons outside brackets.
 * - Order: the plain patterns first (`all` when there is none), then the `&` intersections, then
 *   the `!` exclusions.
 * - A plain pattern that is a host's exact name selects that host. Otherwise a pattern (shell glob:
 *   `*`, `?`, `[set]`, `[!set]`) selects every host of each group whose name it matches, and each
 *   of a group's child groups; and, when it matches no group or holds any of `.?*[`, each host whose
 *   name it matches. `all` is every host; `ungrouped` those in no group but `all`.
 * - A regular expression (`~…`) is not evaluated here (`undefined`): it is Python's regular
 *   expression language. Nor is a subscript (`web[0]`, `web[1:3]`, and `web[12]` too, which Ansible
 *   reads so), whose hosts depend on the order Ansible walks child groups in, unless what it
 *   subscripts selects no host (then neither does it). Ask Ansible itself for those.
 */

/** An inventory's host and group names as a pattern sees them. */
export interface PatternInventory {
  /** Every host, in inventory order. */
  hosts: ReadonlySet<string>;
  /** Each group (`all` and `ungrouped` included) and the hosts it holds, its child groups' included. */
  groups: ReadonlyMap<string, ReadonlySet<string>>;
}

/** Reads a layout (core/inventory.ts) as patterns see it, groups resolved through their children. */
export function patternInventory(layout: InventoryLayout): PatternInventory {
  const hosts = new Set(layout.hosts.keys());
  const direct = new Map<string, Set<string>>();
  for (const [name, group] of layout.groups) for (const host of group.hosts) (direct.get(host) ?? direct.set(host, new Set()).get(host)!).add(name);
  const resolved = new Map<string, Set<string>>();
  const resolve = (name: string, seen: Set<string>): Set<string> => {
    const done = resolved.get(name);
    if (done) return done;
    const members = new Set(layout.groups.get(name)?.hosts ?? []);
    seen.add(name);
    for (const child of layout.groups.get(name)?.children ?? []) {
      if (seen.has(child)) continue; // a cycle (which Ansible refuses) adds nothing more
      for (const host of resolve(child, seen)) members.add(host);
    }
    seen.delete(name);
    resolved.set(name, members);
    return members;
  };
  const groups = new Map<string, ReadonlySet<string>>();
  for (const name of layout.groups.keys()) if (name !== 'all' && name !== 'ungrouped') groups.set(name, resolve(name, new Set()));
  groups.set('all', hosts);
  groups.set('ungrouped', new Set([...hosts].filter((host) => [...(direct.get(host) ?? [])].every((g) => g === 'all' || g === 'ungrouped'))));
  return { hosts, groups };
}

/** A limit's single patterns, split as Ansible splits them (split_host_pattern). */
export function splitHostPattern(pattern: string): string[] {
  const text = pattern.trim();
  const parts = text.includes(',') ? text.split(',') : isHostIdentifier(text) ? [text] : (text.match(/(?:[^\s:[\]]|\[[^\]]*\])+/g) ?? []);
  return parts.map((part) => part.trim()).filter((part) => part !== '');
}

/** An alphanumeric host range (`[1:3]`, `[a:c]`, with an optional `:step`), as Ansible's address parser takes one. */
const RANGE = String.raw`\[(?:[a-z]:[a-z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]`;
const LABEL = String.raw`(?:[\p{L}\p{N}_]|${RANGE})(?:[\p{L}\p{N}_-]|${RANGE})*`;
const HOSTNAME = new RegExp(String.raw`^${LABEL}(?:\.${LABEL})*$`, 'iu');

/** Whether Ansible's parse_address reads the text as one host: a name or address, with an optional `:port`. */
function isHostIdentifier(text: string): boolean {
  let host = text;
  const bracketed = /^\[(.+)\]:([0-9]+)$/.exec(host);
  if (bracketed) host = bracketed[1];
  const withPort = /^((?:[^:[\]]|\[[^\]]*\])*):([0-9]+)$/.exec(host);
  if (withPort) host = withPort[1];
  if (isIPv6(host)) return true;
  // A label may not end in `-` or `_`.
  return HOSTNAME.test(host) && host.split('.').every((label) => !/[-_]$/.test(label));
}

/** `name[3]`, `name[1:3]`, `name[2:]` (and the removed `name[1-3]`): a subscript on a pattern. */
const SUBSCRIPT = /^(.+)\[(?:-?[0-9]+|[0-9]+[:-][0-9]*)\]$/;

/**
 * The hosts a limit selects in an inventory, or undefined when it holds a pattern not evaluated
 * here (a `~` regular expression or a subscript). An empty limit selects every host.
 */
export function selectedHosts(limit: string, inventory: PatternInventory): Set<string> | undefined {
  const patterns = splitHostPattern(limit);
  const plain = patterns.filter((p) => !p.startsWith('&') && !p.startsWith('!'));
  const ordered = [...(plain.length ? plain : ['all']), ...patterns.filter((p) => p.startsWith('&')), ...patterns.filter((p) => p.startsWith('!'))];
  let selected = new Set<string>();
  for (const pattern of ordered) {
    if (inventory.hosts.has(pattern)) {
      selected.add(pattern);
      continue;
    }
    const matched = matchOne(pattern.replace(/^[&!]/, ''), inventory);
    if (matched === undefined) return undefined;
    if (pattern.startsWith('!')) selected = new Set([...selected].filter((host) => !matched.has(host)));
    else if (pattern.startsWith('&')) selected = new Set([...selected].filter((host) => matched.has(host)));
    else for (const host of matched) selected.add(host);
  }
  // A limit narrows the inventory's own hosts.
  return new Set([...selected].filter((host) => inventory.hosts.has(host)));
}

/** Whether a limit selects `host`; undefined when the limit cannot be evaluated here (selectedHosts). */
export function limitSelectsHost(limit: string, host: string, inventory: PatternInventory): boolean | undefined {
  return selectedHosts(limit, inventory)?.has(host);
}

function matchOne(pattern: string, inventory: PatternInventory): Set<string> | undefined {
  if (pattern.startsWith('~')) return undefined;
  const subscripted = SUBSCRIPT.exec(pattern);
  if (subscripted) {
    // Ansible reads `web[12]` as host 12 of `web`: of nothing, nothing; of some hosts, which ones depends on its walk.
    return enumerate(subscripted[1], inventory).size === 0 ? new Set() : undefined;
  }
  return enumerate(pattern, inventory);
}

/** The hosts a pattern without subscript names: of the groups it matches, and the hosts it matches. */
function enumerate(pattern: string, inventory: PatternInventory): Set<string> {
  const glob = compileGlob(pattern);
  const found = new Set<string>();
  let groupMatched = false;
  for (const [name, members] of inventory.groups) {
    if (!glob(name)) continue;
    groupMatched = true;
    for (const host of members) found.add(host);
  }
  if (!groupMatched || /[.?*[]/.test(pattern)) for (const host of inventory.hosts) if (glob(host)) found.add(host);
  return found;
}

/** One element of a glob: a literal character, any one character, any run, or a character set. */
type GlobPart = { kind: 'char'; char: string } | { kind: 'one' } | { kind: 'run' } | { kind: 'set'; negated: boolean; has: (char: string) => boolean };

/**
 * A shell glob as Python's fnmatch reads it (case-sensitive, the whole name): `*`, `?`, `[set]`
 * with ranges and `!` negation, a `]` first in a set taken as itself, an unclosed `[` as itself.
 * Matched by walking the name (no regular expression), in time bounded by the two lengths' product.
 */
function compileGlob(pattern: string): (name: string) => boolean {
  const chars = [...pattern];
  const parts: GlobPart[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    if (c === '*') {
      if (parts.at(-1)?.kind !== 'run') parts.push({ kind: 'run' });
    } else if (c === '?') {
      parts.push({ kind: 'one' });
    } else if (c === '[') {
      let j = i + 1;
      if (chars[j] === '!') j++;
      if (chars[j] === ']') j++;
      while (j < chars.length && chars[j] !== ']') j++;
      if (j >= chars.length) {
        parts.push({ kind: 'char', char: '[' });
        continue;
      }
      let body = chars.slice(i + 1, j);
      const negated = body[0] === '!';
      if (negated) body = body.slice(1);
      const singles = new Set<string>();
      const ranges: [number, number][] = [];
      for (let k = 0; k < body.length; k++) {
        if (body[k + 1] === '-' && k + 2 < body.length) {
          const [low, high] = [body[k].codePointAt(0)!, body[k + 2].codePointAt(0)!];
          if (low <= high) ranges.push([low, high]);
          k += 2;
        } else {
          singles.add(body[k]);
        }
      }
      const has = (char: string) => singles.has(char) || ranges.some(([low, high]) => char.codePointAt(0)! >= low && char.codePointAt(0)! <= high);
      parts.push({ kind: 'set', negated, has });
      i = j;
    } else {
      parts.push({ kind: 'char', char: c });
    }
  }
  const one = (part: GlobPart, char: string) =>
    part.kind === 'one' || (part.kind === 'char' && part.char === char) || (part.kind === 'set' && part.has(char) !== part.negated);
  return (name) => {
    const text = [...name];
    // Classic wildcard matching: the last `*` and where it resumed, so each character is revisited at most once per `*`.
    let p = 0;
    let t = 0;
    let star = -1;
    let resume = 0;
    while (t < text.length) {
      if (p < parts.length && parts[p].kind !== 'run' && one(parts[p], text[t])) {
        p++;
        t++;
      } else if (p < parts.length && parts[p].kind === 'run') {
        star = p++;
        resume = t;
      } else if (star >= 0) {
        p = star + 1;
        t = ++resume;
      } else {
        return false;
      }
    }
    while (p < parts.length && parts[p].kind === 'run') p++;
    return p === parts.length;
  };
}
