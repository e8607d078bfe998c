import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../core/config';
import { mapClaims } from '../../core/access/sign-in-mapping';
import { samlIdpCertificate } from '../../services/access/saml-certificate';

let dir: string;
let cert: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'cairn-saml-settings-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem'), '-days', '1', '-subj', '/CN=idp'], { stdio: 'ignore' });
  cert = readFileSync(path.join(dir, 'c.pem'), 'utf8');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const configured = (extra: Record<string, string> = {}) => ({
  CAIRN_SAML_IDP_SSO_URL: 'https://idp.example.com/sso',
  CAIRN_SAML_IDP_ENTITY_ID: 'https://idp.example.com/metadata',
  CAIRN_SAML_IDP_CERT: cert,
  CAIRN_SAML_SP_ENTITY_ID: 'https://cairn.example.com',
  CAIRN_SAML_ACS_URL: 'https://cairn.example.com/auth/saml/acs',
  ...extra,
});

test('SAML sign-in is off until --saml-idp-sso-url is set; another SAML flag alone is an error', () => {
  expect(loadConfig({}, {}).saml).toBeUndefined();
  expect(() => loadConfig({}, { CAIRN_SAML_ROLE_MAP: 'a=admin' })).toThrow('--saml-role-map (CAIRN_SAML_ROLE_MAP): needs --saml-idp-sso-url (CAIRN_SAML_IDP_SSO_URL) too');
});

test('the settings and their defaults; the certificate as PEM text or a file', () => {
  expect(loadConfig({}, configured({ CAIRN_SAML_TEAM_MAP: 'ops=Operations' })).saml).toMatchObject({
    protocol: 'saml',
    idpSsoUrl: 'https://idp.example.com/sso',
    idpCert: cert,
    usernameAttribute: undefined,
    groupsClaim: 'groups',
    roleMap: [],
    teamMap: [{ value: 'ops', team: 'Operations' }],
    defaultRole: 'viewer',
    clockSkewSeconds: 60,
  });
  const file = path.join(dir, 'c.pem');
  expect(samlIdpCertificate(loadConfig({}, configured({ CAIRN_SAML_IDP_CERT: file })).saml!)).toBe(cert);
  expect(samlIdpCertificate(loadConfig({}, configured()).saml!)).toBe(cert);
});

test.each([
  [{ CAIRN_SAML_IDP_ENTITY_ID: '' }, '--saml-idp-entity-id (CAIRN_SAML_IDP_ENTITY_ID): required when --saml-idp-sso-url is set'],
  [{ CAIRN_SAML_IDP_CERT: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----' }, '--saml-idp-cert (CAIRN_SAML_IDP_CERT): does not hold a PEM X.509 certificate'],
  [{ CAIRN_SAML_ACS_URL: 'https://cairn.example.com/elsewhere' }, "--saml-acs-url (CAIRN_SAML_ACS_URL): must name this server's assertion consumer service: its path ends in /auth/saml/acs"],
  [{ CAIRN_SAML_IDP_SSO_URL: 'http://idp.example.com/sso' }, '--saml-idp-sso-url (CAIRN_SAML_IDP_SSO_URL): the single sign-on URL must be an https URL (plain http only for a loopback host)'],
  [{ CAIRN_SAML_ROLE_MAP: 'ops=root' }, '--saml-role-map (CAIRN_SAML_ROLE_MAP): "root" is not a role (admin, operator or viewer)'],
  [{ CAIRN_SAML_DEFAULT_ROLE: 'refuse' }, '--saml-default-role (CAIRN_SAML_DEFAULT_ROLE): refuse needs --saml-role-map (CAIRN_SAML_ROLE_MAP), or nobody could sign in'],
  [{ CAIRN_SAML_CLOCK_SKEW: '900' }, '--saml-clock-skew (CAIRN_SAML_CLOCK_SKEW): at most 300'],
])('%o is refused naming the flag', (extra, message) => {
  expect(() => loadConfig({}, configured(extra))).toThrow(message);
});

test('a certificate file that cannot be read, or holds no certificate, is refused naming the flag', () => {
  expect(() => samlIdpCertificate({ idpCert: '/nowhere/cert.pem' })).toThrow('--saml-idp-cert (CAIRN_SAML_IDP_CERT): cannot read /nowhere/cert.pem: ENOENT');
  const key = path.join(dir, 'k.pem');
  expect(() => samlIdpCertificate({ idpCert: key })).toThrow(`--saml-idp-cert (CAIRN_SAML_IDP_CERT): ${key} does not hold a PEM X.509 certificate`);
});

test('the mapping reads attributes as OpenID Connect reads claims, its refusal naming the SAML flags', () => {
  const saml = loadConfig({}, configured({ CAIRN_SAML_ROLE_MAP: 'ops=operator', CAIRN_SAML_DEFAULT_ROLE: 'refuse' })).saml!;
  expect(mapClaims(saml, { groups: ['ops'] })).toMatchObject({ role: 'operator' });
  expect(mapClaims(saml, { groups: 'other' })).toEqual({
    refused: 'no --saml-role-map value matches the groups attribute, and --saml-default-role is refuse: an admin maps one of your groups to a role first',
  });
});
