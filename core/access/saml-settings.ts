import { X509Certificate } from 'node:crypto';
import { z } from 'zod';
import type { GlobalRole } from './access';
import type { MappingRules, RoleRule, TeamRule } from './sign-in-mapping';
import { defaultRoleFlag, flagName, readFlagGroup, roleMapFlag, secureUrl, teamMapFlag } from './sign-in-flags';

/**
 * SAML 2.0 sign-in settings (docs/operations.md, SAML sign-in): the identity provider, this server
 * as its service provider, and the admin-set mapping from the assertion's attributes to a role and
 * teams (the same as OpenID Connect's, core/access/sign-in-mapping.ts). The flags are listed in
 * core/config.ts SETTINGS with the rest. Sign-in is off until `--saml-idp-sso-url` is set.
 */
export const SAML_SETTINGS = {
  samlIdpSsoUrl: { flag: '--saml-idp-sso-url', env: 'CAIRN_SAML_IDP_SSO_URL', help: "the identity provider's single sign-on URL (HTTP-Redirect binding); set, the console offers SAML sign-in" },
  samlIdpEntityId: { flag: '--saml-idp-entity-id', env: 'CAIRN_SAML_IDP_ENTITY_ID', help: "the identity provider's entity id: the Issuer its assertions must carry" },
  samlIdpCert: { flag: '--saml-idp-cert', env: 'CAIRN_SAML_IDP_CERT', help: "the identity provider's signing certificate: PEM text, or the path of a PEM file (read at each sign-in)" },
  samlSpEntityId: { flag: '--saml-sp-entity-id', env: 'CAIRN_SAML_SP_ENTITY_ID', help: "this server's entity id at the identity provider: the audience assertions must name" },
  samlAcsUrl: { flag: '--saml-acs-url', env: 'CAIRN_SAML_ACS_URL', help: 'the address the identity provider posts assertions to: https://<this server>/auth/saml/acs' },
  samlUsernameAttribute: { flag: '--saml-username-attribute', env: 'CAIRN_SAML_USERNAME_ATTRIBUTE', help: 'assertion attribute a new account is named after (default: the NameID)' },
  samlGroupsAttribute: { flag: '--saml-groups-attribute', env: 'CAIRN_SAML_GROUPS_ATTRIBUTE', help: 'assertion attribute the role and team maps read (default groups)' },
  samlRoleMap: { flag: '--saml-role-map', env: 'CAIRN_SAML_ROLE_MAP', help: 'value=role pairs, comma-separated: a groups attribute value and the role it gives' },
  samlTeamMap: { flag: '--saml-team-map', env: 'CAIRN_SAML_TEAM_MAP', help: 'value=team pairs, comma-separated: a groups attribute value and the team (by name) it puts the account in' },
  samlDefaultRole: { flag: '--saml-default-role', env: 'CAIRN_SAML_DEFAULT_ROLE', help: 'role of a sign-in no --saml-role-map value matches: viewer, operator or refuse (default viewer)' },
  samlClockSkew: { flag: '--saml-clock-skew', env: 'CAIRN_SAML_CLOCK_SKEW', help: "seconds an assertion's times may be off this server's clock, 0 to 300 (default 60)" },
} as const;

export type SamlSettingName = keyof typeof SAML_SETTINGS;

/** A setting that cannot be used; core/config.ts reports it as a start-up error. */
export class SamlSettingError extends Error {}

export const SAML_ACS_PATH = '/auth/saml/acs';

/** Everything SAML sign-in needs from the settings; none of it is secret (the certificate is public). */
export interface SamlSettings extends MappingRules {
  protocol: 'saml';
  idpSsoUrl: string;
  idpEntityId: string;
  /** The identity provider's signing certificate: PEM text, or the path of a PEM file. */
  idpCert: string;
  spEntityId: string;
  acsUrl: string;
  /** The attribute a new account is named after; undefined: the NameID. */
  usernameAttribute: string | undefined;
  groupsClaim: string;
  roleMap: readonly RoleRule[];
  teamMap: readonly TeamRule[];
  defaultRole: GlobalRole | 'refuse';
  clockSkewSeconds: number;
}

const REQUIRED = 'required when --saml-idp-sso-url is set';
const ATTRIBUTE_NAME = /^[\x21-\x7e]{1,256}$/;

/** Whether PEM text holds an X.509 certificate. */
export function isCertificatePem(pem: string): boolean {
  try {
    new X509Certificate(pem);
    return true;
  } catch {
    return false;
  }
}

/** PEM text, checked here; or the path of a PEM file, read and checked at start and at each sign-in (services/access/saml-certificate.ts). */
const certificate = z
  .string({ message: REQUIRED })
  .min(1, REQUIRED)
  .refine((value) => !value.includes('-----BEGIN') || isCertificatePem(value), { message: 'does not hold a PEM X.509 certificate' });

const schema = z.object({
  samlIdpSsoUrl: secureUrl('the single sign-on URL', REQUIRED).transform((url) => url.href),
  samlIdpEntityId: z.string({ message: REQUIRED }).min(1, REQUIRED),
  samlIdpCert: certificate,
  samlSpEntityId: z.string({ message: REQUIRED }).min(1, REQUIRED),
  samlAcsUrl: secureUrl('the ACS URL', REQUIRED)
    .refine((url) => url.pathname.endsWith(SAML_ACS_PATH), { message: `must name this server's assertion consumer service: its path ends in ${SAML_ACS_PATH}` })
    .transform((url) => url.href),
  samlUsernameAttribute: z.string().refine((v) => ATTRIBUTE_NAME.test(v), { message: 'expected an attribute name' }).optional(),
  samlGroupsAttribute: z.string().default('groups').refine((v) => ATTRIBUTE_NAME.test(v), { message: 'expected an attribute name' }),
  samlRoleMap: roleMapFlag,
  samlTeamMap: teamMapFlag,
  samlDefaultRole: defaultRoleFlag,
  samlClockSkew: z.coerce.number({ message: 'expected whole seconds' }).int('expected whole seconds').min(0, 'at least 0').max(300, 'at most 300').default(60),
});

/**
 * Reads the SAML settings from the flag-or-environment values core/config.ts gathered; undefined
 * while `--saml-idp-sso-url` is unset. Any other SAML flag without it, or a flag it needs left
 * out, is an error naming the flag.
 */
export function samlSettingsFrom(raw: Record<string, string | undefined>): SamlSettings | undefined {
  const s = readFlagGroup(SAML_SETTINGS, 'samlIdpSsoUrl', raw, schema, (message) => new SamlSettingError(message));
  if (!s) return undefined;
  if (s.samlDefaultRole === 'refuse' && s.samlRoleMap.length === 0) {
    throw new SamlSettingError(`${where('samlDefaultRole')}: refuse needs --saml-role-map (CAIRN_SAML_ROLE_MAP), or nobody could sign in`);
  }
  return {
    protocol: 'saml',
    idpSsoUrl: s.samlIdpSsoUrl,
    idpEntityId: s.samlIdpEntityId,
    idpCert: s.samlIdpCert,
    spEntityId: s.samlSpEntityId,
    acsUrl: s.samlAcsUrl,
    usernameAttribute: s.samlUsernameAttribute,
    groupsClaim: s.samlGroupsAttribute,
    roleMap: s.samlRoleMap,
    teamMap: s.samlTeamMap,
    defaultRole: s.samlDefaultRole,
    clockSkewSeconds: s.samlClockSkew,
  };
}

export const where = (name: SamlSettingName) => flagName(SAML_SETTINGS, name);
