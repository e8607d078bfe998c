import path from 'node:path';
import { inspect } from 'node:util';
import { z } from 'zod';
import { formatByteSize, parseByteSize } from './byte-size';
import { parseDuration } from './duration';
import { RUN_BOUND_SETTINGS } from './runs/run-bound-settings';
import { DeliverySettingError, deliverySettingsFrom, NOTIFICATION_SETTINGS, type DeliverySettings } from './notifications/notification-settings';
import { FORGE_SETTINGS, ForgeSettingError, forgeSettingsFrom, type ForgeSettings } from './access/forge-settings';
import { OIDC_SETTINGS, OidcSettingError, oidcSettingsFrom, type OidcSettings } from './access/oidc-settings';
import { SAML_SETTINGS, SamlSettingError, samlSettingsFrom, type SamlSettings } from './access/saml-settings';
import { providerUrlFault } from './access/sign-in-flags';
import { AI_SETTINGS, AiSettingError, aiSettingsFrom, type AiSettings } from './ai/settings';
import { sha256 } from './sha256';

/** One setting: its flag, the environment variable that also sets it, and a word on what it does. */
interface Setting {
  flag: string;
  env: string;
  help: string;
  /** A switch: given bare (`--flag`) it means true; `--flag=false` turns it off. */
  switch?: true;
}

