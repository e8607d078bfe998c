import net from 'node:net';
import http from 'node:http';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  body: any;
}

/**
 * Sends the request line byte for byte over a socket, so neither fetch nor URL can re-encode or
 * refuse the target before the server sees it.
 */
function rawRequest(method: string, target: Buffer | string, headers: Record<string, string> = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(t.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const split = raw.indexOf('\r\n\r\n');
      const head = raw.slice(0, split).split('\r\n');
      const status = Number(head[0].split(' ')[1]);
      const hdrs: Record<string, string> = {};
      for (const line of head.slice(1)) {
        const i = line.indexOf(':');
        hdrs[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      let text = raw.slice(split + 4);
      if (hdrs['transfer-encoding'] === 'chunked') text = dechunk(text);
      let body: any;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      resolve({ status, headers: hdrs, text, body });
    });
    const lines = Object.entries({ host: `${hostname}:${port}`, connection: 'close', ...headers }).map(([k, v]) => `${k}: ${v}\r\n`);
    socket.write(Buffer.concat([Buffer.from(`${method} `), Buffer.from(target as never), Buffer.from(` HTTP/1.1\r\n${lines.join('')}\r\n`)]));
  });
}

function dechunk(text: string): string {
  let out = '';
  let rest = text;
  for (;;) {
    const eol = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, eol), 16);
    if (!size) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

const auth = () => ({ authorization: `Bearer ${t.adminToken}` });

function expectErrorShape(res: { status: number; text: string; body: any; headers: any }) {
  const type = typeof res.headers.get === 'function' ? res.headers.get('content-type') : res.headers['content-type'];
  expect(type).toMatch(/^application\/json/);
  expect(res.body).toEqual(expect.objectContaining({ error: expect.any(String) }));
  expect(res.text).not.toMatch(/\bstack\b|at .*\(.*:\d+:\d+\)|node_modules|\.ts:\d+/);
}

describe('request target hygiene', () => {
  test.each(['/v1/runs%00', '/v1/ru%00ns/x', '/nowhere%00', '/api/%00'])('a NUL in the path %s is 400 before routing, even without a token', async (target) => {
    const res = await rawRequest('GET', target);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/path holds a NUL/);
  });

  test('a NUL in a query parameter is 400', async () => {
    for (const target of ['/v1/runs?q=a%00b', '/v1/runs?a%00=1', '/healthz?x=%00']) {
      const res = await rawRequest('GET', target, auth());
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(/query holds a NUL/);
    }
  });

  test.each(['/v1/runs/%FF', '/v1/runs/%C0%80', '/v1/runs/%ED%A0%80', '/v1/runs/%E2%82'])('invalid UTF-8 in the path %s is 400', async (target) => {
    const res = await rawRequest('GET', target, auth());
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/path is not valid UTF-8/);
  });

  test('invalid UTF-8 in a query parameter is 400', async () => {
    const res = await rawRequest('GET', '/v1/runs?q=%FF', auth());
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/query is not valid UTF-8/);
  });

  test('raw NUL or non-ASCII bytes in the request line are refused with 400', async () => {
    // Node's HTTP parser refuses these before the application sees them; the answer keeps the JSON error shape.
    for (const tail of [[0xff, 0xfe], [0x00], [0xc3, 0xa9]]) {
      const res = await rawRequest('GET', Buffer.from([...Buffer.from('/v1/runs?q='), ...tail]), auth());
      expect(res.status).toBe(400);
      expect(res.body.error).toMatch(/request line or headers are malformed/);
    }
  });

  test('percent-encoded valid UTF-8 passes through to the route', async () => {
    const res = await rawRequest('GET', '/v1/runs?q=%C3%A9t%C3%A9', auth());
    expect(res.status).toBe(200);
    expect(res.body.runs).toEqual([]);
  });
});

