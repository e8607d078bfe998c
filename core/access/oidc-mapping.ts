import type { GlobalRole } from './access';
import type { OidcSettings } from './oidc-settings';

/**
 * What an ID token's claims make of a person at sign-in (docs/operations.md, The claim mapping):
 * the highest role any `--oidc-role-map` value they carry gives, else `--oidc-default-role`
 * (or a refusal when that is `refuse`); and, of the teams `--oidc-team-map` names, the ones their
 * values put them in. Evaluated at every sign-in, so the provider stays the source of both.
 */
export type ClaimMapping = { role: GlobalRole; teams: string[]; managedTeams: string[] } | { refused: string };

const RANK: Record<GlobalRole, number> = { viewer: 0, operator: 1, admin: 2 };

/**
 * A claim by name; a name the claims do not hold as written is read as a dotted path into nested
 * claims (`realm_access.roles`), so namespaced names with dots (`https://example.com/groups`) work too.
 */
export function claimAt(claims: Record<string, unknown>, name: string): unknown {
  if (Object.hasOwn(claims, name)) return claims[name];
  let at: unknown = claims;
  for (const part of name.split('.')) {
    if (typeof at !== 'object' || at === null || Array.isArray(at) || !Object.hasOwn(at, part)) return undefined;
    at = (at as Record<string, unknown>)[part];
  }
  return at;
}

/** The claim's values: a list's strings, or a single string; anything else holds none. */
export function claimValues(claims: Record<string, unknown>, name: string): string[] {
  const value = claimAt(claims, name);
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return [];
}

export function mapClaims(settings: Pick<OidcSettings, 'groupsClaim' | 'roleMap' | 'teamMap' | 'defaultRole'>, claims: Record<string, unknown>): ClaimMapping {
  const values = claimValues(claims, settings.groupsClaim);
  const held = new Set(values);
  let role: GlobalRole | undefined;
  for (const rule of settings.roleMap) {
    if (held.has(rule.value) && (role === undefined || RANK[rule.role] > RANK[role])) role = rule.role;
  }
  if (role === undefined) {
    if (settings.defaultRole === 'refuse') {
      return { refused: `no --oidc-role-map value matches the ${settings.groupsClaim} claim, and --oidc-default-role is refuse: an admin maps one of your groups to a role first` };
    }
    role = settings.defaultRole;
  }
  const teams = [...new Set(settings.teamMap.filter((rule) => held.has(rule.value)).map((rule) => rule.team))];
  const managedTeams = [...new Set(settings.teamMap.map((rule) => rule.team))];
  return { role, teams, managedTeams };
}
