import { isIP } from 'node:net';
import { z } from 'zod';
import type { GlobalRole } from './access';
import type { RoleRule, TeamRule } from './sign-in-mapping';

/**
 * The flag parsing OpenID Connect and SAML sign-in share (core/access/oidc-settings.ts,
 * core/access/saml-settings.ts): provider addresses, and the role map, team map and default role
 * of core/access/sign-in-mapping.ts.
 */

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Why a provider or redirect address may not be used, or undefined when it may. It must be https:
 * codes, secrets, assertions and the keys that vouch for them travel over it. Plain http is taken
 * for a loopback host only (a provider or console on the same machine, as in development and
 * tests).
 */
export function providerUrlFault(url: URL): string | undefined {
  const loopback = LOOPBACK_NAMES.has(url.hostname) || (isIP(url.hostname) === 4 && url.hostname.startsWith('127.'));
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) return 'must be an https URL (plain http only for a loopback host)';
  if (url.hash || url.username || url.password) return 'must not carry a fragment or user name';
  return undefined;
}

/** A required https URL without a query; `required` is the message when it is left out. */
export const secureUrl = (what: string, required: string) =>
  z.string({ message: required }).transform((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: `"${value}" is not a URL` });
      return z.NEVER;
    }
    const fault = providerUrlFault(url) ?? (url.search ? 'must not carry a query' : undefined);
    if (fault) {
      ctx.addIssue({ code: 'custom', message: `${what} ${fault}` });
      return z.NEVER;
    }
    return url;
  });

/** `a=b,c=d` as pairs; each pair splits at its last `=`, so a value may hold `=` but not `,`. */
const pairs = (what: string) =>
  z
    .string()
    .default('')
    .transform((value, ctx) => {
      const out: { value: string; target: string }[] = [];
      for (const item of value.split(',').map((s) => s.trim()).filter(Boolean)) {
        const eq = item.lastIndexOf('=');
        const left = item.slice(0, eq).trim();
        const right = item.slice(eq + 1).trim();
        if (eq < 0 || !left || !right) {
          ctx.addIssue({ code: 'custom', message: `"${item}" is not a value=${what} pair` });
          return z.NEVER;
        }
        out.push({ value: left, target: right });
      }
      return out;
    });

const ROLES = ['admin', 'operator', 'viewer'] as const;

export const roleMapFlag = pairs('role').transform((list, ctx) => {
  const rules: RoleRule[] = [];
  for (const { value, target } of list) {
    if (!(ROLES as readonly string[]).includes(target)) {
      ctx.addIssue({ code: 'custom', message: `"${target}" is not a role (admin, operator or viewer)` });
      return z.NEVER;
    }
    rules.push({ value, role: target as GlobalRole });
  }
  return rules;
});

export const teamMapFlag = pairs('team').transform((list): TeamRule[] => list.map(({ value, target }) => ({ value, team: target })));

export const defaultRoleFlag = z.enum(['viewer', 'operator', 'refuse'], { message: 'expected viewer, operator or refuse' }).default('viewer');

/** A group of sign-in flags as core/config.ts lists them: each setting's flag and environment variable. */
type FlagGroup<N extends string> = Record<N, { flag: string; env: string }>;

/** A setting named as a person sets it: its flag and its environment variable. */
export const flagName = <N extends string>(group: FlagGroup<N>, name: N): string => `${group[name].flag} (${group[name].env})`;

/**
 * Reads a group of flags switched on by one of them (`on`): undefined while that one is unset, and
 * then any other flag of the group given is an error naming it; else the group parsed by `schema`,
 * its first fault naming its flag. `fault` makes the group's own error.
 */
export function readFlagGroup<N extends string, T>(
  group: FlagGroup<N>,
  on: N,
  raw: Record<string, string | undefined>,
  schema: z.ZodType<T>,
  fault: (message: string) => Error,
): T | undefined {
  const names = Object.keys(group) as N[];
  if (!raw[on]) {
    const stray = names.find((name) => raw[name] !== undefined);
    if (stray) throw fault(`${flagName(group, stray)}: needs ${flagName(group, on)} too`);
    return undefined;
  }
  const parsed = schema.safeParse(Object.fromEntries(names.map((name) => [name, raw[name]])));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw fault(`${flagName(group, issue.path[0] as N)}: ${issue.message}`);
  }
  return parsed.data;
}