export const SETTINGS = {
  listen: { flag: '--listen', env: 'CAIRN_LISTEN', help: 'address the API listens on (default 127.0.0.1:8080)' },
  dataDir: { flag: '--data-dir', env: 'CAIRN_DATA_DIR', help: 'where embedded services keep their files (default ./data)' },
  databaseUrl: { flag: '--database-url', env: 'DATABASE_URL', help: 'PostgreSQL URL; unset starts an embedded PostgreSQL' },
  temporalAddress: { flag: '--temporal-address', env: 'TEMPORAL_ADDRESS', help: 'Temporal frontend host:port; unset starts a dev server' },
  temporalNamespace: { flag: '--temporal-namespace', env: 'TEMPORAL_NAMESPACE', help: 'Temporal namespace (default "default")' },
  runTimeout: { flag: '--run-timeout', env: 'CAIRN_RUN_TIMEOUT', help: 'default run timeout, seconds or 90s/30m/24h; 0 means none (default 24h)' },
  leaseSeconds: { flag: '--lease-seconds', env: 'CAIRN_LEASE_SECONDS', help: 'worker lease; a worker is lost after this long without a renewal (default 30)' },
  poolSize: { flag: '--pool-size', env: 'CAIRN_POOL_SIZE', help: 'runs this server executes at once on the default queue (default 16)' },
  poolQueue: { flag: '--pool-queue', env: 'CAIRN_POOL_QUEUE', help: 'Temporal task queue of the default pool (default cairn-pool)' },
  logLevel: { flag: '--log-level', env: 'CAIRN_LOG_LEVEL', help: 'server log level (default info)' },
  licenseFile: { flag: '--license-file', env: 'CAIRN_LICENSE_FILE', help: 'signed license file raising the tier to Pro or Team (default: Community)' },
  anchorInterval: { flag: '--audit-anchor-interval', env: 'CAIRN_AUDIT_ANCHOR_INTERVAL', help: 'how often a signed anchor is taken over the audit chain, seconds or 30s/5m (default 60s)' },
  hookAnswerWait: {
    flag: '--hook-answer-wait',
    env: 'CAIRN_HOOK_ANSWER_WAIT',
    help: "how long a webhook push's answer waits for its launch to answer the outcome rather than 202 accepted: 0 (default: answered once recorded) to 4.5s, as 1500ms or 2s",
  },
  hookDeliveryRetention: {
    flag: '--hook-delivery-retention',
    env: 'CAIRN_HOOK_DELIVERY_RETENTION',
    help: 'how long a settled webhook push delivery stays readable at /v1/triggers/{id}/deliveries (default 30d)',
  },
  temporalRunStatus: {
    flag: '--temporal-run-status',
    env: 'CAIRN_TEMPORAL_RUN_STATUS',
    help: "tracked (default: a run's CairnRunStatus search attribute follows it, one more Temporal action a run) or off (no CairnRunStatus)",
  },
  streamStallTimeout: { flag: '--stream-stall-timeout', env: 'CAIRN_STREAM_STALL_TIMEOUT', help: 'a live stream whose client takes nothing this long is closed with where to resume (default 30s)' },
  runIsolation: { flag: '--run-isolation', env: 'CAIRN_RUN_ISOLATION', help: 'sandbox (default: every tool in a bubblewrap sandbox) or none (unsafe: tools run as the server)' },
  runNetwork: { flag: '--run-network', env: 'CAIRN_RUN_NETWORK', help: "a run's network: isolated (default: outbound only, no host loopback), host, or none" },
  runUser: { flag: '--run-user', env: 'CAIRN_RUN_USER', help: 'the account tools run as when the server is root (default cairn-run, created when missing)' },
  // --run-memory, --run-pids, --run-disk, --run-cpu (core/run-bound-settings.ts).
  ...RUN_BOUND_SETTINGS,
  callbackRateLimit: { flag: '--callback-rate-limit', env: 'CAIRN_CALLBACK_RATE_LIMIT', help: 'provisioning callbacks (and wrong keys) one source address may send a minute (default 20)' },
  pluginsDir: {
    flag: '--plugins-dir',
    env: 'CAIRN_PLUGINS_DIR',
    help: 'directory of plugin executables (Go SDK, go-plugin) started in filename order (default none)',
  },
  iacProviderMirror: {
    flag: '--iac-provider-mirror',
    env: 'CAIRN_IAC_PROVIDER_MIRROR',
    help: 'filesystem mirror terraform and opentofu runs install providers from (default <data dir>/iac/providers)',
  },
  iacProviderDownloads: {
    flag: '--iac-provider-downloads',
    env: 'CAIRN_IAC_PROVIDER_DOWNLOADS',
    help: "let terraform and opentofu runs download providers from their registries too, where the run's network reaches them (default false: the mirror only)",
    switch: true,
  },
  moduleFetchTimeout: {
    flag: '--module-fetch-timeout',
    env: 'CAIRN_MODULE_FETCH_TIMEOUT',
    help: "how long a terraform or opentofu plan may take fetching the configuration's registry and remote modules before the gate holds it unclassified, seconds or 30s/5m (default 2m)",
  },
  gitTimeout: { flag: '--git-timeout', env: 'CAIRN_GIT_TIMEOUT', help: "how long one git command of a project's update may take, seconds or 30s/5m (default 5m)" },
  projectLocalRoots: {
    flag: '--project-local-roots',
    env: 'CAIRN_PROJECT_LOCAL_ROOTS',
    help: 'comma-separated directories on this server whose git repositories projects may name by path or file:// (default: none; projects fetch over https or ssh only)',
  },
  open: {
    flag: '--open',
    env: 'CAIRN_OPEN',
    help: 'run open: while the install holds no token at all, a /v1 request without one acts as the first admin (default false; never on an install with tokens)',
    switch: true,
  },
  factCacheAdminOnly: {
    flag: '--fact-cache-admin-only',
    env: 'CAIRN_FACT_CACHE_ADMIN_ONLY',
    help: 'cached facts readable by admins only: fact reads below admin answer 403 (default false)',
    switch: true,
  },
  retainHistory: {
    flag: '--retain-history',
    env: 'CAIRN_RETAIN_HISTORY',
    help: 'keep only the newest N per-host and per-task ansible summaries of each host and task; N below 500 is taken as 500 (default: keep all)',
  },
  policyFile: {
    flag: '--policy-file',
    env: 'CAIRN_POLICY_FILE',
    help: 'YAML or JSON file of policy-language (Rego) approval policies, evaluated with Open Policy Agent (serve only; default none)',
  },
  attentionFile: { flag: '--attention-file', env: 'CAIRN_ATTENTION_FILE', help: 'JSON file of attention alert thresholds for the install, organizations, queues and templates' },
  workerToken: {
    flag: '--worker-token',
    env: 'CAIRN_WORKER_TOKEN',
    help: 'serve /relay/v1 to outbound `cairn worker --server` processes presenting this bearer token; comma-separate a new and an old one while rotating (default: no relay)',
  },
  federationIssuer: {
    flag: '--federation-issuer',
    env: 'CAIRN_FEDERATION_ISSUER',
    help: "this install's public https URL as an OpenID issuer of run identity tokens (aws_oidc, gcp_oidc, azure_oidc, oidc_token); unset: no tokens, discovery answers 404",
  },
  // Notification channels, accounts and --notify-on (core/notification-settings.ts).
  ...NOTIFICATION_SETTINGS,
  // OpenID Connect sign-in: the provider, the client and the claim mapping (core/access/oidc-settings.ts).
  ...OIDC_SETTINGS,
  // SAML 2.0 sign-in: the identity provider, this service provider and the attribute mapping (core/access/saml-settings.ts).
  ...SAML_SETTINGS,
  // The advisory AI provider and its bounds (core/ai/settings.ts).
  ...AI_SETTINGS,
  // Forge links: each forge's address and OAuth client, and the callback (core/access/forge-settings.ts).
  ...FORGE_SETTINGS,
} satisfies Record<string, Setting>;

