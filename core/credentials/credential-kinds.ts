import { identityTokenInjection } from './federated-kinds';

/**
 * Credential kinds as pure rules (spec part A 2.9, part B 5.3, 5.4): the fifteen built-in kinds,
 * the shape of a custom credential type, and how a credential's field values are injected into a
 * run (environment variables, extra vars, files), as the leading tools do it.
 *
 * A kind is a list of fields, each secret or not, and its injectors: templates over the field
 * values. `{{ name }}` is a field's value; `{{ file.<key> }}` is the path of the injected file
 * `<key>` in the run's work dir. A template whose fields are all unset injects nothing, so an
 * optional field left empty sets no variable and writes no file.
 */

export interface CredentialField {
  /** The field's name: lowercase letters, digits and `_`, starting with a letter. */
  id: string;
  label: string;
  /** Sealed at rest, never returned, masked in run output. */
  secret: boolean;
  required: boolean;
  /** Text of several lines, such as a private key. */
  multiline?: boolean;
  /** The values it may take, when limited. */
  choices?: string[];
  help?: string;
}

export interface Injectors {
  /** Environment variable name -> template. */
  env: Record<string, string>;
  /** Extra var name -> template. */
  extra_vars: Record<string, string>;
  /** File key -> template of its content; written 0600 into the run's work dir. */
  files: Record<string, string>;
}

export interface KindDefinition {
  /** The kind's name, as `kind` on a credential. */
  kind: string;
  label: string;
  fields: CredentialField[];
  injectors: Injectors;
  /** A federated kind: settings only, never a secret (spec part B 5.4). */
  federated?: true;
}

const text = (id: string, label: string, extra: Partial<CredentialField> = {}): CredentialField => ({ id, label, secret: false, required: false, ...extra });
const secret = (id: string, label: string, extra: Partial<CredentialField> = {}): CredentialField => ({ id, label, secret: true, required: false, ...extra });
const BECOME_METHODS = ['sudo', 'su', 'pbrun', 'pfexec', 'doas', 'dzdo', 'ksu', 'runas', 'machinectl'];
const none: Injectors = { env: {}, extra_vars: {}, files: {} };
/** A federated kind's token subject: the run (default) or, for clouds that match a subject exactly (Azure), the template. */
const tokenSubject = () =>
  text('subject', 'Token subject', { choices: ['run', 'template'], help: 'run: the subject names the run (default); template: its project and template only, the same for every run' });

/**
 * The built-in kinds. Environment names are the ones each ecosystem's own tools read (the AWS and
 * Azure SDKs and Terraform providers, Google's application default credentials, the Kubernetes
 * and network Ansible collections, the HashiCorp Vault CLI); the rest carry a `CAIRN_` prefix.
 */
