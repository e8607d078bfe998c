import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { EgressRefused, sendHttp } from '../../services/notifications/notification-egress';
import { EgressRule } from '../../core/notifications/notification-settings';
import { startReceiver, type Receiver } from '../support/receivers';

let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver?.close();
});

const post = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' };

test('by default a delivery to loopback, a private or a link-local address is refused, by address or by a name resolving to one', async () => {
  const strict = { egress: new EgressRule([]), proxy: undefined };
  const port = new URL(receiver.url).port;
  for (const url of [`http://127.0.0.1:${port}/x`, `http://localhost:${port}/x`, 'http://10.0.0.1/x', 'http://169.254.169.254/latest', 'http://[::1]/x', 'http://[::ffff:192.168.1.1]/x']) {
    await expect(sendHttp(strict, new URL(url), post, 2000)).rejects.toBeInstanceOf(EgressRefused);
  }
  expect(receiver.received).toHaveLength(0);
});

test('SERVICE_EGRESS_ALLOW exempts the ranges it names, and only those', async () => {
  const allowLoopback = { egress: new EgressRule(['127.0.0.0/8']), proxy: undefined };
  const answer = await sendHttp(allowLoopback, new URL(`${receiver.url}/allowed`), post, 2000);
  expect(answer.status).toBe(200);
  await expect(sendHttp(allowLoopback, new URL('http://10.0.0.1/x'), post, 2000)).rejects.toBeInstanceOf(EgressRefused);
  expect(() => new EgressRule(['not-a-cidr'])).toThrow('SERVICE_EGRESS_ALLOW');
});

test('with SERVICE_EGRESS_PROXY the checked address is asked of the proxy, after the check', async () => {
  const tunnels: string[] = [];
  const proxy = http.createServer();
  proxy.on('connect', (req, client, head) => {
    tunnels.push(req.url ?? '');
    const [host, port] = (req.url ?? '').split(':');
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  try {
    const port = new URL(receiver.url).port;
    const via = { egress: new EgressRule(['127.0.0.0/8']), proxy: proxyUrl };
    const answer = await sendHttp(via, new URL(`http://localhost:${port}/through-proxy`), post, 2000);
    expect(answer.status).toBe(200);
    // The proxy is asked for the address the check resolved, not the name.
    expect(tunnels).toEqual([`127.0.0.1:${port}`]);
    expect(receiver.received.find((r) => r.path === '/through-proxy')?.headers.host).toBe(`localhost:${port}`);
    // The check still comes first: a refused address never reaches the proxy.
    const strict = { egress: new EgressRule([]), proxy: proxyUrl };
    await expect(sendHttp(strict, new URL(`http://127.0.0.1:${port}/x`), post, 2000)).rejects.toBeInstanceOf(EgressRefused);
    expect(tunnels).toHaveLength(1);
  } finally {
    proxy.closeAllConnections();
    await new Promise<void>((resolve) => proxy.close(() => resolve()));
  }
});
