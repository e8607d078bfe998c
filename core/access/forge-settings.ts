import { inspect } from 'node:util';
import { providerUrlFault } from './sign-in-flags';

/**
 * Forge link settings (docs/operations.md, Forge links): for each forge kind this server can link
 * (GitHub, GitLab, Gitea/Forgejo), its base address and this server's OAuth client id there, and one
 * public callback address. A kind is linkable once its client id is set; its client secret is read
 * from the environment only (a flag would show it in `ps`). The flags are listed in core/config.ts
 * SETTINGS with the rest.
 */
export const FORGE_SETTINGS = {
  forgeRedirectUrl: { flag: '--forge-redirect-url', env: 'CAIRN_FORGE_REDIRECT_URL', help: 'where forges send browsers back after linking: https://<this server>/auth/forge/callback' },
  forgeGithubUrl: { flag: '--forge-github-url', env: 'CAIRN_FORGE_GITHUB_URL', help: 'GitHub base URL (default https://github.com; GitHub Enterprise: its own address)' },
  forgeGithubClientId: { flag: '--forge-github-client-id', env: 'CAIRN_FORGE_GITHUB_CLIENT_ID', help: "this server's OAuth app client id at GitHub (secret in CAIRN_FORGE_GITHUB_CLIENT_SECRET)" },
  forgeGitlabUrl: { flag: '--forge-gitlab-url', env: 'CAIRN_FORGE_GITLAB_URL', help: 'GitLab base URL (default https://gitlab.com)' },
  forgeGitlabClientId: { flag: '--forge-gitlab-client-id', env: 'CAIRN_FORGE_GITLAB_CLIENT_ID', help: "this server's OAuth application id at GitLab (secret in CAIRN_FORGE_GITLAB_CLIENT_SECRET)" },
  forgeGiteaUrl: { flag: '--forge-gitea-url', env: 'CAIRN_FORGE_GITEA_URL', help: 'Gitea or Forgejo base URL (required with its client id)' },
  forgeGiteaClientId: { flag: '--forge-gitea-client-id', env: 'CAIRN_FORGE_GITEA_CLIENT_ID', help: "this server's OAuth2 application client id at Gitea/Forgejo (secret in CAIRN_FORGE_GITEA_CLIENT_SECRET)" },
} as const;

export const FORGE_KINDS = ['github', 'gitlab', 'gitea'] as const;
export type ForgeKind = (typeof FORGE_KINDS)[number];

const SECRET_ENV: Record<ForgeKind, string> = {
  github: 'CAIRN_FORGE_GITHUB_CLIENT_SECRET',
  gitlab: 'CAIRN_FORGE_GITLAB_CLIENT_SECRET',
  gitea: 'CAIRN_FORGE_GITEA_CLIENT_SECRET',
};

const NAMES: Record<ForgeKind, { url: keyof typeof FORGE_SETTINGS; clientId: keyof typeof FORGE_SETTINGS; fallback?: string }> = {
  github: { url: 'forgeGithubUrl', clientId: 'forgeGithubClientId', fallback: 'https://github.com' },
  gitlab: { url: 'forgeGitlabUrl', clientId: 'forgeGitlabClientId', fallback: 'https://gitlab.com' },
  gitea: { url: 'forgeGiteaUrl', clientId: 'forgeGiteaClientId' },
};

export class ForgeSettingError extends Error {}

/** One linkable forge: where it is and this server's client there. Prints without its secret. */
export class ForgeClient {
  constructor(
    readonly kind: ForgeKind,
    /** The base address without a trailing slash, as links record it. */
    readonly baseUrl: string,
    readonly clientId: string,
    readonly clientSecret: string,
  ) {}
  private printable() {
    return { kind: this.kind, baseUrl: this.baseUrl, clientId: this.clientId, clientSecret: '[redacted]' };
  }
  toJSON() {
    return this.printable();
  }
  [inspect.custom](): string {
    return `ForgeClient ${inspect(this.printable())}`;
  }
}

export interface ForgeSettings {
  redirectUrl: string;
  forges: ReadonlyMap<ForgeKind, ForgeClient>;
}

const where = (name: keyof typeof FORGE_SETTINGS) => `${FORGE_SETTINGS[name].flag} (${FORGE_SETTINGS[name].env})`;

function address(name: keyof typeof FORGE_SETTINGS, value: string, mustEndWith?: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ForgeSettingError(`${where(name)}: "${value}" is not a URL`);
  }
  const fault = providerUrlFault(url) ?? (url.search ? 'must not carry a query' : undefined);
  if (fault) throw new ForgeSettingError(`${where(name)}: ${fault}`);
  if (mustEndWith && !url.pathname.endsWith(mustEndWith)) throw new ForgeSettingError(`${where(name)}: must name this server's callback: its path ends in ${mustEndWith}`);
  return url.toString().replace(/\/+$/, '');
}

/**
 * The forge link settings; undefined while no forge's client id is set. A client id needs its
 * secret and the redirect URL; a base URL or secret without its client id is an error naming it.
 */
export function forgeSettingsFrom(raw: Record<string, string | undefined>, env: NodeJS.ProcessEnv): ForgeSettings | undefined {
  const forges = new Map<ForgeKind, ForgeClient>();
  for (const kind of FORGE_KINDS) {
    const names = NAMES[kind];
    const clientId = raw[names.clientId];
    const secret = env[SECRET_ENV[kind]] || undefined;
    if (!clientId) {
      if (raw[names.url]) throw new ForgeSettingError(`${where(names.url)}: needs ${where(names.clientId)} too`);
      if (secret) throw new ForgeSettingError(`${SECRET_ENV[kind]}: needs ${where(names.clientId)} too`);
      continue;
    }
    if (!secret) throw new ForgeSettingError(`${SECRET_ENV[kind]}: required when ${where(names.clientId)} is set`);
    const base = raw[names.url] ?? names.fallback;
    if (!base) throw new ForgeSettingError(`${where(names.url)}: required when ${where(names.clientId)} is set`);
    forges.set(kind, new ForgeClient(kind, address(names.url, base), clientId, secret));
  }
  if (forges.size === 0) {
    if (raw.forgeRedirectUrl) throw new ForgeSettingError(`${where('forgeRedirectUrl')}: needs a forge's client id too (--forge-github-client-id, --forge-gitlab-client-id or --forge-gitea-client-id)`);
    return undefined;
  }
  if (!raw.forgeRedirectUrl) throw new ForgeSettingError(`${where('forgeRedirectUrl')}: required when a forge's client id is set`);
  return { redirectUrl: address('forgeRedirectUrl', raw.forgeRedirectUrl, '/auth/forge/callback'), forges };
}