export type SettingName = keyof typeof SETTINGS;

/** A duration setting of at least a second (`30s`, `5m`, `90`), read as whole seconds. */
const secondsAtLeastOne = (fallback: string) =>
  z.string().default(fallback).transform((value, ctx) => {
    const seconds = parseDuration(value);
    if (seconds === undefined || seconds < 1) {
      ctx.addIssue({ code: 'custom', message: `"${value}" is not a duration of at least a second (try 30s or 5m)` });
      return z.NEVER;
    }
    return seconds;
  });

/** The longest `--hook-answer-wait`: half a second inside the five a forge waits for an answer. */
export const HOOK_ANSWER_WAIT_MAX_MS = 4500;

/** Milliseconds from a short wait: `1500ms`, `2.5s`, or a duration as parseDuration reads it (`2s`, `0`). */
function parseWaitMs(text: string): number | undefined {
  const trimmed = text.trim();
  const ms = /^(\d+)ms$/.exec(trimmed);
  if (ms) return Number(ms[1]);
  const fraction = /^(\d+\.\d+)s$/.exec(trimmed);
  if (fraction) return Math.round(Number(fraction[1]) * 1000);
  const seconds = parseDuration(trimmed);
  return seconds === undefined ? undefined : seconds * 1000;
}

/** A size setting (`2g`, `512m`, `1048576`) of at least `min` bytes, read as bytes. */
const byteSize = (fallback: string, min: number) =>
  z.string().default(fallback).transform((value, ctx) => {
    const bytes = parseByteSize(value);
    if (bytes === undefined) {
      ctx.addIssue({ code: 'custom', message: `"${value}" is not a size (try 512m or 2g: bytes with a k, m or g suffix)` });
      return z.NEVER;
    }
    if (bytes < min) {
      ctx.addIssue({ code: 'custom', message: `"${value}" is below the least a run can start with, ${formatByteSize(min)}` });
      return z.NEVER;
    }
    return bytes;
  });

