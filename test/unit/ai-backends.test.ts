import { AiProviderRegistry } from '../../core/ai/provider';
import { loadConfig, ConfigError } from '../../core/config';
import { deliverySettingsFrom } from '../../core/notifications/notification-settings';
import { aiCallBounds, registerBuiltInAiProviders, startAiProvider } from '../../services/ai/backends';
import { promptOf, startAiPeer, type AiPeer, type PeerKind } from '../support/ai-peer';

// The three built-in backends against real local servers speaking each provider's API.

const egress = deliverySettingsFrom({}, {});
const peers: Partial<Record<PeerKind, AiPeer>> = {};
beforeAll(async () => {
  for (const kind of ['openai', 'anthropic', 'gemini'] as const) peers[kind] = await startAiPeer(kind);
});
afterAll(async () => {
  for (const peer of Object.values(peers)) await peer!.close();
});

function registry(overrides: Partial<ReturnType<typeof aiCallBounds>> = {}) {
  const r = new AiProviderRegistry();
  registerBuiltInAiProviders(r, { ...aiCallBounds(undefined, egress), endpointAllowed: true, maxTokens: 321, ...overrides });
  return r;
}

test.each(['openai', 'anthropic', 'gemini'] as const)('%s: the documented request, the key where the API wants it, the answer read back', async (kind) => {
  const peer = peers[kind]!;
  peer.seen.length = 0;
  peer.reply = () => `hello from ${kind}`;
  const provider = registry().build(kind, { model: 'm-1', endpoint: peer.url, apiKey: 'sk-test-key-123' });
  await expect(provider.complete({ system: 'be brief', prompt: 'why did it fail?' })).resolves.toBe(`hello from ${kind}`);
  const [seen] = peer.seen;
  expect(promptOf(seen)).toBe('why did it fail?');
  if (kind === 'openai') {
    expect(seen.path).toBe('/chat/completions');
    expect(seen.headers.authorization).toBe('Bearer sk-test-key-123');
    expect(seen.body).toMatchObject({ model: 'm-1', max_tokens: 321, messages: [{ role: 'system', content: 'be brief' }, { role: 'user' }] });
  } else if (kind === 'anthropic') {
    expect(seen.path).toBe('/v1/messages');
    expect(seen.headers['x-api-key']).toBe('sk-test-key-123');
    expect(seen.headers['anthropic-version']).toBe('2023-06-01');
    expect(seen.body).toMatchObject({ model: 'm-1', max_tokens: 321, system: 'be brief' });
  } else {
    expect(seen.path).toBe('/v1beta/models/m-1:generateContent');
    expect(seen.headers['x-goog-api-key']).toBe('sk-test-key-123');
    expect(seen.body).toMatchObject({ systemInstruction: { parts: [{ text: 'be brief' }] }, generationConfig: { maxOutputTokens: 321 } });
  }
});

test('a 429 and a 503 are retried after the Retry-After the provider sent', async () => {
  const peer = peers.openai!;
  peer.seen.length = 0;
  peer.failures.push({ status: 429, retryAfter: '0' }, { status: 503, retryAfter: '0' });
  const provider = registry().build('openai', { model: 'm', endpoint: peer.url, apiKey: '' });
  peer.reply = () => 'after the wait';
  await expect(provider.complete({ system: 's', prompt: 'p' })).resolves.toBe('after the wait');
  expect(peer.seen).toHaveLength(3);
});

test('a Retry-After longer than the timeout fails at once, naming the status, not the key', async () => {
  const peer = peers.anthropic!;
  peer.failures.push({ status: 429, retryAfter: '120' });
  const provider = registry({ timeoutMs: 2000 }).build('anthropic', { model: 'm', endpoint: peer.url, apiKey: 'sk-very-secret' });
  const err = await provider.complete({ system: 's', prompt: 'p' }).catch((e: Error) => e);
  expect((err as Error).message).toMatch(/answered 429/);
  expect((err as Error).message).not.toContain('sk-very-secret');
});

test('the prompt is cut to the prompt bound, keeping its end', async () => {
  const peer = peers.gemini!;
  peer.seen.length = 0;
  const provider = registry({ maxPromptTokens: 100 }).build('gemini', { model: 'm', endpoint: peer.url, apiKey: 'k' });
  await provider.complete({ system: 's', prompt: 'a'.repeat(5000) + 'THE-END' });
  const sent = promptOf(peer.seen[0]);
  expect(sent.length).toBeLessThanOrEqual(400);
  expect(sent.endsWith('THE-END')).toBe(true);
});

test('a loopback endpoint is refused by the egress rule unless --ai-endpoint-allow', async () => {
  const r = registry({ endpointAllowed: false });
  const ai = { provider: 'openai', model: 'm', endpoint: peers.openai!.url, apiKey: '', endpointAllowed: false, timeoutMs: 1000, maxTokens: 1, maxPromptTokens: 1, askPerMinute: 1 };
  await expect(startAiProvider(ai, r, aiCallBounds(ai, egress))).rejects.toThrow(/--ai-endpoint: .*--ai-endpoint-allow/);
  await expect(startAiProvider({ ...ai, endpointAllowed: true }, r, aiCallBounds({ ...ai, endpointAllowed: true }, egress))).resolves.toBeDefined();
  await expect(startAiProvider({ ...ai, provider: 'nope', endpointAllowed: true }, r, aiCallBounds(ai, egress))).rejects.toThrow(/--ai-provider: unknown AI provider "nope"/);
});

test('bad AI flags stop the start naming the flag; the key comes only from CAIRN_AI_API_KEY and never prints', () => {
  expect(() => loadConfig({ aiProvider: 'openai' }, {})).toThrow(/--ai-model/);
  expect(() => loadConfig({ aiModel: 'x' }, {})).toThrow(/--ai-provider/);
  expect(() => loadConfig({ aiProvider: 'ollama-ish', aiModel: 'x' }, {})).toThrow(/--ai-endpoint/);
  expect(() => loadConfig({ aiProvider: 'openai', aiModel: 'x', aiEndpoint: 'ftp://x' }, {})).toThrow(ConfigError);
  expect(() => loadConfig({ aiProvider: 'openai', aiModel: 'x', aiTimeout: 'soon' }, {})).toThrow(/--ai-timeout/);
  expect(() => loadConfig({ aiProvider: 'openai', aiModel: 'x', aiMaxTokens: '0' }, {})).toThrow(/--ai-max-tokens/);
  const config = loadConfig({ aiProvider: 'anthropic', aiModel: 'claude' }, { CAIRN_AI_API_KEY: 'sk-ant-hidden-value' });
  expect(config.ai).toMatchObject({ provider: 'anthropic', model: 'claude', endpoint: 'https://api.anthropic.com', apiKey: 'sk-ant-hidden-value' });
  expect(JSON.stringify(config.ai)).not.toContain('sk-ant-hidden-value');
});
