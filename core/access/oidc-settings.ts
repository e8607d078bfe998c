import { inspect } from 'node:util';
import { z } from 'zod';
import type { GlobalRole } from './access';
import type { RoleRule, TeamRule } from './sign-in-mapping';
import { defaultRoleFlag, flagName, readFlagGroup, roleMapFlag, secureUrl, teamMapFlag } from './sign-in-flags';

/**
 * OpenID Connect sign-in settings (docs/operations.md, OpenID Connect sign-in): the provider, this
 * server's client at it, and the admin-set mapping from the ID token's claims to a role and teams.
 * The flags are listed in core/config.ts SETTINGS with the rest; the client secret is read from
 * the environment only (a flag would show it in `ps`). Sign-in is off until `--oidc-issuer` is set.
 */
export const OIDC_SETTINGS = {
  oidcIssuer: { flag: '--oidc-issuer', env: 'CAIRN_OIDC_ISSUER', help: 'OpenID Connect issuer URL; set, the console offers sign-in through it (client secret in CAIRN_OIDC_CLIENT_SECRET)' },
  oidcClientId: { flag: '--oidc-client-id', env: 'CAIRN_OIDC_CLIENT_ID', help: "this server's client id at the OpenID provider" },
  oidcRedirectUrl: { flag: '--oidc-redirect-url', env: 'CAIRN_OIDC_REDIRECT_URL', help: 'the address the provider sends browsers back to: https://<this server>/auth/oidc/callback' },
  oidcScopes: { flag: '--oidc-scopes', env: 'CAIRN_OIDC_SCOPES', help: 'scopes asked for, space- or comma-separated (default openid profile email)' },
  oidcUsernameClaim: { flag: '--oidc-username-claim', env: 'CAIRN_OIDC_USERNAME_CLAIM', help: 'ID token claim a new account is named after (default preferred_username)' },
  oidcGroupsClaim: { flag: '--oidc-groups-claim', env: 'CAIRN_OIDC_GROUPS_CLAIM', help: 'ID token claim the role and team maps read (default groups)' },
  oidcRoleMap: { flag: '--oidc-role-map', env: 'CAIRN_OIDC_ROLE_MAP', help: 'value=role pairs, comma-separated: a groups claim value and the role it gives' },
  oidcTeamMap: { flag: '--oidc-team-map', env: 'CAIRN_OIDC_TEAM_MAP', help: 'value=team pairs, comma-separated: a groups claim value and the team (by name) it puts the account in' },
  oidcDefaultRole: { flag: '--oidc-default-role', env: 'CAIRN_OIDC_DEFAULT_ROLE', help: 'role of a sign-in no --oidc-role-map value matches: viewer, operator or refuse (default viewer)' },
} as const;

export type OidcSettingName = keyof typeof OIDC_SETTINGS;

/** The environment variable holding the client secret; no flag. */
export const OIDC_CLIENT_SECRET_ENV = 'CAIRN_OIDC_CLIENT_SECRET';

/** A setting that cannot be used; core/config.ts reports it as a start-up error. */
export class OidcSettingError extends Error {}

/** Everything sign-in needs from the settings. Prints without its client secret. */
export class OidcSettings {
  readonly protocol = 'oidc' as const;
  constructor(
    readonly issuer: string,
    readonly clientId: string,
    readonly clientSecret: string | undefined,
    readonly redirectUrl: string,
    readonly scopes: readonly string[],
    readonly usernameClaim: string,
    readonly groupsClaim: string,
    readonly roleMap: readonly RoleRule[],
    readonly teamMap: readonly TeamRule[],
    readonly defaultRole: GlobalRole | 'refuse',
  ) {}
  private printable() {
    const { issuer, clientId, redirectUrl, scopes, usernameClaim, groupsClaim, roleMap, teamMap, defaultRole } = this;
    return { issuer, clientId, clientSecret: this.clientSecret ? '[redacted]' : undefined, redirectUrl, scopes, usernameClaim, groupsClaim, roleMap, teamMap, defaultRole };
  }
  toJSON() {
    return this.printable();
  }
  [inspect.custom](): string {
    return `OidcSettings ${inspect(this.printable())}`;
  }
}

const CLAIM_NAME = /^[A-Za-z0-9_:.\/-]{1,128}$/;

const REQUIRED = 'required when --oidc-issuer is set';

const schema = z.object({
  oidcIssuer: secureUrl('the issuer', REQUIRED),
  oidcClientId: z.string({ message: 'required when --oidc-issuer is set' }).min(1, 'required when --oidc-issuer is set'),
  oidcRedirectUrl: secureUrl('the redirect URL', REQUIRED).refine((url) => url.pathname.endsWith('/auth/oidc/callback'), {
    message: "must name this server's callback: its path ends in /auth/oidc/callback",
  }),
  oidcScopes: z
    .string()
    .default('openid profile email')
    .transform((value) => [...new Set(value.split(/[\s,]+/).filter(Boolean))])
    .refine((scopes) => scopes.includes('openid'), { message: 'must include openid' })
    .refine((scopes) => scopes.every((s) => /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s)), { message: 'a scope holds printable ASCII only, no quote or backslash' }),
  oidcUsernameClaim: z.string().default('preferred_username').refine((v) => CLAIM_NAME.test(v), { message: 'expected a claim name' }),
  oidcGroupsClaim: z.string().default('groups').refine((v) => CLAIM_NAME.test(v), { message: 'expected a claim name' }),
  oidcRoleMap: roleMapFlag,
  oidcTeamMap: teamMapFlag,
  oidcDefaultRole: defaultRoleFlag,
});

/**
 * Reads the sign-in settings from the flag-or-environment values core/config.ts gathered, and the
 * environment; undefined while `--oidc-issuer` is unset. Any other sign-in flag without the issuer,
 * or a flag the issuer needs left out, is an error naming the flag.
 */
export function oidcSettingsFrom(raw: Record<string, string | undefined>, env: NodeJS.ProcessEnv): OidcSettings | undefined {
  const secret = env[OIDC_CLIENT_SECRET_ENV] || undefined;
  const s = readFlagGroup(OIDC_SETTINGS, 'oidcIssuer', raw, schema, (message) => new OidcSettingError(message));
  if (!s) {
    if (secret) throw new OidcSettingError(`${OIDC_CLIENT_SECRET_ENV}: needs ${where('oidcIssuer')} too`);
    return undefined;
  }
  if (s.oidcDefaultRole === 'refuse' && s.oidcRoleMap.length === 0) {
    throw new OidcSettingError(`${where('oidcDefaultRole')}: refuse needs --oidc-role-map (CAIRN_OIDC_ROLE_MAP), or nobody could sign in`);
  }
  // The issuer is compared with the ID token's `iss` as written (a trailing slash kept as given);
  // readFlagGroup answered, so it is set.
  return new OidcSettings(
    raw.oidcIssuer!,
    s.oidcClientId,
    secret,
    raw.oidcRedirectUrl!,
    s.oidcScopes,
    s.oidcUsernameClaim,
    s.oidcGroupsClaim,
    s.oidcRoleMap,
    s.oidcTeamMap,
    s.oidcDefaultRole,
  );
}

const where = (name: OidcSettingName) => flagName(OIDC_SETTINGS, name);
