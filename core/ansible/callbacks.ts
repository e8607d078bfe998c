import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { limitSelectsHost, patternInventory, splitHostPattern } from './host-patterns';
import type { InventoryLayout } from './inventory';

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
 * Whether a template's Ansible limit selects the calling `host`, evaluated as Ansible evaluates it
 * over the stored inventory's hosts and groups (core/host-patterns.ts): undefined when the limit
 * holds a pattern only Ansible itself can evaluate (a `~` regular expression, a subscript).
 */
export function limitSelects(limit: string, host: string, layout: InventoryLayout): boolean | undefined {
  return limitSelectsHost(limit, host, patternInventory(layout));
}

/**
 * The limit a callback's run keeps (spec part A 2.3 `callback_limit`): with `intersect` the
 * template's limit and the calling host both (`<limit>,&<host>`, the limit's own patterns joined by
 * commas so none is read apart), so the run is held to the template's limit as well as to the
 * host; with `replace`, or with no limit, the host alone.
 */
export function callbackRunLimit(templateLimit: string | null, host: string, mode: 'intersect' | 'replace'): string {
  if (mode === 'replace' || templateLimit === null) return host;
  return [...splitHostPattern(templateLimit), `&${host}`].join(',');
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
