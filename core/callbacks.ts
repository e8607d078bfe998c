import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';

/**
 * Provisioning callbacks as pure rules (spec part A 1.1, 2.3, 4.6; part B 7.5): the two addresses,
 * the host config key, which host of an inventory a caller's address is, and whether a template's
 * Ansible limit selects that host.
 */

/** `POST /v1/templates/{id}/callback`. */
export const CALLBACK_PATH = /^\/v1\/templates\/[^/]+\/callback$/;
/** `POST /api/v2/job_templates/{external_id}/callback/`, the trailing slash optional: the only path served under /api/. */
export const EXTERNAL_CALLBACK_PATH = /^\/api\/v2\/job_templates\/[^/]+\/callback\/?$/;

export const isCallbackPath = (path: string): boolean => CALLBACK_PATH.test(path) || EXTERNAL_CALLBACK_PATH.test(path);

/** A new host config key: 32 random bytes, URL-safe base64. */
export function newHostConfigKey(): string {
  return randomBytes(32).toString('base64url');
}

/** The seal context of a template's key, so a key sealed for one template never opens for another. */
export function callbackKeyContext(templateId: string): string {
  return `callback:${templateId}:host-config-key`;
}

/** Compares two keys in time independent of where they differ. */
export function keysMatch(given: string, stored: string): boolean {
  const a = createHash('sha256').update(given, 'utf8').digest();
  const b = createHash('sha256').update(stored, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/** A socket's address as a host would be named: an IPv4 address mapped into IPv6 is written as IPv4. */
export function callerAddress(remote: string | undefined): string {
  const address = (remote ?? '').trim();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1] : address.toLowerCase();
}

/**
 * A host of a stored inventory as a callback matches it: its name, and the addresses it is reached
 * at when its inventory says (`ansible_host`, `ansible_ssh_host`, its own or its groups':
 * core/inventory.ts InventoryHost).
 */
export interface CallbackHost {
  name: string;
  addresses?: readonly string[];
}

/**
 * The hosts the caller's address is: those whose inventory addresses (`ansible_host`,
 * `ansible_ssh_host`), or whose name, is that address; any one of them matching is enough. Names
 * and addresses are compared as written (IPv4 exactly, IPv6 case-folded); none is looked up in
 * DNS. More than one host may answer; the caller refuses that (spec part B 7.5, 400).
 */
export function hostsAt(address: string, hosts: readonly CallbackHost[]): string[] {
  if (!isIP(address)) return [];
  const same = (value: string | undefined) => value !== undefined && callerAddress(value) === address;
  return [...new Set(hosts.filter((h) => same(h.name) || (h.addresses ?? []).some(same)).map((h) => h.name))];
}

/**
 * Whether an Ansible limit (`web*:&prod:!db1`, or comma-separated) selects `host`, given the
 * inventory's host names; undefined when it cannot be told without the inventory tool: a pattern
 * that is a regular expression (`~...`), a range (`[1:3]`), or a name that is no host and so may
 * be a group.
 */
export function limitSelects(limit: string, host: string, hostNames: readonly string[]): boolean | undefined {
  const terms = limit
    .split(/[,:]/)
    .map((t) => t.trim())
    .filter((t) => t !== '');
  if (terms.length === 0) return true;
  const known = new Set(hostNames);
  const matches = (pattern: string): boolean | undefined => {
    if (pattern === 'all' || pattern === '*') return true;
    if (pattern.startsWith('~') || /\[/.test(pattern)) return undefined;
    if (/[*?]/.test(pattern)) return globMatch(pattern, host) ? true : hostNames.some((h) => globMatch(pattern, h)) ? false : undefined;
    if (known.has(pattern)) return pattern === host;
    return undefined;
  };
  const positives = terms.filter((t) => !t.startsWith('!') && !t.startsWith('&')).map(matches);
  const intersections = terms.filter((t) => t.startsWith('&')).map((t) => t.slice(1));
  const exclusions = terms.filter((t) => t.startsWith('!')).map((t) => t.slice(1));
  // With no plain pattern, Ansible starts from every host.
  let selected: boolean | undefined = positives.length === 0 || positives.includes(true) ? true : positives.includes(undefined) ? undefined : false;
  if (selected === false) return false;
  for (const term of intersections) {
    const m = matches(term);
    if (m === false) return false;
    if (m === undefined) selected = undefined;
  }
  for (const term of exclusions) {
    const m = matches(term);
    if (m === true) return false;
    if (m === undefined) selected = undefined;
  }
  return selected;
}

function globMatch(pattern: string, name: string): boolean {
  const re = new RegExp(`^${pattern.replace(/[.+^${}()|\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
  return re.test(name);
}

/** What a callback's body says, read as JSON or as a form. */
export interface CallbackBody {
  hostConfigKey: unknown;
  /** Whether it carried `extra_vars`, which a callback may not (spec part A 4.6). */
  extraVars: boolean;
  /** The body as a plain object, for the request's fingerprint (the key withheld there). */
  fields: Record<string, unknown>;
}

/** Reads a form-encoded body (`host_config_key=...`). */
export function formFields(text: string): Record<string, unknown> {
  const params = new URLSearchParams(text);
  const fields: Record<string, unknown> = {};
  for (const [key, value] of params) if (!(key in fields) && key !== '__proto__') fields[key] = value;
  return fields;
}

export function readCallbackFields(fields: Record<string, unknown>): CallbackBody {
  return { hostConfigKey: fields.host_config_key, extraVars: Object.prototype.hasOwnProperty.call(fields, 'extra_vars'), fields };
}
