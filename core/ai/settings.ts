import { parseDuration } from '../duration';

/**
 * The `cairn serve` flags of the advisory AI (spec part A 1, 1.3; docs/operations.md, "Advisory
 * AI"). Unset --ai-provider leaves AI off: the AI routes answer 503 naming the flag. The API key is
 * read only from the environment variable CAIRN_AI_API_KEY, never from a flag (a flag shows in `ps`).
 */
export const AI_SETTINGS = {
  aiProvider: {
    flag: '--ai-provider',
    env: 'CAIRN_AI_PROVIDER',
    help: 'advisory AI backend: openai (any OpenAI-compatible chat completions API: Ollama, vLLM), anthropic or gemini, or one a plugin declares; unset: AI off',
  },
  aiModel: { flag: '--ai-model', env: 'CAIRN_AI_MODEL', help: 'the model name the AI provider is asked for (required with --ai-provider)' },
  aiEndpoint: {
    flag: '--ai-endpoint',
    env: 'CAIRN_AI_ENDPOINT',
    help: "the AI provider's base URL (default: the provider's public API); its key is read from CAIRN_AI_API_KEY",
  },
  aiEndpointAllow: {
    flag: '--ai-endpoint-allow',
    env: 'CAIRN_AI_ENDPOINT_ALLOW',
    help: 'let --ai-endpoint be a private, loopback or link-local address the egress rule refuses (a local Ollama or vLLM) (default false)',
    switch: true as const,
  },
  aiTimeout: { flag: '--ai-timeout', env: 'CAIRN_AI_TIMEOUT', help: 'how long one AI call may take, retries included, seconds or 30s/2m (default 60s)' },
  aiMaxTokens: { flag: '--ai-max-tokens', env: 'CAIRN_AI_MAX_TOKENS', help: 'the most tokens one AI answer may hold (default 1024)' },
  aiMaxPromptTokens: {
    flag: '--ai-max-prompt-tokens',
    env: 'CAIRN_AI_MAX_PROMPT_TOKENS',
    help: 'the most tokens one AI prompt may hold, counted as characters / 4; a longer prompt is cut (default 8000)',
  },
  aiAskRate: { flag: '--ai-ask-rate', env: 'CAIRN_AI_ASK_RATE', help: 'AI questions (ask, draft, propose, explain) one account may send a minute (default 20)' },
};

export const AI_API_KEY_ENV = 'CAIRN_AI_API_KEY';

export const BUILT_IN_ENDPOINTS: Record<string, string> = {
  openai: 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
  gemini: 'https://generativelanguage.googleapis.com',
};

export interface AiSettings {
  provider: string;
  model: string;
  endpoint: string;
  apiKey: string;
  endpointAllowed: boolean;
  timeoutMs: number;
  maxTokens: number;
  maxPromptTokens: number;
  askPerMinute: number;
}

export class AiSettingError extends Error {}

type Raw = Record<string, string | undefined>;

function positiveInt(raw: Raw, name: keyof typeof AI_SETTINGS, fallback: number, max: number): number {
  const value = raw[name];
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max) {
    throw new AiSettingError(`${AI_SETTINGS[name].flag} (${AI_SETTINGS[name].env}): "${value}" is not a whole number from 1 to ${max}`);
  }
  return n;
}

/** The AI settings, or undefined when --ai-provider is unset; throws naming the flag at fault. */
export function aiSettingsFrom(raw: Raw, env: NodeJS.ProcessEnv): AiSettings | undefined {
  const provider = raw.aiProvider?.trim();
  const named = (['aiModel', 'aiEndpoint'] as const).find((n) => raw[n] !== undefined);
  if (!provider) {
    if (named) throw new AiSettingError(`${AI_SETTINGS[named].flag} is set but --ai-provider (CAIRN_AI_PROVIDER) is not`);
    return undefined;
  }
  const model = raw.aiModel?.trim();
  if (!model) throw new AiSettingError(`--ai-model (CAIRN_AI_MODEL) is required with --ai-provider ${provider}`);
  const endpoint = raw.aiEndpoint?.trim() || BUILT_IN_ENDPOINTS[provider];
  if (!endpoint) throw new AiSettingError(`--ai-endpoint (CAIRN_AI_ENDPOINT) is required with --ai-provider ${provider}`);
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new AiSettingError(`--ai-endpoint (CAIRN_AI_ENDPOINT): "${endpoint}" is not a URL (try https://api.openai.com/v1)`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new AiSettingError(`--ai-endpoint (CAIRN_AI_ENDPOINT): must be an http or https URL`);
  if (url.username || url.password || url.search) throw new AiSettingError('--ai-endpoint (CAIRN_AI_ENDPOINT): must carry no credentials and no query; the key is read from CAIRN_AI_API_KEY');
  const timeoutRaw = raw.aiTimeout ?? '60s';
  const seconds = parseDuration(timeoutRaw);
  if (seconds === undefined || seconds < 1 || seconds > 600) throw new AiSettingError(`--ai-timeout (CAIRN_AI_TIMEOUT): "${timeoutRaw}" is not a duration from 1s to 10m`);
  const allow = raw.aiEndpointAllow;
  if (allow !== undefined && allow !== 'true' && allow !== 'false') throw new AiSettingError('--ai-endpoint-allow (CAIRN_AI_ENDPOINT_ALLOW): must be true or false');
  return {
    provider,
    model,
    endpoint: endpoint.replace(/\/+$/, ''),
    apiKey: env[AI_API_KEY_ENV] ?? '',
    endpointAllowed: allow === 'true',
    timeoutMs: seconds * 1000,
    maxTokens: positiveInt(raw, 'aiMaxTokens', 1024, 100_000),
    maxPromptTokens: positiveInt(raw, 'aiMaxPromptTokens', 8000, 1_000_000),
    askPerMinute: positiveInt(raw, 'aiAskRate', 20, 10_000),
  };
}