export const BUILT_IN_KINDS: readonly KindDefinition[] = [
  {
    kind: 'machine',
    label: 'Machine (SSH)',
    fields: [
      text('username', 'Username'),
      secret('password', 'Password'),
      secret('ssh_key_data', 'SSH private key', { multiline: true }),
      secret('ssh_key_unlock', 'Private key passphrase'),
      text('become_method', 'Privilege escalation method', { choices: BECOME_METHODS }),
      text('become_username', 'Privilege escalation username'),
      secret('become_password', 'Privilege escalation password'),
    ],
    injectors: {
      env: {
        CAIRN_MACHINE_USERNAME: '{{ username }}',
        CAIRN_MACHINE_PASSWORD: '{{ password }}',
        CAIRN_SSH_KEY_FILE: '{{ file.ssh_key }}',
        CAIRN_SSH_KEY_PASSPHRASE: '{{ ssh_key_unlock }}',
        CAIRN_BECOME_METHOD: '{{ become_method }}',
        CAIRN_BECOME_USERNAME: '{{ become_username }}',
        CAIRN_BECOME_PASSWORD: '{{ become_password }}',
      },
      extra_vars: {},
      files: { ssh_key: '{{ ssh_key_data }}' },
    },
  },
  {
    kind: 'scm',
    label: 'Source control',
    fields: [
      text('username', 'Username'),
      secret('password', 'Password or token'),
      secret('ssh_key_data', 'SSH private key', { multiline: true }),
      secret('ssh_key_unlock', 'Private key passphrase'),
    ],
    injectors: {
      env: {
        CAIRN_SCM_USERNAME: '{{ username }}',
        CAIRN_SCM_PASSWORD: '{{ password }}',
        CAIRN_SCM_SSH_KEY_FILE: '{{ file.ssh_key }}',
        GIT_SSH_COMMAND: 'ssh -i {{ file.ssh_key }} -o IdentitiesOnly=yes',
      },
      extra_vars: {},
      files: { ssh_key: '{{ ssh_key_data }}' },
    },
  },
  {
    kind: 'vault',
    label: 'Ansible Vault password',
    fields: [secret('vault_password', 'Vault password', { required: true }), text('vault_id', 'Vault identifier')],
    injectors: {
      env: { ANSIBLE_VAULT_PASSWORD_FILE: '{{ file.vault_password }}', CAIRN_VAULT_ID: '{{ vault_id }}' },
      extra_vars: {},
      files: { vault_password: '{{ vault_password }}' },
    },
  },
  {
    kind: 'aws',
    label: 'Amazon Web Services',
    fields: [
      text('access_key', 'Access key id', { required: true }),
      secret('secret_key', 'Secret access key', { required: true }),
      secret('security_token', 'Session token'),
      text('region', 'Default region'),
    ],
    injectors: {
      env: {
        AWS_ACCESS_KEY_ID: '{{ access_key }}',
        AWS_SECRET_ACCESS_KEY: '{{ secret_key }}',
        AWS_SESSION_TOKEN: '{{ security_token }}',
        AWS_SECURITY_TOKEN: '{{ security_token }}',
        AWS_DEFAULT_REGION: '{{ region }}',
        AWS_REGION: '{{ region }}',
      },
      extra_vars: {},
      files: {},
    },
  },
  {
    kind: 'gcp',
    label: 'Google Cloud',
    fields: [
      text('project', 'Project id'),
      text('client_email', 'Service account email'),
      secret('service_account_key', 'Service account key (JSON)', { required: true, multiline: true }),
    ],
    injectors: {
      env: {
        GOOGLE_APPLICATION_CREDENTIALS: '{{ file.service_account_key }}',
        GOOGLE_CLOUD_PROJECT: '{{ project }}',
        CLOUDSDK_CORE_PROJECT: '{{ project }}',
        GCE_EMAIL: '{{ client_email }}',
      },
      extra_vars: {},
      files: { service_account_key: '{{ service_account_key }}' },
    },
  },
  {
    kind: 'azure',
    label: 'Microsoft Azure',
    fields: [
      text('subscription', 'Subscription id', { required: true }),
      text('tenant', 'Tenant id'),
      text('client', 'Client id'),
      secret('secret', 'Client secret', { required: true }),
    ],
    injectors: {
      env: {
        AZURE_SUBSCRIPTION_ID: '{{ subscription }}',
        AZURE_TENANT: '{{ tenant }}',
        AZURE_CLIENT_ID: '{{ client }}',
        AZURE_SECRET: '{{ secret }}',
        ARM_SUBSCRIPTION_ID: '{{ subscription }}',
        ARM_TENANT_ID: '{{ tenant }}',
        ARM_CLIENT_ID: '{{ client }}',
        ARM_CLIENT_SECRET: '{{ secret }}',
      },
      extra_vars: {},
      files: {},
    },
  },
  {
    kind: 'vmware',
    label: 'VMware vCenter',
    fields: [
      text('host', 'vCenter host', { required: true }),
      text('username', 'Username', { required: true }),
      secret('password', 'Password', { required: true }),
    ],
    injectors: {
      env: { VMWARE_HOST: '{{ host }}', VMWARE_USER: '{{ username }}', VMWARE_PASSWORD: '{{ password }}' },
      extra_vars: {},
      files: {},
    },
  },
  {
    kind: 'kubernetes',
    label: 'Kubernetes bearer token',
    fields: [
      text('host', 'API server URL', { required: true }),
      secret('bearer_token', 'Bearer token', { required: true }),
      text('ssl_ca_cert', 'Certificate authority (PEM)', { multiline: true }),
      text('verify_ssl', 'Verify the server certificate', { choices: ['true', 'false'] }),
    ],
    injectors: {
      env: {
        K8S_AUTH_HOST: '{{ host }}',
        K8S_AUTH_API_KEY: '{{ bearer_token }}',
        K8S_AUTH_SSL_CA_CERT: '{{ file.ssl_ca_cert }}',
        K8S_AUTH_VERIFY_SSL: '{{ verify_ssl }}',
      },
      extra_vars: {},
      files: { ssl_ca_cert: '{{ ssl_ca_cert }}' },
    },
  },
  {
    kind: 'registry',
    label: 'Container registry',
    fields: [text('host', 'Registry host', { required: true }), text('username', 'Username'), secret('password', 'Password or token', { required: true })],
    injectors: {
      env: { CAIRN_REGISTRY_HOST: '{{ host }}', CAIRN_REGISTRY_USERNAME: '{{ username }}', CAIRN_REGISTRY_PASSWORD: '{{ password }}' },
      extra_vars: {},
      files: {},
    },
  },
  {
    kind: 'network',
    label: 'Network device',
    fields: [
      text('username', 'Username', { required: true }),
      secret('password', 'Password'),
      secret('ssh_key_data', 'SSH private key', { multiline: true }),
      secret('ssh_key_unlock', 'Private key passphrase'),
      text('authorize', 'Enter privileged mode', { choices: ['true', 'false'] }),
      secret('authorize_password', 'Privileged mode password'),
    ],
    injectors: {
      env: {
        ANSIBLE_NET_USERNAME: '{{ username }}',
        ANSIBLE_NET_PASSWORD: '{{ password }}',
        ANSIBLE_NET_SSH_KEYFILE: '{{ file.ssh_key }}',
        ANSIBLE_NET_AUTHORIZE: '{{ authorize }}',
        ANSIBLE_NET_AUTH_PASS: '{{ authorize_password }}',
      },
      extra_vars: {},
      files: { ssh_key: '{{ ssh_key_data }}' },
    },
  },
  {
    kind: 'hashicorp_token',
    label: 'HashiCorp-style token',
    fields: [text('url', 'Server URL', { required: true }), secret('token', 'Token', { required: true }), text('namespace', 'Namespace')],
    injectors: {
      env: { VAULT_ADDR: '{{ url }}', VAULT_TOKEN: '{{ token }}', VAULT_NAMESPACE: '{{ namespace }}' },
      extra_vars: {},
      files: {},
    },
  },
  {
    kind: 'aws_oidc',
    label: 'AWS through an identity token',
    federated: true,
    fields: [text('role_arn', 'Role ARN', { required: true }), text('audience', 'Audience'), text('session_name', 'Session name'), text('region', 'Region'), tokenSubject()],
    injectors: {
      env: { AWS_ROLE_ARN: '{{ role_arn }}', AWS_ROLE_SESSION_NAME: '{{ session_name }}', AWS_REGION: '{{ region }}', CAIRN_OIDC_AUDIENCE: '{{ audience }}' },
      extra_vars: {},
      files: {},
    },
  },
  {
    kind: 'gcp_oidc',
    label: 'Google Cloud through an identity token',
    federated: true,
    fields: [
      text('workload_identity_provider', 'Workload identity provider', { required: true }),
      text('service_account_email', 'Service account to impersonate'),
      text('project', 'Project id'),
      tokenSubject(),
    ],
    injectors: {
      env: {
        CAIRN_OIDC_AUDIENCE: '//iam.googleapis.com/{{ workload_identity_provider }}',
        CAIRN_GCP_SERVICE_ACCOUNT: '{{ service_account_email }}',
        GOOGLE_CLOUD_PROJECT: '{{ project }}',
      },
      extra_vars: {},
      files: {},
    },
  },
  {
    kind: 'azure_oidc',
    label: 'Azure through an identity token',
    federated: true,
    fields: [text('tenant', 'Tenant id', { required: true }), text('client', 'Client id', { required: true }), text('subscription', 'Subscription id'), tokenSubject()],
    injectors: {
      env: {
        AZURE_TENANT_ID: '{{ tenant }}',
        AZURE_CLIENT_ID: '{{ client }}',
        AZURE_SUBSCRIPTION_ID: '{{ subscription }}',
        ARM_TENANT_ID: '{{ tenant }}',
        ARM_CLIENT_ID: '{{ client }}',
        ARM_SUBSCRIPTION_ID: '{{ subscription }}',
        ARM_USE_OIDC: 'true',
      },
      extra_vars: {},
      files: {},
    },
  },
  {
    kind: 'oidc_token',
    label: 'Identity token',
    federated: true,
    fields: [text('audience', 'Audience', { required: true }), tokenSubject()],
    injectors: { ...none, env: { CAIRN_OIDC_AUDIENCE: '{{ audience }}' } },
  },
];

