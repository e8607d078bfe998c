import type { ApiResponse } from '../support/http';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * The fields every way of making runs shares (a run, a pipeline and its steps, a template and its
 * workflow steps, a launch) are refused alike wherever they are sent: 400, the same sentence, the
 * field named, and nothing recorded.
 */

let t: TestServer;
let templateId: string;
let finishedRunId: string;
let finishedSplitId: string;

beforeAll(async () => {
  t = await startTestServer();
  templateId = (await t.api.post('/v1/templates', { name: 'fields', tool: 'bash', command: 'true' })).body.id;
  finishedRunId = (await waitForRunEnd(t.api, (await t.api.post('/v1/runs', { tool: 'bash', command: 'true' })).body.id)).id;
  const split = await t.api.post('/v1/runs', { tool: 'bash', command: 'exit 1', shards: 2 });
  finishedSplitId = (await waitForRunEnd(t.api, split.body.id)).id;
});
afterAll(async () => {
  await t?.stop();
});

type Send = (body: Record<string, unknown>, headers?: Record<string, string>) => Promise<ApiResponse>;

/** A route that takes some shared fields: a valid body to put a bad value into, and where the fields go. */
interface Route {
  name: string;
  send: Send;
  body: () => Record<string, unknown>;
  fields: string[];
  /** Where in the body the fields sit: '' for the top level, `steps[0]` for a step. */
  at?: 'steps[0]';
}

let names = 0;
const post = (path: () => string): Send => (body, headers = {}) => t.api.request('POST', path(), { body, headers });
const put = (path: () => string): Send => (body, headers = {}) => t.api.request('PUT', path(), { body, headers });
const runStep = () => ({ tool: 'bash', command: 'true' });

const routes: Route[] = [
  { name: 'POST /v1/runs', send: post(() => '/v1/runs'), body: runStep, fields: ['tool', 'command', 'extra_vars', 'timeout', 'queue', 'shards'] },
  { name: 'POST /v1/pipelines', send: post(() => '/v1/pipelines'), body: () => ({ steps: [runStep()] }), fields: ['extra_vars', 'timeout', 'queue'] },
  { name: 'a pipeline step', send: post(() => '/v1/pipelines'), body: () => ({ steps: [runStep()] }), fields: ['tool', 'command', 'extra_vars'], at: 'steps[0]' },
  {
    name: 'POST /v1/templates',
    send: post(() => '/v1/templates'),
    body: () => ({ name: `t${++names}`, ...runStep() }),
    fields: ['tool', 'command', 'extra_vars', 'timeout', 'queue', 'shards'],
  },
  {
    name: 'PUT /v1/templates/{id}',
    send: put(() => `/v1/templates/${templateId}`),
    body: () => ({ name: 'fields', ...runStep() }),
    fields: ['tool', 'command', 'extra_vars', 'timeout', 'queue', 'shards'],
  },
  {
    name: 'a workflow template step',
    send: post(() => '/v1/templates'),
    body: () => ({ name: `w${++names}`, steps: [{ name: 'one', ...runStep() }] }),
    fields: ['tool', 'command', 'extra_vars'],
    at: 'steps[0]',
  },
  { name: 'POST /v1/templates/{id}/launch', send: post(() => `/v1/templates/${templateId}/launch`), body: () => ({}), fields: ['timeout'] },
];

/** Each shared field's bad values and the one sentence every route answers them with. */
const BAD: Record<string, [unknown, string][]> = {
  tool: [
    ['', 'tool must not be empty'],
    [7, 'tool must be a string'],
  ],
  command: [
    ['', 'command must not be empty'],
    [false, 'command must be a string'],
  ],
  extra_vars: [
    [[1, 2], 'extra_vars must be an object'],
    ['A=1', 'extra_vars must be an object'],
  ],
  timeout: [
    [3_000_000_000, 'timeout must be at most 31536000 seconds (a year)'],
    [-1, 'timeout must not be negative'],
    [1.5, 'timeout must be whole seconds'],
    ['60', 'timeout must be a number of seconds'],
  ],
  queue: [
    ['é'.repeat(128), 'queue must be at most 255 bytes'],
    [7, 'queue must be a string'],
  ],
  shards: [
    [101, 'shards must be at most 100'],
    [2.5, 'shards must be a whole number'],
    [-1, 'shards must not be negative'],
  ],
};

