import {
  ansibleCredentialsOf,
  BUILT_IN_KINDS,
  builtInKind,
  credentialStatus,
  injectedFileName,
  injectionOf,
  templateFault,
  type OpenedCredential,
} from '../../core/credentials/credential-kinds';
import { identityTokenAudience } from '../../core/credentials/federated-kinds';
import { runTokenLifetimeSeconds } from '../../core/federation/run-token';

const opened = (kind: string, values: Record<string, string>, id = 'cred_1'): OpenedCredential => {
  const def = builtInKind(kind)!;
  return { id, name: kind, kind, fields: def.fields, injectors: def.injectors, values };
};

describe('credential kinds', () => {
  test('fifteen built-in kinds; the four federated ones have no secret field; every injector names only its own fields and files', () => {
    expect(BUILT_IN_KINDS).toHaveLength(15);
    expect(new Set(BUILT_IN_KINDS.map((k) => k.kind)).size).toBe(15);
    for (const kind of BUILT_IN_KINDS) {
      if (kind.federated) expect(kind.fields.some((f) => f.secret)).toBe(false);
      const files = Object.keys(kind.injectors.files);
      for (const t of Object.values(kind.injectors.files)) expect(templateFault(t, kind.fields, files, true)).toBeUndefined();
      for (const t of [...Object.values(kind.injectors.env), ...Object.values(kind.injectors.extra_vars)]) {
        expect(templateFault(t, kind.fields, files, false)).toBeUndefined();
      }
    }
  });

  test('an injection fills set fields, skips unset ones, names files per credential and lists every secret', () => {
    const injection = injectionOf(
      [opened('machine', { username: 'deploy', ssh_key_data: 'KEY' }), opened('aws', { access_key: 'AK', secret_key: 'SK' }, 'cred_2')],
      '/work/run',
    );
    const keyName = injectedFileName('cred_1', 'ssh_key');
    expect(injection.files).toEqual({ [keyName]: 'KEY' });
    expect(injection.env).toEqual({
      CAIRN_MACHINE_USERNAME: 'deploy',
      CAIRN_SSH_KEY_FILE: `/work/run/${keyName}`,
      AWS_ACCESS_KEY_ID: 'AK',
      AWS_SECRET_ACCESS_KEY: 'SK',
    });
    expect(injection.secrets.sort()).toEqual(['KEY', 'SK']);
  });

  test('a PEM key file ends with a newline', () => {
    const injection = injectionOf([opened('machine', { ssh_key_data: '-----BEGIN KEY-----\nabc\n-----END KEY-----' })], '/w');
    expect(Object.values(injection.files)[0].endsWith('\n')).toBe(true);
  });

  test('ansible takes the machine credential as its options, the rest as the generic injection', () => {
    const result = ansibleCredentialsOf(
      [opened('machine', { username: 'deploy', ssh_key_data: 'KEY', become_method: 'sudo', become_password: 'BP' }), opened('vault', { vault_password: 'VP' }, 'cred_2')],
      '/w',
    );
    expect(result.extraVars).toMatchObject({ ansible_user: 'deploy', ansible_become_method: 'sudo', ansible_ssh_private_key_file: result.sshKeyFile });
    expect(result.becomePassword).toBe('BP');
    expect(result.env.ANSIBLE_VAULT_PASSWORD_FILE).toBe(`/w/${injectedFileName('cred_2', 'vault_password')}`);
    expect(result.secrets.sort()).toEqual(['BP', 'KEY', 'VP']);
    expect(Object.keys(result.files).sort()).toEqual([injectedFileName('cred_1', 'ssh_key'), injectedFileName('cred_2', 'vault_password')].sort());
  });

  test('status: needs_secret until a required secret (or, with none required, any secret) is set', () => {
    expect(credentialStatus(builtInKind('aws')!.fields, [])).toBe('needs_secret');
    expect(credentialStatus(builtInKind('aws')!.fields, ['security_token'])).toBe('needs_secret');
    expect(credentialStatus(builtInKind('aws')!.fields, ['secret_key'])).toBe('ready');
    expect(credentialStatus(builtInKind('machine')!.fields, [])).toBe('needs_secret');
    expect(credentialStatus(builtInKind('machine')!.fields, ['password'])).toBe('ready');
    expect(credentialStatus(builtInKind('oidc_token')!.fields, [])).toBe('ready');
  });
});

describe('federated kinds and their identity token', () => {
  const WORK = '/work/run_1-1';
  const token = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJydW4ifQ.c2lnbmF0dXJl';
  const withToken = (kind: string, values: Record<string, string>) => ({ ...opened(kind, values), identityToken: token });

  test('each cloud gets the audience its token exchange expects', () => {
    expect(identityTokenAudience(opened('aws_oidc', { role_arn: 'arn:aws:iam::1:role/r' }))).toBe('sts.amazonaws.com');
    expect(identityTokenAudience(opened('aws_oidc', { role_arn: 'arn:aws:iam::1:role/r', audience: 'cairn' }))).toBe('cairn');
    for (const provider of ['projects/1/locations/global/workloadIdentityPools/p/providers/c', '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/c', 'https://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/c']) {
      expect(identityTokenAudience(opened('gcp_oidc', { workload_identity_provider: provider }))).toBe('//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/c');
    }
    expect(identityTokenAudience(opened('azure_oidc', { tenant: 't', client: 'c' }))).toBe('api://AzureADTokenExchange');
    expect(identityTokenAudience(opened('oidc_token', { audience: 'https://vault.example' }))).toBe('https://vault.example');
  });

  test('the token is a file each SDK is pointed at, beside the kind\'s settings, and a secret for the masker', () => {
    const tokenFile = `${WORK}/${injectedFileName('cred_1', 'identity_token')}`;
    const aws = injectionOf([withToken('aws_oidc', { role_arn: 'arn:aws:iam::1:role/r' })], WORK);
    expect(aws.env).toMatchObject({ AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile, AWS_ROLE_ARN: 'arn:aws:iam::1:role/r' });
    expect(aws.files).toEqual({ [injectedFileName('cred_1', 'identity_token')]: token });
    expect(aws.secrets).toEqual([token]);

    const gcp = injectionOf([withToken('gcp_oidc', { workload_identity_provider: 'projects/1/locations/global/workloadIdentityPools/p/providers/c' })], WORK);
    const configName = injectedFileName('cred_1', 'external_account');
    expect(gcp.env).toMatchObject({ GOOGLE_APPLICATION_CREDENTIALS: `${WORK}/${configName}` });
    expect(JSON.parse(gcp.files[configName])).toEqual({
      type: 'external_account',
      audience: '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/c',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: 'https://sts.googleapis.com/v1/token',
      credential_source: { file: tokenFile },
    });

    const azure = injectionOf([withToken('azure_oidc', { tenant: 't', client: 'c' })], WORK);
    expect(azure.env).toMatchObject({ AZURE_FEDERATED_TOKEN_FILE: tokenFile, AZURE_CLIENT_ID: 'c', AZURE_TENANT_ID: 't' });
    expect(injectionOf([withToken('oidc_token', { audience: 'a' })], WORK).env).toMatchObject({ CAIRN_OIDC_TOKEN_FILE: tokenFile });
    // Without a token (never minted), nothing of it is injected.
    expect(injectionOf([opened('aws_oidc', { role_arn: 'r' })], WORK).env.AWS_WEB_IDENTITY_TOKEN_FILE).toBeUndefined();
  });

  test('a token lives as long as the run may, from five minutes to an hour', () => {
    expect([0, 10, 600, 7200].map(runTokenLifetimeSeconds)).toEqual([3600, 300, 600, 3600]);
  });
});