export const BUILT_IN_KIND_NAMES = BUILT_IN_KINDS.map((k) => k.kind);

export function builtInKind(kind: string): KindDefinition | undefined {
  return BUILT_IN_KINDS.find((k) => k.kind === kind);
}

/** A field name, and a file key. */
export const FIELD_NAME = /^[a-z][a-z0-9_]{0,63}$/;
/** An environment variable or extra var name an injector may set. */
export const INJECTED_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}/g;

/** The names a template refers to: field names, and `file.<key>` for file paths. */
export function placeholdersOf(template: string): string[] {
  return [...template.matchAll(PLACEHOLDER)].map((m) => m[1]);
}

/**
 * Why an injector template is not valid for these fields and files, naming the placeholder; undefined
 * when it is. A file's own content may not refer to a file path.
 */
export function templateFault(template: string, fields: readonly CredentialField[], files: readonly string[], inFile: boolean): string | undefined {
  for (const name of placeholdersOf(template)) {
    if (name.startsWith('file.')) {
      if (inFile) return `a file's content cannot refer to ${name}`;
      if (!files.includes(name.slice(5))) return `{{ ${name} }} names no file of the injectors`;
    } else if (!fields.some((f) => f.id === name)) {
      return `{{ ${name} }} names no field`;
    }
  }
  return undefined;
}

