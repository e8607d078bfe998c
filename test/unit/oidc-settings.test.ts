import { inspect } from 'node:util';
import { loadConfig, parseFlags } from '../../core/config';
import { mapClaims } from '../../core/access/sign-in-mapping';

const ISSUER = 'https://login.example.com/realms/ops';
const REDIRECT = 'https://cairn.example.com/auth/oidc/callback';
const configured = (extra: Record<string, string> = {}) => ({
  CAIRN_OIDC_ISSUER: ISSUER,
  CAIRN_OIDC_CLIENT_ID: 'cairn',
  CAIRN_OIDC_REDIRECT_URL: REDIRECT,
  ...extra,
});

test('sign-in is off until --oidc-issuer is set', () => {
  expect(loadConfig({}, {}).oidc).toBeUndefined();
});

test('the settings are read from flags and the environment, with their defaults', () => {
  const { values } = parseFlags(['--oidc-role-map', 'ops=operator, admins=admin', '--oidc-team-map=ops=Operations']);
  const oidc = loadConfig(values, configured({ CAIRN_OIDC_CLIENT_SECRET: 's3cret-value' })).oidc!;
  expect(oidc).toMatchObject({
    issuer: ISSUER,
    clientId: 'cairn',
    clientSecret: 's3cret-value',
    redirectUrl: REDIRECT,
    scopes: ['openid', 'profile', 'email'],
    usernameClaim: 'preferred_username',
    groupsClaim: 'groups',
    roleMap: [{ value: 'ops', role: 'operator' }, { value: 'admins', role: 'admin' }],
    teamMap: [{ value: 'ops', team: 'Operations' }],
    defaultRole: 'viewer',
  });
});

test('the client secret never prints', () => {
  const config = loadConfig({}, configured({ CAIRN_OIDC_CLIENT_SECRET: 's3cret-value' }));
  expect(JSON.stringify(config)).not.toContain('s3cret-value');
  expect(inspect(config, { depth: 5 })).not.toContain('s3cret-value');
});

test.each([
  [{ CAIRN_OIDC_CLIENT_ID: 'cairn' }, '--oidc-client-id (CAIRN_OIDC_CLIENT_ID): needs --oidc-issuer (CAIRN_OIDC_ISSUER) too'],
  [{ CAIRN_OIDC_CLIENT_SECRET: 'x' }, 'CAIRN_OIDC_CLIENT_SECRET: needs --oidc-issuer (CAIRN_OIDC_ISSUER) too'],
  [configured({ CAIRN_OIDC_CLIENT_ID: '' }), '--oidc-client-id (CAIRN_OIDC_CLIENT_ID): required when --oidc-issuer is set'],
  [configured({ CAIRN_OIDC_REDIRECT_URL: '' }), '--oidc-redirect-url (CAIRN_OIDC_REDIRECT_URL): required when --oidc-issuer is set'],
  [configured({ CAIRN_OIDC_ISSUER: 'http://login.example.com' }), '--oidc-issuer (CAIRN_OIDC_ISSUER): the issuer must be an https URL (plain http only for a loopback host)'],
  [configured({ CAIRN_OIDC_ISSUER: 'not a url' }), '--oidc-issuer (CAIRN_OIDC_ISSUER): "not a url" is not a URL'],
  [configured({ CAIRN_OIDC_REDIRECT_URL: 'https://cairn.example.com/elsewhere' }), "--oidc-redirect-url (CAIRN_OIDC_REDIRECT_URL): must name this server's callback"],
  [configured({ CAIRN_OIDC_SCOPES: 'profile email' }), '--oidc-scopes (CAIRN_OIDC_SCOPES): must include openid'],
  [configured({ CAIRN_OIDC_ROLE_MAP: 'ops=superuser' }), '--oidc-role-map (CAIRN_OIDC_ROLE_MAP): "superuser" is not a role (admin, operator or viewer)'],
  [configured({ CAIRN_OIDC_TEAM_MAP: 'ops' }), '--oidc-team-map (CAIRN_OIDC_TEAM_MAP): "ops" is not a value=team pair'],
  [configured({ CAIRN_OIDC_DEFAULT_ROLE: 'admin' }), '--oidc-default-role (CAIRN_OIDC_DEFAULT_ROLE): expected viewer, operator or refuse'],
  [configured({ CAIRN_OIDC_DEFAULT_ROLE: 'refuse' }), '--oidc-default-role (CAIRN_OIDC_DEFAULT_ROLE): refuse needs --oidc-role-map (CAIRN_OIDC_ROLE_MAP), or nobody could sign in'],
])('a misconfiguration stops the start naming the flag (%#)', (env, message) => {
  expect(() => loadConfig({}, env)).toThrow(message);
});

test('plain http is taken for a loopback provider and console', () => {
  const oidc = loadConfig({}, configured({ CAIRN_OIDC_ISSUER: 'http://127.0.0.1:9000', CAIRN_OIDC_REDIRECT_URL: 'http://localhost:8080/auth/oidc/callback' })).oidc!;
  expect(oidc.issuer).toBe('http://127.0.0.1:9000');
});

describe('the claim mapping', () => {
  const settings = {
    protocol: 'oidc' as const,
    groupsClaim: 'groups',
    roleMap: [
      { value: 'ops', role: 'operator' as const },
      { value: 'admins', role: 'admin' as const },
    ],
    teamMap: [
      { value: 'ops', team: 'Operations' },
      { value: 'dev', team: 'Developers' },
    ],
    defaultRole: 'viewer' as const,
  };

  test('the highest role any value gives; the teams the values name, of those the map manages', () => {
    expect(mapClaims(settings, { groups: ['ops', 'admins', 'other'] })).toEqual({ role: 'admin', teams: ['Operations'], managedTeams: ['Operations', 'Developers'] });
  });

  test('no matching value: the default role, or a refusal when the default is refuse', () => {
    expect(mapClaims(settings, { groups: ['other'] })).toMatchObject({ role: 'viewer', teams: [] });
    expect(mapClaims(settings, {})).toMatchObject({ role: 'viewer' });
    expect(mapClaims({ ...settings, defaultRole: 'refuse' }, { groups: ['other'] })).toEqual({
      refused: 'no --oidc-role-map value matches the groups claim, and --oidc-default-role is refuse: an admin maps one of your groups to a role first',
    });
  });

  test('a single string, a nested claim by dotted path, and a namespaced claim name', () => {
    expect(mapClaims(settings, { groups: 'ops' })).toMatchObject({ role: 'operator' });
    expect(mapClaims({ ...settings, groupsClaim: 'realm_access.roles' }, { realm_access: { roles: ['admins'] } })).toMatchObject({ role: 'admin' });
    expect(mapClaims({ ...settings, groupsClaim: 'https://example.com/groups' }, { 'https://example.com/groups': ['dev'] })).toMatchObject({ teams: ['Developers'] });
  });
});
