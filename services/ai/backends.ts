import { AiProviderRegistry, type AiProvider, type AiProviderFactory, type AiProviderSettings } from '../../core/ai/provider';
import type { AiSettings } from '../../core/ai/settings';
import type { DeliverySettings } from '../../core/notifications/notification-settings';
import { checkedAddress } from '../notifications/notification-egress';

/**
 * The three built-in AI backends (spec part A 1.3), each speaking its provider's documented HTTP API
 * with node's fetch:
 * - `openai`: the chat completions API (`POST {endpoint}/chat/completions`), which OpenAI, Ollama,
 *   vLLM, LM Studio and most gateways speak;
 * - `anthropic`: the Messages API (`POST {endpoint}/v1/messages`);
 * - `gemini`: Google's generateContent (`POST {endpoint}/v1beta/models/{model}:generateContent`).
 *
 * Every call is bounded: the answer's tokens (`--ai-max-tokens`), the prompt's length
 * (`--ai-max-prompt-tokens`, as characters / 4), and the whole call's time (`--ai-timeout`),
 * retries included. A 429 or 503 is retried up to three times, after the `Retry-After` the
 * provider sent (capped by what is left of the timeout) or a short backoff. Before each call the
 * endpoint's host is checked against the egress rule notifications obey, unless the operator
 * allowed the endpoint with `--ai-endpoint-allow`. Errors name the host and the status, never the
 * key or what was sent.
 */

export interface AiCallBounds {
  maxTokens: number;
  maxPromptTokens: number;
  timeoutMs: number;
  endpointAllowed: boolean;
  egress: Pick<DeliverySettings, 'egress' | 'proxy'>;
}

/** A provider call that failed: the provider's status (0 when it could not be reached). */
export class AiCallFailed extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

const RETRIES = 3;

/** Cuts a text to the prompt bound, keeping its start and end (a log's tail matters most). */
export function boundPrompt(text: string, maxPromptTokens: number): string {
  const max = maxPromptTokens * 4;
  if (text.length <= max) return text;
  const note = '\n[... cut to the prompt bound ...]\n';
  const keep = Math.max(0, max - note.length);
  const head = Math.floor(keep / 3);
  return text.slice(0, head) + note + text.slice(text.length - (keep - head));
}

function retryDelayMs(header: string | null, attempt: number): number {
  if (header) {
    const seconds = Number(header);
    if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
    const at = Date.parse(header);
    if (!Number.isNaN(at)) return Math.max(0, at - Date.now());
  }
  return 250 * 2 ** attempt;
}

async function postJson(bounds: AiCallBounds, url: URL, headers: Record<string, string>, body: unknown, signal?: AbortSignal): Promise<any> {
  if (!bounds.endpointAllowed) await checkedAddress(bounds.egress, url.hostname);
  const deadline = Date.now() + bounds.timeoutMs;
  const timeout = AbortSignal.timeout(bounds.timeoutMs);
  const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
  for (let attempt = 0; ; attempt++) {
    let res: Response;
    try {
      res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal: both });
    } catch (err) {
      const why = timeout.aborted ? `no answer within ${bounds.timeoutMs / 1000} s` : signal?.aborted ? 'the call was stopped' : (err as Error).message;
      throw new AiCallFailed(`the AI provider at ${url.host} could not be reached: ${why}`, 0);
    }
    if ((res.status === 429 || res.status === 503) && attempt < RETRIES) {
      const wait = retryDelayMs(res.headers.get('retry-after'), attempt);
      await res.body?.cancel();
      if (Date.now() + wait >= deadline) throw new AiCallFailed(`the AI provider at ${url.host} answered ${res.status} and asked to wait longer than --ai-timeout allows`, res.status);
      await new Promise((r) => setTimeout(r, wait));
      continue;
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new AiCallFailed(`the AI provider at ${url.host} answered ${res.status}${res.status === 401 || res.status === 403 ? ' (check CAIRN_AI_API_KEY)' : ''}`, res.status);
    }
    try {
      return await res.json();
    } catch {
      throw new AiCallFailed(`the AI provider at ${url.host} answered with something that is not JSON`, res.status);
    }
  }
}

function text(value: unknown, host: string): string {
  if (typeof value !== 'string') throw new AiCallFailed(`the AI provider at ${host} answered without text`, 200);
  return value;
}

function endpointUrl(settings: AiProviderSettings, path: string): URL {
  const url = new URL(settings.endpoint);
  url.pathname = url.pathname.replace(/\/+$/, '') + path;
  return url;
}