const configSchema = z.object({
  listen: z.string().regex(/^[^:]*:\d+$/, 'expected host:port').default('127.0.0.1:8080'),
  dataDir: z.string().min(1).default('./data'),
  databaseUrl: z.string().min(1).optional(),
  temporalAddress: z.string().min(1).optional(),
  temporalNamespace: z.string().min(1).default('default'),
  runTimeout: z.string().default('24h').transform((value, ctx) => {
    const seconds = parseDuration(value);
    if (seconds === undefined) {
      ctx.addIssue({ code: 'custom', message: `"${value}" is not a duration (try 3600, 90s, 30m or 24h)` });
      return z.NEVER;
    }
    return seconds;
  }),
  leaseSeconds: z.coerce.number().int().min(3).max(3600).default(30),
  poolSize: z.coerce.number().int().min(1).max(1000).default(16),
  poolQueue: z.string().min(1).max(255).default('cairn-pool'),
  logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  licenseFile: z.string().min(1).optional(),
  attentionFile: z.string().min(1).optional(),
  policyFile: z.string().min(1).optional(),
  anchorInterval: secondsAtLeastOne('60s'),
  hookDeliveryRetention: secondsAtLeastOne('30d'),
  streamStallTimeout: secondsAtLeastOne('30s'),
  // Read as milliseconds. At most 4.5 s: a forge gives up on an answer after 5 s (spec part B 8).
  hookAnswerWait: z.string().default('0').transform((value, ctx) => {
    const ms = parseWaitMs(value);
    if (ms === undefined || ms > HOOK_ANSWER_WAIT_MAX_MS) {
      ctx.addIssue({ code: 'custom', message: `"${value}" is not a wait from 0 to 4.5s (try 0, 1500ms or 2s)` });
      return z.NEVER;
    }
    return ms;
  }),
  temporalRunStatus: z.enum(['tracked', 'off'], { message: 'expected tracked or off' }).default('tracked'),
  runIsolation: z.enum(['sandbox', 'none'], { message: 'expected sandbox or none' }).default('sandbox'),
  runNetwork: z.enum(['isolated', 'host', 'none'], { message: 'expected isolated, host or none' }).default('isolated'),
  runUser: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, 'expected a system account name')
    .default('cairn-run'),
  // Run bounds (runtime/run-bounds.ts); the least a sandbox with its shell and tool starts in.
  runMemory: byteSize('2g', 16 * 1024 ** 2),
  runPids: z.coerce
    .number({ message: 'expected a whole number of processes' })
    .int('expected a whole number of processes')
    .min(8, 'expected at least 8 processes')
    .max(4194304, 'expected at most 4194304 processes (the kernel\'s most)')
    .default(512),
  runDisk: byteSize('4g', 1024 ** 2),
  runCpu: z.coerce
    .number({ message: 'expected a number of cores, such as 1 or 0.5' })
    .min(0.01, 'expected at least 0.01 cores')
    .max(4096, 'expected at most 4096 cores')
    .default(1),
  callbackRateLimit: z.coerce.number().int().min(1).max(100000).default(20),
  pluginsDir: z.string().min(1).optional(),
  iacProviderMirror: z.string().min(1).refine((p) => path.isAbsolute(p), 'expected an absolute directory').optional(),
  iacProviderDownloads: z
    .enum(['true', 'false', '1', '0'], { message: 'expected true or false' })
    .default('false')
    .transform((value) => value === 'true' || value === '1'),
  moduleFetchTimeout: secondsAtLeastOne('2m'),
  gitTimeout: secondsAtLeastOne('5m'),
  projectLocalRoots: z
    .string()
    .default('')
    .transform((value, ctx) => {
      const roots = value.split(',').map((r) => r.trim()).filter((r) => r !== '');
      for (const root of roots) {
        if (!path.isAbsolute(root)) {
          ctx.addIssue({ code: 'custom', message: `"${root}" is not an absolute directory` });
          return z.NEVER;
        }
      }
      return roots.map((r) => path.normalize(r));
    }),
  // Spec part B 8: never below 500.
  retainHistory: z.coerce
    .number({ message: 'expected a whole number' })
    .int('expected a whole number')
    .min(1, 'expected a whole number of at least 1')
    .transform((n) => Math.max(n, 500))
    .optional(),
  // The `iss` of run identity tokens and the base of the discovery documents (spec part B 5.4).
  federationIssuer: z
    .string()
    .transform((value, ctx) => {
      const fault = issuerUrlFault(value);
      if (fault) {
        ctx.addIssue({ code: 'custom', message: fault });
        return z.NEVER;
      }
      return value.replace(/\/+$/, '');
    })
    .optional(),
  // Kept only as SHA-256 digests from here on: the token itself is not held by the running server.
  workerToken: z
    .string()
    .transform((value, ctx) => {
      const tokens = value.split(',').map((t) => t.trim()).filter(Boolean);
      if (!tokens.length || tokens.some((t) => t.length < 16 || t.length > 512)) {
        ctx.addIssue({ code: 'custom', message: 'a worker token is 16 to 512 characters (comma-separate two while rotating)' });
        return z.NEVER;
      }
      return tokens.map((t) => sha256(t));
    })
    .optional(),
  open: z
    .enum(['true', 'false', '1', '0'], { message: 'expected true or false' })
    .default('false')
    .transform((value) => value === 'true' || value === '1'),
  factCacheAdminOnly: z
    .enum(['true', 'false', '1', '0'], { message: 'expected true or false' })
    .default('false')
    .transform((value) => value === 'true' || value === '1'),
});

/**
 * The install's encryption key and salt (`SERVICE_ENCRYPTION_KEY`, `SERVICE_ENCRYPTION_SALT`; spec
 * part B 5.3). Environment only, never flags: a flag would put the key on the command line, where
 * `ps` and shell history show it. Held in an object that prints as `[redacted]`, so a logged or
 * serialized config never carries them. Checked (both or neither, lengths) when the sealer is built.
 */
export class EncryptionSettings {
  constructor(
    readonly key: string | undefined,
    readonly salt: string | undefined,
  ) {}
  /** The form core/seal.ts `sealerFromEnvironment` reads. */
  asEnvironment(): Record<string, string | undefined> {
    return { SERVICE_ENCRYPTION_KEY: this.key, SERVICE_ENCRYPTION_SALT: this.salt };
  }
  toJSON(): string {
    return '[redacted]';
  }
  [inspect.custom](): string {
    return 'EncryptionSettings [redacted]';
  }
}

/**
 * Why a federation issuer URL cannot be one, or undefined: https (plain http only for a loopback
 * host, as the OpenID sign-in URLs), no query, fragment or credentials (OpenID Connect Discovery 1.0).
 */
