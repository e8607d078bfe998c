import { inspect } from 'node:util';
import { forgeSettingsFrom } from '../../core/access/forge-settings';

const secret = 'forge-secret-value';

test('no client id: no forge links; a stray flag or secret names what it needs', () => {
  expect(forgeSettingsFrom({}, {})).toBeUndefined();
  expect(() => forgeSettingsFrom({ forgeGiteaUrl: 'https://git.example.com' }, {})).toThrow('--forge-gitea-url (CAIRN_FORGE_GITEA_URL): needs --forge-gitea-client-id (CAIRN_FORGE_GITEA_CLIENT_ID) too');
  expect(() => forgeSettingsFrom({}, { CAIRN_FORGE_GITHUB_CLIENT_SECRET: secret })).toThrow('CAIRN_FORGE_GITHUB_CLIENT_SECRET: needs --forge-github-client-id');
  expect(() => forgeSettingsFrom({ forgeRedirectUrl: 'https://cairn.example.com/auth/forge/callback' }, {})).toThrow("--forge-redirect-url (CAIRN_FORGE_REDIRECT_URL): needs a forge's client id");
});

test('a client id needs its secret and the redirect URL; defaults for github.com and gitlab.com; gitea needs its URL', () => {
  const redirect = { forgeRedirectUrl: 'https://cairn.example.com/auth/forge/callback' };
  expect(() => forgeSettingsFrom({ ...redirect, forgeGithubClientId: 'id' }, {})).toThrow('CAIRN_FORGE_GITHUB_CLIENT_SECRET: required when --forge-github-client-id');
  expect(() => forgeSettingsFrom({ forgeGithubClientId: 'id' }, { CAIRN_FORGE_GITHUB_CLIENT_SECRET: secret })).toThrow('--forge-redirect-url (CAIRN_FORGE_REDIRECT_URL): required');
  expect(() => forgeSettingsFrom({ ...redirect, forgeGiteaClientId: 'id' }, { CAIRN_FORGE_GITEA_CLIENT_SECRET: secret })).toThrow('--forge-gitea-url (CAIRN_FORGE_GITEA_URL): required');
  expect(() => forgeSettingsFrom({ forgeRedirectUrl: 'https://cairn.example.com/elsewhere', forgeGithubClientId: 'id' }, { CAIRN_FORGE_GITHUB_CLIENT_SECRET: secret })).toThrow('ends in /auth/forge/callback');
  expect(() => forgeSettingsFrom({ ...redirect, forgeGitlabClientId: 'id', forgeGitlabUrl: 'http://gitlab.example.com' }, { CAIRN_FORGE_GITLAB_CLIENT_SECRET: secret })).toThrow('must be an https URL');
  const s = forgeSettingsFrom({ ...redirect, forgeGithubClientId: 'gh', forgeGitlabClientId: 'gl' }, { CAIRN_FORGE_GITHUB_CLIENT_SECRET: secret, CAIRN_FORGE_GITLAB_CLIENT_SECRET: secret })!;
  expect([...s.forges.values()].map((f) => [f.kind, f.baseUrl, f.clientId])).toEqual([
    ['github', 'https://github.com', 'gh'],
    ['gitlab', 'https://gitlab.com', 'gl'],
  ]);
  expect(inspect(s)).not.toContain(secret);
  expect(JSON.stringify(s.forges.get('github'))).not.toContain(secret);
});