const openai = (bounds: AiCallBounds): AiProviderFactory => (settings) => {
  const url = endpointUrl(settings, '/chat/completions');
  return {
    async complete({ system, prompt, signal }) {
      const answer = await postJson(
        bounds,
        url,
        settings.apiKey ? { authorization: `Bearer ${settings.apiKey}` } : {},
        {
          model: settings.model,
          max_tokens: bounds.maxTokens,
          messages: [
            { role: 'system', content: system },
            { role: 'user', content: boundPrompt(prompt, bounds.maxPromptTokens) },
          ],
        },
        signal,
      );
      return text(answer?.choices?.[0]?.message?.content, url.host);
    },
  };
};

const anthropic = (bounds: AiCallBounds): AiProviderFactory => (settings) => {
  if (!settings.apiKey) throw new Error('the anthropic AI provider needs a key in CAIRN_AI_API_KEY');
  const url = endpointUrl(settings, '/v1/messages');
  return {
    async complete({ system, prompt, signal }) {
      const answer = await postJson(
        bounds,
        url,
        { 'x-api-key': settings.apiKey, 'anthropic-version': '2023-06-01' },
        { model: settings.model, max_tokens: bounds.maxTokens, system, messages: [{ role: 'user', content: boundPrompt(prompt, bounds.maxPromptTokens) }] },
        signal,
      );
      const blocks: unknown[] = Array.isArray(answer?.content) ? answer.content : [];
      const texts = blocks.filter((b: any) => b?.type === 'text').map((b: any) => b.text);
      return text(texts.length ? texts.join('') : undefined, url.host);
    },
  };
};

const gemini = (bounds: AiCallBounds): AiProviderFactory => (settings) => {
  if (!settings.apiKey) throw new Error('the gemini AI provider needs a key in CAIRN_AI_API_KEY');
  const url = endpointUrl(settings, `/v1beta/models/${encodeURIComponent(settings.model)}:generateContent`);
  return {
    async complete({ system, prompt, signal }) {
      const answer = await postJson(
        bounds,
        url,
        { 'x-goog-api-key': settings.apiKey },
        {
          systemInstruction: { parts: [{ text: system }] },
          contents: [{ role: 'user', parts: [{ text: boundPrompt(prompt, bounds.maxPromptTokens) }] }],
          generationConfig: { maxOutputTokens: bounds.maxTokens },
        },
        signal,
      );
      const parts: unknown[] = answer?.candidates?.[0]?.content?.parts ?? [];
      const texts = parts.map((p: any) => p?.text).filter((t) => typeof t === 'string');
      return text(texts.length ? texts.join('') : undefined, url.host);
    },
  };
};

/** Registers the built-in backends into the registry (before plugins register theirs). */
export function registerBuiltInAiProviders(registry: AiProviderRegistry, bounds: AiCallBounds): void {
  registry.register('openai', openai(bounds));
  registry.register('anthropic', anthropic(bounds));
  registry.register('gemini', gemini(bounds));
}

/** The bounds one install's calls obey, from its settings. */
export function aiCallBounds(ai: AiSettings | undefined, egress: Pick<DeliverySettings, 'egress' | 'proxy'>): AiCallBounds {
  return {
    maxTokens: ai?.maxTokens ?? 1024,
    maxPromptTokens: ai?.maxPromptTokens ?? 8000,
    timeoutMs: ai?.timeoutMs ?? 60_000,
    endpointAllowed: ai?.endpointAllowed ?? false,
    egress,
  };
}

/**
 * The install's AI provider, checked at start: the registry with the built-ins (plugins add theirs
 * before it is sealed), the configured provider built from it and its endpoint checked against the
 * egress rule. Undefined when --ai-provider is unset. Throws a sentence naming the flag at fault.
 */
export async function startAiProvider(ai: AiSettings | undefined, registry: AiProviderRegistry, bounds: AiCallBounds): Promise<AiProvider | undefined> {
  if (!ai) return undefined;
  if (!registry.has(ai.provider)) throw new Error(`--ai-provider: unknown AI provider ${JSON.stringify(ai.provider)} (known: ${registry.names().join(', ')})`);
  let provider: AiProvider;
  try {
    provider = registry.build(ai.provider, { model: ai.model, endpoint: ai.endpoint, apiKey: ai.apiKey });
  } catch (err) {
    throw new Error(`--ai-provider ${ai.provider}: ${(err as Error).message}`);
  }
  if (!ai.endpointAllowed) {
    try {
      await checkedAddress(bounds.egress, new URL(ai.endpoint).hostname);
    } catch (err) {
      throw new Error(`--ai-endpoint: ${(err as Error).message} (allow it with --ai-endpoint-allow, or SERVICE_EGRESS_ALLOW)`);
    }
  }
  return provider;
}
