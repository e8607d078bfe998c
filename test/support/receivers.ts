import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/**
 * Local peers standing in for the services notifications go to: an HTTP receiver (a chat webhook,
 * an incident API, an annotations API, an SMS account's API, a webhook) and an SMTP server. Each
 * records everything it is sent; the HTTP receiver answers as a test tells it to.
 */

export interface Received {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The body as JSON, when it is JSON. */
  json: any;
  /** When the request ended, and what it was answered with (undefined while it hangs or if never answered). */
  at: number;
  answered?: number;
}

/** How to answer a request: a status, optionally after a delay; or `hang` to never answer. */
export type Answer = { status: number; delayMs?: number } | 'hang';

export interface Receiver {
  url: string;
  received: Received[];
  /** Requests answered 2xx, in arrival order. */
  arrived(): Received[];
  /** How each request is answered (default 200). */
  answer(fn: (request: Received, index: number) => Answer): void;
  /** Resolves once `predicate` holds for what was received. */
  waitFor(predicate: (received: Received[]) => boolean, timeoutMs?: number, what?: string): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  let decide: (request: Received, index: number) => Answer = () => ({ status: 200 });
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const request: Received = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, json, at: Date.now() };
      received.push(request);
      const answer = decide(request, received.length - 1);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      const reply = () => {
        request.answered = answer.status;
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end('{}');
      };
      if (answer.delayMs) setTimeout(reply, answer.delayMs);
      else reply();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    arrived: () => received.filter((r) => r.answered !== undefined && r.answered < 300),
    answer(fn) {
      decide = fn;
    },
    async waitFor(predicate, timeoutMs = 30_000, what = 'the expected requests') {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(received)) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; received ${JSON.stringify(received.map((r) => [r.path, r.answered, r.json?.event ?? r.body.slice(0, 80)]))}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface ReceivedMail {
  from: string;
  to: string[];
  data: string;
  user?: string;
}

/** A real SMTP server (npm smtp-server) on loopback, accepting one account and recording each message. */
export async function startSmtpReceiver(account: { user: string; password: string }): Promise<{ url: string; mails: ReceivedMail[]; close(): Promise<void> }> {
  const mails: ReceivedMail[] = [];
  const server = new SMTPServer({
    authOptional: false,
    allowInsecureAuth: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === account.user && auth.password === account.password) callback(null, { user: auth.username });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        mails.push({
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          data: Buffer.concat(chunks).toString('utf8'),
          user: session.user as string | undefined,
        });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = (server as unknown as { server: http.Server }).server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
