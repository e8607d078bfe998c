import http from 'node:http';

export interface Reply<T> {
  status: number;
  body: T;
}

/** A request sent as is: its own bytes and headers, without the admin token (a forge's webhook delivery). */
export interface RawRequest {
  body: Buffer;
  headers: Record<string, string>;
}

export interface BenchClient {
  request<T = any>(method: string, path: string, body?: unknown, raw?: RawRequest): Promise<Reply<T>>;
  close(): void;
}

/**
 * A bare node:http client with keep-alive, so the figures carry Cairn's cost rather than a heavier
 * client's; every call sends the admin token but a raw one, which sends its own headers.
 */
export function benchClient(baseUrl: string, token: string): BenchClient {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const base = new URL(baseUrl);
  return {
    request<T>(method: string, path: string, body?: unknown, raw?: RawRequest): Promise<Reply<T>> {
      const payload = raw ? raw.body : body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const headers: Record<string, string | number> = raw ? { ...raw.headers } : { authorization: `Bearer ${token}` };
      if (payload) {
        headers['content-type'] ??= 'application/json';
        headers['content-length'] = payload.length;
      }
      return new Promise((resolve, reject) => {
        const req = http.request(
          { agent, host: base.hostname, port: base.port, method, path, headers },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              let parsed: unknown = text;
              try {
                parsed = text ? JSON.parse(text) : undefined;
              } catch {
                /* not JSON; keep the text for the error message */
              }
              resolve({ status: res.statusCode ?? 0, body: parsed as T });
            });
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        req.end(payload);
      });
    },
    close: () => agent.destroy(),
  };
}

/** The body when the status is the expected one, else an error that shows what came back. */
export function expectStatus<T>(reply: Reply<T>, expected: number, what: string): T {
  if (reply.status !== expected) {
    throw new Error(`${what}: expected HTTP ${expected}, got ${reply.status}: ${JSON.stringify(reply.body).slice(0, 500)}`);
  }
  return reply.body;
}