const cases = routes.flatMap((route) =>
  route.fields.flatMap((field) => BAD[field].map(([value, message]) => ({ route, field, value, message }))),
);

async function auditSize(): Promise<number> {
  return (await t.api.get('/v1/audit?limit=1')).body.total;
}

test.each(cases.map((c) => [c.route.name, c.field, JSON.stringify(c.value).slice(0, 20), c] as const))(
  '%s refuses %s = %s with the shared sentence, naming the field',
  async (_route, _field, _shown, { route, field, value, message }) => {
    const body = route.body();
    const named = route.at ? `${route.at}.${field}` : field;
    if (route.at) (body.steps as Record<string, unknown>[])[0][field] = value;
    else body[field] = value;
    const before = await auditSize();
    const res = await route.send(body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: `${named}: ${message}`, field: named });
    expect(await auditSize()).toBe(before);
  },
);

test('a missing tool or command is named as required on runs and pipeline steps alike', async () => {
  for (const [path, body, field] of [
    ['/v1/runs', { command: 'true' }, 'tool'],
    ['/v1/runs', { tool: 'bash' }, 'command'],
    ['/v1/pipelines', { steps: [{ command: 'true' }] }, 'steps[0].tool'],
    ['/v1/pipelines', { steps: [{ tool: 'bash' }] }, 'steps[0].command'],
  ] as const) {
    const res = await t.api.post(path, body);
    expect(res.status).toBe(400);
    const name = field.replace('steps[0].', '');
    expect(res.body).toEqual({ error: `${field}: ${name} is required`, field });
  }
});

describe('an Idempotency-Key over 255 bytes is refused by every route that takes one', () => {
  const header = { 'idempotency-key': 'k'.repeat(256) };
  const takers: [string, () => Promise<ApiResponse>][] = [
    ['POST /v1/runs', () => t.api.request('POST', '/v1/runs', { body: runStep(), headers: header })],
    ['POST /v1/pipelines', () => t.api.request('POST', '/v1/pipelines', { body: { steps: [runStep()] }, headers: header })],
    ['POST /v1/templates/{id}/launch', () => t.api.request('POST', `/v1/templates/${templateId}/launch`, { body: {}, headers: header })],
    ['POST /v1/runs/{id}/rerun', () => t.api.request('POST', `/v1/runs/${finishedRunId}/rerun`, { headers: header })],
    ['POST /v1/runs/{id}/retry', () => t.api.request('POST', `/v1/runs/${finishedSplitId}/retry`, { headers: header })],
  ];
  test.each(takers)('%s', async (_name, send) => {
    const before = await auditSize();
    const res = await send();
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'Idempotency-Key must be at most 255 bytes', header: 'Idempotency-Key' });
    expect(await auditSize()).toBe(before);
  });
});

