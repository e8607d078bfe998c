import net from 'node:net';
import http from 'node:http';
import type { Logger } from 'pino';
import { loadConfig } from '../../core/config';
import { createLogger, type RunningServer } from '../../cli/serve';
import { connectDatabase, type Sql } from '../../store/db';
import { createTestDatabase } from '../support/database';
import { apiClient } from '../support/http';
import { startServerInProcess, startTestServer, testSettings, waitForRunEnd, type TestServer } from '../support/server';

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
    // An empty object padded with whitespace: /v1/auth/check takes no fields.
    const rawBody = `{${' '.repeat(1024 * 1024 - 2)}}`;
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
    // POST /api/v2/job_templates/{id}/callback/ is served (test/integration/callbacks.test.ts); a GET of it is not.
    ['GET', '/api/v2/job_templates/1'],
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

  // What /metrics serves, parsed by Prometheus's own parser: test/integration/metrics.test.ts.
});

/** Sends a body byte for byte, so invalid UTF-8 reaches the server as it was written. */
async function sendBytes(method: string, path: string, body: Buffer, token: string | null = t.adminToken) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  const response = await fetch(`${t.url}${path}`, { method, headers, body: new Uint8Array(body) });
  const text = await response.text();
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, text, body: parsed };
}

const auditSize = async () => (await t.api.get('/v1/audit?limit=1')).body.total as number;