describe('JSON bodies', () => {
  test.each([
    [{ tool: 'bash', command: 'true', extra_vars: { x: 'a\u0000b' } }, 'extra_vars.x'],
    [{ tool: 'bash', command: 'true', extra_vars: { list: ['fine', '\u0000', 'also fine'] } }, 'extra_vars.list[1]'],
    [{ tool: 'bash', command: 'echo \u0000' }, 'command'],
  ])('a string holding NUL is refused naming the field (%#)', async (body, field) => {
    const before = (await t.api.get('/v1/runs?limit=1')).body.total;
    const res = await t.api.post('/v1/runs', body);
    expect(res.status).toBe(400);
    expect(res.body.field).toBe(field);
    expect(res.body.error).toBe(`${field} holds a NUL character`);
    expect((await t.api.get('/v1/runs?limit=1')).body.total).toBe(before);
  });

  test('the NUL check reads the \\u0000 escape as written on the wire', async () => {
    const res = await t.api.request('POST', '/v1/runs', {
      rawBody: '{"tool":"bash","command":"true","extra_vars":{"x":"ok","list":["a","b\\u0000"]}}',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'extra_vars.list[1] holds a NUL character', field: 'extra_vars.list[1]' });
  });

  test('a write body over 1 MiB answers 413 naming the limit', async () => {
    const res = await t.api.post('/v1/runs', { tool: 'bash', command: 'true', extra_vars: { pad: 'x'.repeat(1024 * 1024) } });
    expect(res.status).toBe(413);
    expect(res.body.error).toMatch(/1 MiB/);
    expect(res.body.limit_bytes).toBe(1024 * 1024);
  });

  test('a chunked body with no length is cut off at 1 MiB with 413', async () => {
    const { hostname, port } = new URL(t.url);
    const res = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request({ hostname, port, method: 'POST', path: '/v1/auth/check', headers: { ...auth(), 'content-type': 'application/json' } }, (r) => {
        let text = '';
        r.on('data', (c) => (text += c));
        r.on('end', () => resolve({ status: r.statusCode!, text }));
      });
      req.on('error', reject);
      req.write('{"pad":"');
      const chunk = 'y'.repeat(64 * 1024);
      // 17 chunks of 64 KiB: just past the limit, never announced up front.
      let sent = 0;
      const pump = () => {
        while (sent < 17) {
          sent++;
          if (!req.write(chunk)) return req.once('drain', pump);
        }
        req.end('"}');
      };
      pump();
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text).error).toMatch(/1 MiB/);
  });

  test('a body of exactly 1 MiB is accepted', async () => {
    const frame = '{"pad":""}';
    const rawBody = `{"pad":"${'z'.repeat(1024 * 1024 - frame.length)}"}`;
    expect(Buffer.byteLength(rawBody)).toBe(1024 * 1024);
    const res = await t.api.request('POST', '/v1/auth/check', { rawBody, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
  });

  test('invalid JSON is a 400', async () => {
    const res = await t.api.request('POST', '/v1/runs', { rawBody: '{"tool": "bash", "command": ', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/not valid JSON/);
  });

  test('an invalid JSON body is not echoed back, so a mistyped password stays private', async () => {
    const res = await t.as(null).request('POST', '/v1/auth/login', {
      rawBody: '{"username": "admin", "password": hunter2-secret}',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/not valid JSON/);
    expect(res.text).not.toContain('hunter2');
  });
});

describe('error shape and routing', () => {
  test('every error is one JSON object with an error message and no stack trace', async () => {
    const responses = [
      await t.as(null).get('/v1/runs'),
      await t.as('nonsense').get('/v1/runs'),
      await t.api.get('/v1/runs?limit=nope'),
      await t.api.get('/v1/runs/run_missing'),
      await t.api.post('/v1/runs', { tool: 'bash' }),
      await t.api.request('POST', '/v1/runs', { rawBody: '[', headers: { 'content-type': 'application/json' } }),
      await t.api.request('PATCH', '/v1/runs'),
      await t.api.request('DELETE', '/healthz'),
      await t.api.get('/v1/nothing-here'),
      await t.api.get('/api/v2/ping'),
      await t.api.post('/v1/users', { username: 'admin', role: 'admin' }),
    ];
    expect(responses.map((r) => r.status)).toEqual([401, 401, 400, 404, 400, 400, 405, 405, 404, 404, 409]);
    for (const res of responses) expectErrorShape(res);
  });

  test('an unknown HTTP method answers in the same JSON error shape', async () => {
    const res = await rawRequest('PROPFIND', '/v1/runs', auth());
    expect(res.status).toBeGreaterThanOrEqual(400);
    expectErrorShape(res);
  });

  test('an unknown route is a JSON 404', async () => {
    const res = await t.api.get('/v1/no-such-thing');
    expect(res.status).toBe(404);
    expect(res.body.error).toMatch(/no route/);
  });

  test.each([
    ['GET', '/api'],
    ['GET', '/api/'],
    ['GET', '/api/v1/runs'],
    ['POST', '/api/v2/job_templates/1/callback/'],
    ['GET', '/api/healthz'],
  ])('%s %s is 404, with or without a token', async (method, path) => {
    for (const client of [t.api, t.as(null)]) {
      const res = await client.request(method, path, method === 'POST' ? { body: {} } : {});
      expect(res.status).toBe(404);
      expectErrorShape(res);
    }
  });

  test('the root path redirects to the web UI, which needs no token', async () => {
    const root = await t.as(null).get('/');
    expect([301, 302, 307, 308]).toContain(root.status);
    expect(root.headers.get('location')).toBe('/ui/');
    const bare = await t.as(null).get('/ui');
    expect(bare.headers.get('location')).toBe('/ui/');
    const ui = await t.as(null).get('/ui/');
    expect(ui.status).toBe(200);
    expect(ui.headers.get('content-type')).toMatch(/text\/html/);
  });
});

describe('health and metrics', () => {
  test('/healthz answers without a token', async () => {
    const res = await t.as(null).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
  });

  test('/readyz answers 200 while the store answers', async () => {
    const res = await t.as(null).get('/readyz');
    expect(res.status).toBe(200);
  });

  test('/metrics needs a token', async () => {
    expect((await t.as(null).get('/metrics')).status).toBe(401);
    expect((await t.as('cairn_nope').get('/metrics')).status).toBe(401);
  });

  test('/metrics serves Prometheus text with run, queue, worker and duration series after a run', async () => {
    const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo measured' });
    expect((await waitForRunEnd(t.api, run.id)).status).toBe('succeeded');
    const res = await t.api.get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toMatch(/^cairn_runs\{status="succeeded",tool="bash"\} [1-9]\d*$/m);
    expect(res.text).toMatch(/^cairn_queue_depth\{queue="default"\} \d+$/m);
    expect(res.text).toMatch(/^cairn_worker_busy \d+$/m);
    expect(res.text).toMatch(/^cairn_run_duration_seconds_count\{tool="bash",status="succeeded"\} [1-9]\d*$/m);
    expect(res.text).toMatch(/^cairn_run_duration_seconds_bucket\{le="\+Inf",tool="bash",status="succeeded"\} [1-9]\d*$/m);
  });
});
