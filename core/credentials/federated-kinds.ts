/**
 * How the four federated kinds (spec part A 2.9 rule 3, part B 5.4) hand a run its identity token:
 * the token's audience each cloud's token exchange expects, and the files and variables each
 * cloud's SDKs and CLIs read. The token itself is minted per run and credential
 * (services/federation/run-tokens.ts); these rules only place it.
 */

export const FEDERATED_KINDS = ['aws_oidc', 'gcp_oidc', 'azure_oidc', 'oidc_token'] as const;
export type FederatedKind = (typeof FEDERATED_KINDS)[number];

/** What the rules read of an opened credential (credential-kinds.ts OpenedCredential). */
interface FederatedCredential {
  kind: string;
  /** Its settings by field. */
  values: Record<string, string>;
}

export const isFederatedKind = (kind: string): kind is FederatedKind => (FEDERATED_KINDS as readonly string[]).includes(kind);

/** The variable an `oidc_token` credential names its token file by. */
export const OIDC_TOKEN_FILE_VARIABLE = 'CAIRN_OIDC_TOKEN_FILE';

/** Every variable identityTokenInjection sets (a `CAIRN_` name among them, which only a built-in kind may set). */
export const IDENTITY_TOKEN_VARIABLES = [
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'GOOGLE_APPLICATION_CREDENTIALS',
  'CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE',
  'AZURE_FEDERATED_TOKEN_FILE',
  'ARM_OIDC_TOKEN_FILE_PATH',
  OIDC_TOKEN_FILE_VARIABLE,
] as const;

/** The token type of an external-account credentials file reading a JWT from a file (Google's STS). */
const GCP_JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

/** `projects/…/providers/…` however it is written (bare, `//iam.googleapis.com/…` or `https://iam.googleapis.com/…`). */
const gcpProviderName = (value: string) => value.replace(/^(https:)?\/\/iam\.googleapis\.com\//, '');

/**
 * The `aud` of the credential's token: AWS STS expects `sts.amazonaws.com` unless the role's
 * provider was given another; Google the workload identity provider's resource name; Azure AD
 * `api://AzureADTokenExchange`; `oidc_token` whatever its setting says.
 */
export function identityTokenAudience(credential: FederatedCredential): string {
  const v = credential.values;
  switch (credential.kind as FederatedKind) {
    case 'aws_oidc':
      return v.audience || 'sts.amazonaws.com';
    case 'gcp_oidc':
      return `//iam.googleapis.com/${gcpProviderName(v.workload_identity_provider ?? '')}`;
    case 'azure_oidc':
      return 'api://AzureADTokenExchange';
    case 'oidc_token':
      return v.audience ?? '';
  }
}

/**
 * The files (name in the work dir -> content) and variables that give a run the credential's
 * token, beside what the kind's own injectors set from its settings (core/credentials/credential-kinds.ts):
 * - aws_oidc: `AWS_WEB_IDENTITY_TOKEN_FILE` (with the kind's `AWS_ROLE_ARN`), which every AWS SDK
 *   and the CLI exchange through `AssumeRoleWithWebIdentity`;
 * - gcp_oidc: an external-account credentials file (`GOOGLE_APPLICATION_CREDENTIALS`, and gcloud's
 *   `CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE`) whose `credential_source.file` is the token file,
 *   impersonating the service account when one is set;
 * - azure_oidc: `AZURE_FEDERATED_TOKEN_FILE` (Azure Identity's workload identity credential, with
 *   the kind's `AZURE_CLIENT_ID` and `AZURE_TENANT_ID`) and `ARM_OIDC_TOKEN_FILE_PATH` (Terraform);
 * - oidc_token: `CAIRN_OIDC_TOKEN_FILE`.
 */
export function identityTokenInjection(
  credential: FederatedCredential,
  token: string,
  /** A file's name in the work dir and its path, by key (credential-kinds.ts injectedFileName). */
  fileOf: (key: 'identity_token' | 'external_account') => { name: string; path: string },
): { env: Record<string, string>; files: Record<string, string> } {
  const { name: tokenName, path: tokenPath } = fileOf('identity_token');
  const files: Record<string, string> = { [tokenName]: token };
  switch (credential.kind as FederatedKind) {
    case 'aws_oidc':
      return { files, env: { AWS_WEB_IDENTITY_TOKEN_FILE: tokenPath } };
    case 'gcp_oidc': {
      const email = credential.values.service_account_email;
      const { name: configName, path: configPath } = fileOf('external_account');
      const config = {
        type: 'external_account',
        audience: identityTokenAudience(credential),
        subject_token_type: GCP_JWT_TOKEN_TYPE,
        token_url: 'https://sts.googleapis.com/v1/token',
        credential_source: { file: tokenPath },
        ...(email && { service_account_impersonation_url: `https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/${email}:generateAccessToken` }),
      };
      return {
        files: { ...files, [configName]: `${JSON.stringify(config, null, 2)}\n` },
        env: { GOOGLE_APPLICATION_CREDENTIALS: configPath, CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE: configPath },
      };
    }
    case 'azure_oidc':
      return { files, env: { AZURE_FEDERATED_TOKEN_FILE: tokenPath, ARM_OIDC_TOKEN_FILE_PATH: tokenPath } };
    case 'oidc_token':
      return { files, env: { [OIDC_TOKEN_FILE_VARIABLE]: tokenPath } };
  }
}