describe('an action that takes no fields refuses any key in its body, naming it, and does nothing', () => {
  const actions: [string, () => string][] = [
    ['POST /v1/runs/{id}/rerun', () => `/v1/runs/${finishedRunId}/rerun`],
    ['POST /v1/runs/{id}/retry', () => `/v1/runs/${finishedSplitId}/retry`],
    ['POST /v1/runs/{id}/relaunch-failed', () => `/v1/runs/${finishedSplitId}/relaunch-failed`],
    ['POST /v1/runs/{id}/cancel', () => `/v1/runs/${finishedRunId}/cancel`],
    ['POST /v1/runs/{id}/approve', () => `/v1/runs/${finishedRunId}/approve`],
    ['POST /v1/runs/{id}/reject', () => `/v1/runs/${finishedRunId}/reject`],
    ['POST /v1/runs/{id}/stream-ticket', () => `/v1/runs/${finishedRunId}/stream-ticket`],
    ['POST /v1/templates/{id}/callback-key', () => `/v1/templates/${templateId}/callback-key`],
    ['POST /v1/auth/check', () => '/v1/auth/check'],
  ];
  test.each(actions)('%s', async (_name, path) => {
    const before = { audit: await auditSize(), runs: (await t.api.get('/v1/runs?limit=1')).body.total };
    const res = await t.api.post(path(), { extra_vars: { a: 1 } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'unknown field: extra_vars', field: 'extra_vars' });
    expect(await auditSize()).toBe(before.audit);
    expect((await t.api.get('/v1/runs?limit=1')).body.total).toBe(before.runs);
    const notAnObject = await t.api.post(path(), [1]);
    expect(notAnObject.status).toBe(400);
  });

  test('POST /v1/auth/logout with a key refuses it and the token keeps working', async () => {
    const minted = await t.api.post('/v1/tokens', { name: 'logout body' });
    const res = await t.as(minted.body.token).post('/v1/auth/logout', { everywhere: true });
    expect(res.body).toEqual({ error: 'unknown field: everywhere', field: 'everywhere' });
    expect((await t.as(minted.body.token).get('/v1/auth/me')).status).toBe(200);
  });
});

describe('a host pattern with an element beginning with @ (Ansible would read a file) is refused wherever one is taken', () => {
  const FILE_PATTERNS = ['@/etc/hostname', 'web:@/etc/hostname', 'all,@x'];
  let staticId: string;
  beforeAll(async () => {
    const inventory = await t.api.post('/v1/inventories', { name: 'patterns', content: '[web]\nweb1\nweb2\n[prod]\nweb1\ndb1\n' });
    expect(inventory.status).toBe(201);
    staticId = inventory.body.id;
  });

  const takers: [string, string, (pattern: string) => Promise<ApiResponse>][] = [
    ['POST /v1/runs', 'limit', (limit) => t.api.post('/v1/runs', { tool: 'ansible', command: '- hosts: all\n  tasks: []\n', inventory_id: staticId, limit })],
    ['POST /v1/templates', 'limit', (limit) => t.api.post('/v1/templates', { name: `limit ${++names}`, tool: 'ansible', command: '- hosts: all\n', limit })],
    ['PUT /v1/templates/{id}', 'limit', (limit) => t.api.request('PUT', `/v1/templates/${templateId}`, { body: { name: 'fields', ...runStep(), limit } })],
    ['POST /v1/inventories/preview', 'limit', (limit) => t.api.post('/v1/inventories/preview', { content: '[web]\nweb1\n', limit })],
    ['POST /v1/inventories/{id}/preview', 'limit', (limit) => t.api.post(`/v1/inventories/${staticId}/preview`, { limit })],
    ['POST /v1/inventories/preview (smart)', 'host_filter', (host_filter) => t.api.post('/v1/inventories/preview', { kind: 'smart', inputs: [staticId], host_filter })],
    ['POST /v1/inventories (smart)', 'host_filter', (host_filter) => t.api.post('/v1/inventories', { name: `smart ${++names}`, kind: 'smart', inputs: [staticId], host_filter })],
  ];
  const cases = takers.flatMap(([name, field, send]) => FILE_PATTERNS.map((pattern) => [name, pattern, field, send] as const));

  test.each(cases)('%s refuses %j naming %s, and records nothing', async (_name, pattern, field, send) => {
    const before = await auditSize();
    const res = await send(pattern);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: `${field}: ${field} must not hold an element beginning with @, which Ansible reads as a file of host names; name the hosts or groups`,
      field,
    });
    expect(await auditSize()).toBe(before);
  });

  test.each(['!web', 'web*:&prod', '~regex', 'web,db1'])('a preview takes %j, a pattern that names hosts', async (limit) => {
    const res = await t.api.post(`/v1/inventories/${staticId}/preview`, { limit });
    expect(res.status).toBe(200);
    expect(res.body.limit).toBe(limit);
  });

  test('a preview of web:&prod keeps the hosts in both groups', async () => {
    expect((await t.api.post(`/v1/inventories/${staticId}/preview`, { limit: 'web:&prod' })).body.hosts).toEqual(['web1']);
  });
});
