import { lookup } from 'node:dns/promises';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import type { DeliverySettings } from '../../core/notifications/notification-settings';

/**
 * The one way a delivery leaves the server (spec part B 6.2 rule 6): the destination's name is
 * resolved here, every address it resolves to is checked against the egress rule (private,
 * loopback and link-local refused unless `SERVICE_EGRESS_ALLOW` exempts them), and the connection
 * is made to the address that was checked, never to the name again, so a name that resolves
 * differently a moment later cannot slip past. With `SERVICE_EGRESS_PROXY` the checked address is
 * asked of the proxy with CONNECT, after the check. Errors name the host, never a URL's path or
 * query, which may hold a secret.
 */

/** A destination the egress rule refuses, or a channel that cannot be used: never retried. */
export class EgressRefused extends Error {}

type Egress = Pick<DeliverySettings, 'egress' | 'proxy'>;

/** Resolves the host and checks every address; the first address, checked, to connect to. */
export async function checkedAddress(egress: Egress, host: string): Promise<string> {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const addresses = net.isIP(bare) ? [bare] : (await lookup(bare, { all: true, verbatim: true }).catch((err: NodeJS.ErrnoException) => {
    throw new Error(`${bare} could not be resolved (${err.code ?? 'lookup failed'})`);
  })).map((a) => a.address);
  if (addresses.length === 0) throw new Error(`${bare} resolves to no address`);
  for (const address of addresses) {
    const refusal = egress.egress.refusal(address);
    if (refusal) throw new EgressRefused(net.isIP(bare) ? refusal : `${bare} resolves to ${refusal}`);
  }
  return addresses[0];
}

function once<T>(emitter: net.Socket, event: string, timeoutMs: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.destroy();
      reject(new Error(`${what}: no answer within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    emitter.once(event, (value: T) => {
      clearTimeout(timer);
      emitter.off('error', onError);
      resolve(value);
    });
    const onError = (err: Error) => {
      clearTimeout(timer);
      reject(new Error(`${what}: ${err.message}`));
    };
    emitter.once('error', onError);
  });
}

/** A TCP connection to the checked address, directly or through the proxy's CONNECT. */
async function openTunnel(egress: Egress, address: string, port: number, host: string, timeoutMs: number): Promise<net.Socket> {
  if (!egress.proxy) {
    const socket = net.connect({ host: address, port });
    await once(socket, 'connect', timeoutMs, `connecting to ${host}`);
    return socket;
  }
  const proxy = new URL(egress.proxy);
  const socket = net.connect({ host: proxy.hostname, port: Number(proxy.port || 80) });
  await once(socket, 'connect', timeoutMs, 'connecting to SERVICE_EGRESS_PROXY');
  const target = net.isIPv6(address) ? `[${address}]:${port}` : `${address}:${port}`;
  const auth = proxy.username ? `Proxy-Authorization: Basic ${Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')}\r\n` : '';
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
  const head = await new Promise<string>((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error('SERVICE_EGRESS_PROXY did not answer CONNECT')), timeoutMs);
    const onData = (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      const end = seen.indexOf('\r\n\r\n');
      if (end < 0) return;
      clearTimeout(timer);
      socket.off('data', onData);
      const rest = Buffer.from(seen.slice(end + 4), 'latin1');
      if (rest.length) socket.unshift(rest);
      resolve(seen.slice(0, end));
    };
    socket.on('data', onData);
    socket.once('error', (err) => reject(new Error(`SERVICE_EGRESS_PROXY: ${err.message}`)));
  });
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
  if (status !== 200) {
    socket.destroy();
    throw new Error(`SERVICE_EGRESS_PROXY refused CONNECT to ${host} (${Number.isNaN(status) ? 'no status' : status})`);
  }
  return socket;
}

/** A connection to host:port (TLS when asked) that passed the egress check. */
export async function connectChecked(egress: Egress, host: string, port: number, secure: boolean, timeoutMs: number): Promise<net.Socket> {
  const address = await checkedAddress(egress, host);
  const socket = await openTunnel(egress, address, port, host, timeoutMs);
  if (!secure) return socket;
  const bare = host.replace(/^\[|\]$/g, '');
  const secured = tls.connect({ socket, servername: net.isIP(bare) ? undefined : bare, ALPNProtocols: ['http/1.1'] });
  await once(secured, 'secureConnect', timeoutMs, `TLS with ${host}`);
  return secured;
}

/** What a receiver answered. */
export interface HttpAnswer {
  status: number;
  statusText: string;
  /** The answer's body, when the request asked for it (`readLimit`), cut at that many bytes. */
  body?: string;
}

/** The URL with a path appended (`/api/annotations` onto an instance's base URL). */
export function withPath(base: string, path: string): URL {
  const url = new URL(base);
  if (path) url.pathname = url.pathname.replace(/\/+$/, '') + path;
  return url;
}

/** Sends one request through the egress check; resolves with the answer's status, whatever it is. */
export async function sendHttp(
  egress: Egress,
  url: URL,
  request: { method: string; headers: Record<string, string>; body: string; readLimit?: number },
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<HttpAnswer> {
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new EgressRefused(`${url.protocol} URLs are not delivered to; use https`);
  const secure = url.protocol === 'https:';
  const port = Number(url.port || (secure ? 443 : 80));
  const socket = await connectChecked(egress, url.hostname, port, secure, timeoutMs);
  return new Promise<HttpAnswer>((resolve, reject) => {
    const body = Buffer.from(request.body, 'utf8');
    const req = http.request({
      method: request.method,
      host: url.hostname,
      port,
      path: `${url.pathname}${url.search}`,
      headers: { ...request.headers, host: url.host, 'content-length': String(body.length), 'user-agent': 'Cairn' },
      createConnection: () => socket,
    });
    // The whole exchange is bounded: a receiver that never answers counts as a failed attempt.
    const timer = setTimeout(() => req.destroy(new Error(`${url.host} sent no answer within ${timeoutMs / 1000} s`)), timeoutMs);
    const abort = () => req.destroy(new Error('the delivery was stopped'));
    signal?.addEventListener('abort', abort, { once: true });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        if (request.readLimit === undefined || size >= request.readLimit) return;
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on('end', () => {
        socket.destroy();
        const answer: HttpAnswer = { status: res.statusCode ?? 0, statusText: res.statusMessage ?? '' };
        if (request.readLimit !== undefined) answer.body = Buffer.concat(chunks).subarray(0, request.readLimit).toString('utf8');
        resolve(answer);
      });
      res.on('error', reject);
    });
    req.on('error', (err) => {
      socket.destroy();
      reject(err);
    });
    req.on('close', () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
    });
    req.end(body);
  });
}
