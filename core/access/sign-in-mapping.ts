import type { GlobalRole } from './access';

/**
 * What an identity provider says of a person makes of them at sign-in, OpenID Connect and SAML
 * alike (docs/operations.md, The claim mapping): the highest role any `--<protocol>-role-map`
 * value they carry gives, else `--<protocol>-default-role` (or a refusal when that is `refuse`);
 * and, of the teams `--<protocol>-team-map` names, the ones their values put them in. Evaluated at
 * every sign-in, so the provider stays the source of both. An ID token's claims and a SAML
 * assertion's attributes are both read as a record of named values.
 */
export type ClaimMapping = { role: GlobalRole; teams: string[]; managedTeams: string[] } | { refused: string };

/** The sign-in protocols a person may come in by; it names their flags and their identities' kind. */
export type SignInProtocol = 'oidc' | 'saml';

export interface RoleRule {
  value: string;
  role: GlobalRole;
}

export interface TeamRule {
  value: string;
  team: string;
}

/** The admin-set mapping of one protocol: which claim or attribute holds the groups, and what its values give. */
export interface MappingRules {
  protocol: SignInProtocol;
  groupsClaim: string;
  roleMap: readonly RoleRule[];
  teamMap: readonly TeamRule[];
  defaultRole: GlobalRole | 'refuse';
}

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

export function mapClaims(rules: MappingRules, claims: Record<string, unknown>): ClaimMapping {
  const held = new Set(claimValues(claims, rules.groupsClaim));
  let role: GlobalRole | undefined;
  for (const rule of rules.roleMap) {
    if (held.has(rule.value) && (role === undefined || RANK[rule.role] > RANK[role])) role = rule.role;
  }
  if (role === undefined) {
    if (rules.defaultRole === 'refuse') {
      const p = rules.protocol;
      const what = p === 'oidc' ? 'claim' : 'attribute';
      return { refused: `no --${p}-role-map value matches the ${rules.groupsClaim} ${what}, and --${p}-default-role is refuse: an admin maps one of your groups to a role first` };
    }
    role = rules.defaultRole;
  }
  const teams = [...new Set(rules.teamMap.filter((rule) => held.has(rule.value)).map((rule) => rule.team))];
  const managedTeams = [...new Set(rules.teamMap.map((rule) => rule.team))];
  return { role, teams, managedTeams };
}