/** What a credential holds, opened: every set field's value, secret or not. */
export interface OpenedCredential {
  id: string;
  name: string;
  kind: string;
  fields: readonly CredentialField[];
  injectors: Injectors;
  /** Field -> value, non-secret and secret alike; unset fields are absent. */
  values: Record<string, string>;
  /** A federated kind's run identity token, minted for this run (services/federation/run-tokens.ts): a secret. */
  identityToken?: string;
}

/** A credential's injection into a run, before any file is written. */
export interface Injection {
  env: Record<string, string>;
  extraVars: Record<string, string>;
  /** File name in the work dir -> content. */
  files: Record<string, string>;
  /** Every secret value opened, for the run's output masker. */
  secrets: string[];
}

/** The work dir file name of a credential's injected file: one per credential and key, so two credentials never collide. */
export function injectedFileName(credentialId: string, key: string): string {
  return `.cairn-credential-${credentialId}-${key}`;
}

/**
 * Fills one template: `undefined` when every field it names is unset (it injects nothing), else
 * the text with each placeholder replaced (an unset field as "").
 */
function fill(template: string, values: Record<string, string>, filePaths: Record<string, string>): string | undefined {
  const names = placeholdersOf(template);
  if (names.length > 0 && names.every((n) => (n.startsWith('file.') ? filePaths[n.slice(5)] === undefined : !values[n]))) return undefined;
  return template.replace(PLACEHOLDER, (_, name: string) => (name.startsWith('file.') ? (filePaths[name.slice(5)] ?? '') : (values[name] ?? '')));
}

/**
 * What the credentials inject into a run whose work dir is `workDir`, in order: a later
 * credential's variable of the same name wins. Files are named by `injectedFileName`; a file whose
 * fields are unset is not written and its path variables are not set.
 */
