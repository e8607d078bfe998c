import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local AI provider for tests: a real HTTP server speaking one provider's documented API
 * (OpenAI chat completions, Anthropic Messages, Gemini generateContent), recording every request
 * it was sent (path, headers, body) so a test can show what reached it. `reply` decides each
 * answer's text; `failures` queues statuses (with Retry-After) to answer before succeeding.
 */
export type PeerKind = 'openai' | 'anthropic' | 'gemini';

export interface SeenRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
  /** Everything the request carried, as one string, for "no secret reached it" checks. */
  raw: string;
}

export interface AiPeer {
  url: string;
  seen: SeenRequest[];
  reply: (request: SeenRequest) => string;
  failures: { status: number; retryAfter?: string }[];
  close(): Promise<void>;
}

function answer(kind: PeerKind, text: string): unknown {
  if (kind === 'openai') return { id: 'chatcmpl-1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }] };
  if (kind === 'anthropic') return { id: 'msg_1', type: 'message', role: 'assistant', content: [{ type: 'text', text }], stop_reason: 'end_turn' };
  return { candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP' }] };
}

export async function startAiPeer(kind: PeerKind): Promise<AiPeer> {
  const peer: Omit<AiPeer, 'url' | 'close'> = { seen: [], reply: () => 'an answer', failures: [] };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: any;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      const seen: SeenRequest = { path: req.url ?? '', headers: req.headers, body, raw: `${req.url} ${JSON.stringify(req.headers)} ${raw}` };
      peer.seen.push(seen);
      const failure = peer.failures.shift();
      if (failure) {
        res.writeHead(failure.status, { 'content-type': 'application/json', ...(failure.retryAfter !== undefined ? { 'retry-after': failure.retryAfter } : {}) });
        res.end(JSON.stringify({ error: { message: 'slow down' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer(kind, peer.reply(seen))));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(peer, {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as AiPeer;
}

/** The user prompt a peer was sent, whichever API it speaks. */
export function promptOf(seen: SeenRequest): string {
  const b = seen.body;
  if (b?.messages) return b.messages.filter((m: any) => m.role === 'user').map((m: any) => m.content).join('\n');
  if (b?.contents) return b.contents.flatMap((c: any) => c.parts.map((p: any) => p.text)).join('\n');
  return '';
}