describe('malformed JSON on every write route is a 400 naming the field, and changes nothing', () => {
  const ids = { policy: '', heldRun: '', decidedRun: '', decision: '', template: '', user: '' };

  beforeAll(async () => {
    const policy = await t.api.post('/v1/policies', { name: 'hygiene hold', command_contains: 'hygiene-held' });
    expect(policy.status).toBe(201);
    ids.policy = policy.body.id;
    const held = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo hygiene-held one' });
    expect(held.body.status).toBe('held');
    ids.heldRun = held.body.id;
    const decided = await t.api.post('/v1/runs', { tool: 'bash', command: 'echo hygiene-held two' });
    ids.decidedRun = decided.body.id;
    const approved = await t.api.post(`/v1/runs/${decided.body.id}/approve`, { reason: 'checked' });
    expect(approved.status).toBe(200);
    ids.decision = approved.body.decision.id;
    // Its end is a chain entry of its own: let it land before the chain is counted.
    await waitForRunEnd(t.api, decided.body.id);
    const template = await t.api.post('/v1/templates', {
      name: 'hygiene',
      tool: 'bash',
      command: 'true',
      survey: [{ var: 'who', type: 'text', label: 'Who' }],
    });
    expect(template.status).toBe(201);
    ids.template = template.body.id;
    const user = await t.api.post('/v1/users', { username: 'hygiene-user', role: 'viewer' });
    expect(user.status).toBe(201);
    ids.user = user.body.id;
  });

  /** Each write route, with a body whose `field` holds whatever JSON text `slot` is. */
  const routes: { route: string; path: () => string; anonymous?: boolean; field: string; body: (slot: string) => string }[] = [
    { route: 'POST /v1/runs', path: () => '/v1/runs', field: 'command', body: (s) => `{"tool":"bash","command":${s}}` },
    { route: 'POST /v1/runs', path: () => '/v1/runs', field: 'extra_vars.target', body: (s) => `{"tool":"bash","command":"true","extra_vars":{"target":${s}}}` },
    {
      route: 'POST /v1/pipelines',
      path: () => '/v1/pipelines',
      field: 'steps[1].command',
      body: (s) => `{"steps":[{"tool":"bash","command":"true"},{"tool":"bash","command":${s}}]}`,
    },
    {
      route: 'POST /v1/templates',
      path: () => '/v1/templates',
      field: 'survey[0].label',
      body: (s) => `{"name":"hygiene-new","tool":"bash","command":"true","survey":[{"var":"who","type":"text","label":${s}}]}`,
    },
    {
      route: 'PUT /v1/templates/{id}',
      path: () => `/v1/templates/${ids.template}`,
      field: 'extra_vars.deploy.region',
      body: (s) => `{"name":"hygiene","tool":"bash","command":"true","extra_vars":{"deploy":{"region":${s}}}}`,
    },
    { route: 'POST /v1/templates/{id}/launch', path: () => `/v1/templates/${ids.template}/launch`, field: 'answers.who', body: (s) => `{"answers":{"who":${s}}}` },
    { route: 'POST /v1/policies', path: () => '/v1/policies', field: 'name', body: (s) => `{"name":${s},"command_contains":"never-matches"}` },
    { route: 'PUT /v1/policies/{id}', path: () => `/v1/policies/${ids.policy}`, field: 'command_contains', body: (s) => `{"name":"hygiene hold","command_contains":${s}}` },
    {
      route: 'POST /v1/users',
      path: () => '/v1/users',
      field: 'profile.full_name',
      body: (s) => `{"username":"hygiene-new","role":"viewer","profile":{"full_name":${s}}}`,
    },
    { route: 'PUT /v1/users/{id}', path: () => `/v1/users/${ids.user}`, field: 'profile.notes', body: (s) => `{"role":"viewer","profile":{"notes":${s}}}` },
    { route: 'POST /v1/tokens', path: () => '/v1/tokens', field: 'name', body: (s) => `{"name":${s},"kind":"agent"}` },
    { route: 'POST /v1/auth/login without a token', path: () => '/v1/auth/login', anonymous: true, field: 'password', body: (s) => `{"username":"admin","password":${s}}` },
    { route: 'POST /v1/runs/{id}/approve', path: () => `/v1/runs/${ids.heldRun}/approve`, field: 'reason', body: (s) => `{"reason":${s}}` },
    { route: 'POST /v1/runs/{id}/reject', path: () => `/v1/runs/${ids.heldRun}/reject`, field: 'reason', body: (s) => `{"reason":${s}}` },
    {
      route: 'POST /v1/runs/{id}/decisions/{decision}/corrections',
      path: () => `/v1/runs/${ids.decidedRun}/decisions/${ids.decision}/corrections`,
      field: 'text',
      body: (s) => `{"text":${s}}`,
    },
    {
      route: 'POST /v1/runs/{id}/decisions/{record}/redact',
      path: () => `/v1/runs/${ids.decidedRun}/decisions/${ids.decision}/redact`,
      field: 'category',
      body: (s) => `{"category":${s}}`,
    },
    { route: 'POST /v1/runs/{id}/stream-ticket', path: () => `/v1/runs/${ids.heldRun}/stream-ticket`, field: 'note', body: (s) => `{"note":${s}}` },
  ];

  const INVALID_BYTE = '@@FF@@';
  const lastKey = (field: string) => field.split('.').pop()!.replace(/\[\d+\]$/, '');
  const parentOf = (field: string) => field.split('.').slice(0, -1).join('.');
  const segments = (field: string) => field.split('.').length + (field.match(/\[\d+\]/g) ?? []).length;
  const deep = 100_000;

  /** Each malformed value: the JSON text put in the field, the field the 400 names, and its words. */
  const malformed: { what: string; slot: (field: string) => string; names: (field: string) => string; error: RegExp }[] = [
    { what: 'a lone surrogate', slot: () => '"north \\ud800 south"', names: (f) => f, error: /holds a lone surrogate/ },
    { what: 'a lone low surrogate', slot: () => '"\\udfff"', names: (f) => f, error: /holds a lone surrogate/ },
    { what: 'invalid UTF-8', slot: () => `"north ${INVALID_BYTE} south"`, names: (f) => f, error: /holds bytes that are not valid UTF-8$/ },
    {
      what: `nesting ${deep} deep`,
      slot: () => '['.repeat(deep) + ']'.repeat(deep),
      names: (f) => f + '[0]'.repeat(64 - segments(f)),
      error: /is nested more than 64 levels deep$/,
    },
    { what: 'a duplicate key', slot: (f) => `"first", "${lastKey(f)}": "second"`, names: (f) => f, error: /is given more than once$/ },
    {
      what: 'a __proto__ key',
      slot: () => '"plain", "__proto__": {"role": "admin"}',
      names: (f) => (parentOf(f) ? `${parentOf(f)}.__proto__` : '__proto__'),
      error: /a key named __proto__ is not accepted$/,
    },
    { what: 'a number past the range of a double', slot: () => '1e400', names: (f) => f, error: /is a number too large to represent$/ },
  ];

  test.each(routes)('$route: $field', async ({ route, path, anonymous, field, body }) => {
    const before = await auditSize();
    const answers = [];
    const texts: string[] = [];
    for (const { what, slot } of malformed) {
      const [head, ...tail] = body(slot(field)).split(INVALID_BYTE);
      const bytes = Buffer.concat([Buffer.from(head), ...tail.flatMap((part) => [Buffer.from([0xff]), Buffer.from(part)])]);
      const answer = await sendBytes(route.split(' ')[0], path(), bytes, anonymous ? null : t.adminToken);
      answers.push({ what, status: answer.status, body: answer.body });
      texts.push(answer.text);
    }
    expect(answers).toEqual(
      malformed.map(({ what, names, error }) => ({ what, status: 400, body: { error: expect.stringMatching(error), field: names(field) } })),
    );
    for (const { body: answer } of answers) expect(answer.error.startsWith(answer.field)).toBe(true);
    // The answer names the field and never repeats what was sent.
    for (const text of texts) expect(text).not.toMatch(/north|south|second|admin"/);
    expect(await auditSize()).toBe(before);
    expect((await t.api.get(`/v1/runs/${ids.heldRun}`)).body.status).toBe('held');
  });
});

describe('numbers and times past what the database holds are a 400 naming the field', () => {
  const TEN_YEARS = 10 * 365 * 24 * 3600;

  test('a token lives at most ten years', async () => {
    for (const expires_in of [1e13, TEN_YEARS + 1]) {
      const res = await t.api.post('/v1/tokens', { name: 'far future', expires_in });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: `expires_in: expires_in must be at most ${TEN_YEARS} seconds (ten years)`, field: 'expires_in' });
    }
    const res = await t.api.post('/v1/tokens', { name: 'ten years', expires_in: TEN_YEARS });
    expect(res.status).toBe(201);
    expect(new Date(res.body.expires_at).getUTCFullYear()).toBeGreaterThanOrEqual(new Date().getUTCFullYear() + 9);
  });

  test('a pipeline timeout is at most a year, as a run’s is', async () => {
    const before = await auditSize();
    const res = await t.api.post('/v1/pipelines', { steps: [{ tool: 'bash', command: 'true' }], timeout: 1e13 });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'timeout: timeout must be at most 31536000 seconds (a year)', field: 'timeout' });
    expect(await auditSize()).toBe(before);
  });

  test('an events cursor past a PostgreSQL integer is refused; the largest one reads an empty page', async () => {
    const { body: run } = await t.api.post('/v1/runs', { tool: 'bash', command: 'true' });
    for (const query of ['after=2147483648', 'after=99999999999999', 'after=2147483648&download=1']) {
      const res = await t.api.get(`/v1/runs/${run.id}/events?${query}`);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: 'after: after must be at most 2147483647', field: 'after' });
    }
    const last = await t.api.get(`/v1/runs/${run.id}/events?after=2147483647`);
    expect(last.status).toBe(200);
    expect(last.body).toMatchObject({ events: [], count: 0, has_more: false });
  });

  test.each([
    ['before', '0000-01-01T00:00:00Z'],
    ['after', '0000-12-31T23:59:59Z'],
    ['after', '0001-01-01T00:30:00+01:00'],
    ['before', '9999-12-31T23:59:59-01:00'],
  ])('a run list %s=%s, a time PostgreSQL cannot hold, is refused', async (field, time) => {
    const res = await t.api.get(`/v1/runs?${field}=${encodeURIComponent(time)}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: `${field}: ${field} must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z`, field });
  });

  test('a list offset may be any safe integer, which PostgreSQL takes as a bigint', async () => {
    const far = await t.api.get(`/v1/runs?offset=${Number.MAX_SAFE_INTEGER}`);
    expect(far.status).toBe(200);
    expect(far.body).toMatchObject({ runs: [], count: 0, has_more: false });
    const past = await t.api.get(`/v1/users?offset=${Number.MAX_SAFE_INTEGER + 1}`);
    expect(past.status).toBe(400);
    expect(past.body).toEqual({ error: 'offset: offset must be a whole number', field: 'offset' });
  });

  test('the first and last times PostgreSQL holds are accepted as list bounds', async () => {
    const res = await t.api.get(`/v1/runs?after=${encodeURIComponent('0001-01-01T00:00:00Z')}&before=${encodeURIComponent('9999-12-31T23:59:59.999Z')}&limit=1`);
    expect(res.status).toBe(200);
    expect(res.body.total).toBeGreaterThan(0);
  });
});

describe('query strings', () => {
  test.each(['/v1/runs', '/v1/users', '/v1/audit', '/v1/runs/run_missing/events'])('?__proto__=1 on %s is refused like any unknown key', async (path) => {
    const res = await t.api.get(`${path}?__proto__=1`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'unknown field: __proto__', field: '__proto__' });
  });
});

describe('bodies that are well-formed pass as sent', () => {
  test('astral characters, raw or as an escaped pair, are stored as sent', async () => {
    const rawBody = '{"tool":"bash","command":"true","dry_run":true,"extra_vars":{"raw":"😀 é","escaped":"\\ud83d\\ude00 \\u00e9"}}';
    const res = await t.api.request('POST', '/v1/runs', { rawBody, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(201);
    expect((await t.api.get(`/v1/runs/${res.body.id}`)).body.extra_vars).toEqual({ raw: '😀 é', escaped: '😀 é' });
  });

  test('nesting 64 levels deep is accepted; 65 is not', async () => {
    // The body is level 1 and extra_vars level 2, so 62 arrays inside reach 64.
    const body = (arrays: number) => `{"tool":"bash","command":"true","dry_run":true,"extra_vars":{"a":${'['.repeat(arrays)}${']'.repeat(arrays)}}}`;
    const ok = await t.api.request('POST', '/v1/runs', { rawBody: body(62), headers: { 'content-type': 'application/json' } });
    expect(ok.status).toBe(201);
    const deep = await t.api.request('POST', '/v1/runs', { rawBody: body(63), headers: { 'content-type': 'application/json' } });
    expect(deep.status).toBe(400);
    expect(deep.body.field).toBe(`extra_vars.a${'[0]'.repeat(62)}`);
  });

  test('a body that starts with a UTF-8 byte order mark is read as JSON', async () => {
    expect((await sendBytes('POST', '/v1/auth/check', Buffer.from('\ufeff{}'))).status).toBe(200);
    // Read as JSON indeed: the key it holds is named in the refusal.
    const keyed = await sendBytes('POST', '/v1/auth/check', Buffer.from('\ufeff{"any":"thing"}'));
    expect([keyed.status, JSON.parse(keyed.text).error]).toEqual([400, expect.stringContaining('any')]);
  });
});

describe('the server log holds no data sent in a request, even when PostgreSQL quotes it', () => {
  const lines: string[] = [];
  const destination = { write: (line: string) => void lines.push(line) };
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let running: RunningServer;
  let sql: Sql;
  let logger: Logger;

  beforeAll(async () => {
    database = await createTestDatabase();
    const config = loadConfig({}, testSettings(database.url, { CAIRN_LOG_LEVEL: 'debug' }));
    logger = createLogger(config, destination);
    running = await startServerInProcess(config, logger);
    sql = connectDatabase(database.url, { max: 1 });
  });
  afterAll(async () => {
    await sql?.end();
    await running?.stop();
    await database?.drop();
  });

  test('a write the database refuses is a 500 whose log names the constraint, not the profile', async () => {
    const fullName = 'Ann Sentinel-4417';
    // A constraint this API does not know about makes the insert fail in PostgreSQL itself,
    // whose error detail then quotes the whole row ("Failing row contains (…)").
    await sql.unsafe(`ALTER TABLE accounts ADD CONSTRAINT accounts_profile_screened CHECK (profile->>'full_name' IS DISTINCT FROM '${fullName}')`);
    const api = apiClient(running.url, running.adminToken!);
    const res = await api.post('/v1/users', { username: 'sentinel-user', role: 'viewer', profile: { full_name: fullName, email: 'ann.sentinel@example.com' } });
    expect(res.status).toBe(500);
    const failure = lines.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'request failed' && entry.requestId === res.body.request_id);
    expect(failure.err).toMatchObject({
      type: 'PostgresError',
      code: '23514',
      table_name: 'accounts',
      constraint_name: 'accounts_profile_screened',
      message: 'new row for relation "accounts" violates check constraint "accounts_profile_screened"',
    });
    expect(failure.err.stack).toMatch(/\n\s+at /);
    expect(failure.err).not.toHaveProperty('detail');
    expect(lines.join('')).not.toMatch(/Sentinel-4417|ann\.sentinel|sentinel-user/);
  });

  test('PostgreSQL errors that quote a value keep their shape in the log, not the value', async () => {
    // Each quotes the value in its message, its detail or its context (`JSON data, line 1: …`).
    const probes = [
      sql`SELECT ${'Sentinel-5521'}::int`,
      sql`SELECT ${'98765432109'}::int`,
      sql`SELECT ${'0000-01-01T00:00:00.000Z'}::timestamptz`,
      sql`SELECT (${'{"full_name": "Sentinel-5521 \\ud800"}'}::text)::jsonb`,
      sql`SELECT (${'{"full_name": Sentinel-5521}'}::text)::jsonb`,
      sql`SELECT (${'{"full_name": "Sentinel-5521 \\u0000"}'}::text)::jsonb`,
    ];
    for (const probe of probes) {
      const err = await probe.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeDefined();
      logger.error({ err }, 'probe failed');
    }
    const logged = lines.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'probe failed');
    expect(logged.map((entry) => [entry.err.type, entry.err.code, entry.err.message])).toEqual([
      ['PostgresError', '22P02', 'invalid input syntax for type integer: "…"'],
      ['PostgresError', '22003', 'value "…" is out of range for type integer'],
      ['PostgresError', '22008', 'date/time field value out of range: "…"'],
      ['PostgresError', '22P02', 'invalid input syntax for type json'],
      ['PostgresError', '22P02', 'invalid input syntax for type json'],
      ['PostgresError', '22P05', 'unsupported Unicode escape sequence'],
    ]);
    expect(lines.join('')).not.toMatch(/Sentinel-5521|98765432109|0000-01-01|SELECT/);
  });
});