export function injectionOf(credentials: readonly OpenedCredential[], workDir: string): Injection {
  const injection: Injection = { env: {}, extraVars: {}, files: {}, secrets: [] };
  for (const credential of credentials) {
    const filePaths: Record<string, string> = {};
    for (const [key, template] of Object.entries(credential.injectors.files)) {
      const content = fill(template, credential.values, {});
      if (content === undefined || content === '') continue;
      const name = injectedFileName(credential.id, key);
      injection.files[name] = content.endsWith('\n') || !/-----BEGIN/.test(content) ? content : `${content}\n`;
      filePaths[key] = `${workDir}/${name}`;
    }
    for (const [name, template] of Object.entries(credential.injectors.env)) {
      const value = fill(template, credential.values, filePaths);
      if (value !== undefined) injection.env[name] = value;
    }
    for (const [name, template] of Object.entries(credential.injectors.extra_vars)) {
      const value = fill(template, credential.values, filePaths);
      if (value !== undefined) injection.extraVars[name] = value;
    }
    for (const field of credential.fields) {
      if (field.secret && credential.values[field.id]) injection.secrets.push(credential.values[field.id]);
    }
    if (credential.identityToken !== undefined) {
      const placed = identityTokenInjection(credential, credential.identityToken, (key) => {
        const name = injectedFileName(credential.id, key);
        return { name, path: `${workDir}/${name}` };
      });
      Object.assign(injection.files, placed.files);
      Object.assign(injection.env, placed.env);
      injection.secrets.push(credential.identityToken);
    }
  }
  return injection;
}

/**
 * What the ansible tool takes from a run's credentials beyond the generic injection: the machine
 * credential's connection settings as extra vars, the path of its key file, and the become and
 * key passwords, which the tool hands to ansible its own way (never on a command line). The first
 * machine credential counts; the rest inject as the generic injection does.
 */
export interface AnsibleCredentials {
  env: Record<string, string>;
  files: Record<string, string>;
  extraVars: Record<string, string>;
  sshKeyFile?: string;
  sshKeyPassphrase?: string;
  password?: string;
  becomePassword?: string;
  /** Every secret value opened, for the run's output masker. */
  secrets: string[];
}

export function ansibleCredentialsOf(credentials: readonly OpenedCredential[], workDir: string): AnsibleCredentials {
  const machine = credentials.find((c) => c.kind === 'machine');
  const others = credentials.filter((c) => c !== machine);
  const generic = injectionOf(others, workDir);
  const result: AnsibleCredentials = { env: generic.env, files: generic.files, extraVars: generic.extraVars, secrets: generic.secrets };
  if (!machine) return result;
  const v = machine.values;
  for (const field of machine.fields) if (field.secret && v[field.id]) result.secrets.push(v[field.id]);
  if (v.username) result.extraVars.ansible_user = v.username;
  if (v.become_method) result.extraVars.ansible_become_method = v.become_method;
  if (v.become_username) result.extraVars.ansible_become_user = v.become_username;
  if (v.ssh_key_data) {
    const name = injectedFileName(machine.id, 'ssh_key');
    result.files[name] = v.ssh_key_data.endsWith('\n') ? v.ssh_key_data : `${v.ssh_key_data}\n`;
    result.sshKeyFile = `${workDir}/${name}`;
    result.extraVars.ansible_ssh_private_key_file = result.sshKeyFile;
  }
  if (v.ssh_key_unlock) result.sshKeyPassphrase = v.ssh_key_unlock;
  if (v.password) result.password = v.password;
  if (v.become_password) result.becomePassword = v.become_password;
  return result;
}

/** A credential's status: `needs_secret` when a required secret is unset, or its kind has secrets and none is set. */
export function credentialStatus(fields: readonly CredentialField[], setSecrets: readonly string[]): 'ready' | 'needs_secret' {
  const secrets = fields.filter((f) => f.secret);
  if (secrets.length === 0) return 'ready';
  if (secrets.some((f) => f.required && !setSecrets.includes(f.id))) return 'needs_secret';
  return secrets.some((f) => setSecrets.includes(f.id)) ? 'ready' : 'needs_secret';
}

/** The sealing context of a credential's secret field. */