export function issuerUrlFault(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `"${value}" is not a URL (try https://cairn.example.com)`;
  }
  const fault = providerUrlFault(url) ?? (url.search || value.includes('?') ? 'must not carry a query' : undefined);
  return fault && `the issuer ${fault}`;
}

export type Config = z.output<typeof configSchema> & {
  listenHost: string;
  listenPort: number;
  encryption: EncryptionSettings;
  /** Notification channels, accounts and egress rules; prints as `[redacted]`. */
  delivery: DeliverySettings;
  /** OpenID Connect sign-in; undefined while --oidc-issuer is unset. Prints without its client secret. */
  oidc: OidcSettings | undefined;
  /** SAML 2.0 sign-in; undefined while --saml-idp-sso-url is unset. */
  saml: SamlSettings | undefined;
  /** The advisory AI provider; undefined while --ai-provider is unset. Prints without its key. */
  ai: AiSettings | undefined;
  /** Forge links; undefined while no forge's client id is set. Prints without client secrets. */
  forge: ForgeSettings | undefined;
};

export class ConfigError extends Error {}

/** Reads `--name value` / `--name=value` flags; returns the values by setting and what was left over. */
export function parseFlags(argv: string[]): { values: Partial<Record<SettingName, string>>; rest: string[] } {
  const byFlag = new Map(Object.entries(SETTINGS).map(([name, s]) => [s.flag, name as SettingName]));
  const values: Partial<Record<SettingName, string>> = {};
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const name = byFlag.get(flag);
    if (!name) {
      rest.push(arg);
      continue;
    }
    const bare = eq < 0 && (SETTINGS[name] as Setting).switch === true && (argv[i + 1] === undefined || argv[i + 1].startsWith('--'));
    const value = eq > 0 ? arg.slice(eq + 1) : bare ? 'true' : argv[++i];
    if (value === undefined) throw new ConfigError(`${flag} needs a value`);
    values[name] = value;
  }
  return { values, rest };
}

/** Flags win over environment variables, which win over defaults. */
export function loadConfig(flagValues: Partial<Record<SettingName, string>>, env: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, string | undefined> = {};
  for (const [name, setting] of Object.entries(SETTINGS)) {
    raw[name] = flagValues[name as SettingName] ?? (env[setting.env] || undefined);
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = issue.path[0] as SettingName;
    const setting = SETTINGS[name];
    const where = setting ? `${setting.flag} (${setting.env})` : String(name);
    throw new ConfigError(`${where}: ${issue.message}`);
  }
  const config = parsed.data;
  let delivery: DeliverySettings;
  try {
    delivery = deliverySettingsFrom(raw, env);
  } catch (err) {
    if (err instanceof DeliverySettingError) throw new ConfigError(err.message);
    throw err;
  }
  let oidc: OidcSettings | undefined;
  try {
    oidc = oidcSettingsFrom(raw, env);
  } catch (err) {
    if (err instanceof OidcSettingError) throw new ConfigError(err.message);
    throw err;
  }
  let saml: SamlSettings | undefined;
  try {
    saml = samlSettingsFrom(raw);
  } catch (err) {
    if (err instanceof SamlSettingError) throw new ConfigError(err.message);
    throw err;
  }
  let ai: AiSettings | undefined;
  try {
    ai = aiSettingsFrom(raw, env);
  } catch (err) {
    if (err instanceof AiSettingError) throw new ConfigError(err.message);
    throw err;
  }
  if (ai) Object.defineProperty(ai, 'apiKey', { enumerable: false });
  let forge: ForgeSettings | undefined;
  try {
    forge = forgeSettingsFrom(raw, env);
  } catch (err) {
    if (err instanceof ForgeSettingError) throw new ConfigError(err.message);
    throw err;
  }
  const colon = config.listen.lastIndexOf(':');
  return {
    ...config,
    dataDir: path.resolve(config.dataDir),
    listenHost: config.listen.slice(0, colon) || '127.0.0.1',
    listenPort: Number(config.listen.slice(colon + 1)),
    encryption: new EncryptionSettings(env.SERVICE_ENCRYPTION_KEY || undefined, env.SERVICE_ENCRYPTION_SALT || undefined),
    delivery,
    oidc,
    saml,
    ai,
    forge,
  };
}

export function settingsHelp(): string {
  return Object.values(SETTINGS)
    .map((s) => `  ${s.flag.padEnd(22)} ${s.env.padEnd(22)} ${s.help}`)
    .join('\n');
}
