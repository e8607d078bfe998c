import { spawnSync } from 'node:child_process';
import { servedRoutes } from '../../api/app';
import { openApiPath } from '../../api/openapi/document';
import { describedRoutes, routeKey } from '../../api/openapi/registry';
import { startTestServer, type TestServer } from '../support/server';

/** GET /v1/openapi.json: valid OpenAPI 3.1, covering exactly the routes the real server serves. */

let t: TestServer;
let doc: any;
beforeAll(async () => {
  // With a worker token, so the relay's routes are served and checked too.
  t = await startTestServer({ CAIRN_WORKER_TOKEN: 'openapi-test-worker-token-0123456789' });
  const res = await t.api.get('/v1/openapi.json');
  expect(res.status).toBe(200);
  doc = res.body;
});
afterAll(async () => {
  await t?.stop();
});

test('the document validates as OpenAPI 3.1 with a well-kept validator', async () => {
  // The validator ships as an ES module only, so it runs in its own node process, reading the document on stdin.
  const script =
    "import { Validator } from '@seriousme/openapi-schema-validator'; let s = ''; for await (const c of process.stdin) s += c; " +
    'const r = await new Validator().validate(JSON.parse(s)); process.stdout.write(JSON.stringify({ valid: r.valid, errors: r.errors ?? [] }));';
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { input: JSON.stringify(doc), cwd: __dirname, encoding: 'utf8' });
  // A missing validator means the devDependencies are not installed: run `npm install`.
  expect(run.stderr).toBe('');
  const result = JSON.parse(run.stdout);
  expect(result.errors).toEqual([]);
  expect(result.valid).toBe(true);
  expect(doc.openapi).toBe('3.1.0');
});

test('every route the server serves is described, and nothing else is', () => {
  const served = servedRoutes(t.server.app);
  expect(served.length).toBeGreaterThan(100);
  const described = new Map(describedRoutes().map((d) => [routeKey(d.method, d.path), d]));
  const documented = new Set<string>();
  for (const [path, operations] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    for (const method of Object.keys(operations)) documented.add(`${method.toUpperCase()} ${path}`);
  }

  const missing = served.filter((r) => !documented.has(`${r.method} ${openApiPath(r.path).path}`) || !described.has(routeKey(r.method, r.path)));
  const hints = missing.map((r) => {
    const sibling = served.find((s) => s.router === r.router && described.has(routeKey(s.method, s.path)));
    const where = sibling ? described.get(routeKey(sibling.method, sibling.path))!.source.replace(/:\d+$/, '') : 'the api/routes/*.ts file whose router serves it (its router is the ' + (r.router + 1) + 'th in createApp, api/app.ts)';
    return `${r.method} ${r.path} is served but not described: add describeRoute({ method: '${r.method.toLowerCase()}', path: '${r.path}', summary, role, body, query, ok, errors }) beside its router.${r.method.toLowerCase()}(...) in ${where} (api/openapi/registry.ts)`;
  });
  expect(hints).toEqual([]);

  const servedKeys = new Set(served.map((r) => routeKey(r.method, r.path)));
  const stale = [...described.values()].filter((d) => !servedKeys.has(routeKey(d.method, d.path))).map((d) => `${routeKey(d.method, d.path)} is described at ${d.source} but not served: remove or fix the description`);
  expect(stale).toEqual([]);
});

test('public routes say so, token routes name the bearer scheme and answer 401 in the one error shape', () => {
  expect(doc.components.securitySchemes.bearerToken).toEqual(expect.objectContaining({ type: 'http', scheme: 'bearer' }));
  expect(doc.security).toEqual([{ bearerToken: [] }]);
  for (const [path, method] of [
    ['/healthz', 'get'],
    ['/readyz', 'get'],
    ['/.well-known/openid-configuration', 'get'],
    ['/auth/oidc/callback', 'get'],
  ]) {
    expect([path, doc.paths[path][method].security]).toEqual([path, []]);
    expect(doc.paths[path][method].responses['401']).toBeUndefined();
  }
  // Sign-in is public, and its 401 is about the password, not a token.
  expect(doc.paths['/v1/auth/login'].post.security).toEqual([]);
  expect(doc.paths['/ui/{rest}'].get.parameters).toEqual([expect.objectContaining({ name: 'rest', in: 'path' })]);
  const runs = doc.paths['/v1/runs/{id}'].get;
  expect(runs.security).toBeUndefined();
  expect(runs.responses['401']).toEqual({ $ref: '#/components/responses/Error401' });
  expect(runs.responses['404']).toEqual({ $ref: '#/components/responses/Error404' });
  expect(doc.components.schemas.Error.required).toEqual(['error']);
  expect(doc.components.responses.Error400.content['application/json'].example).toEqual(expect.objectContaining({ field: expect.any(String) }));
});

test('bodies and queries come from the zod schemas the routes validate with', () => {
  const create = doc.paths['/v1/projects'].post;
  const schema = create.requestBody.content['application/json'].schema;
  expect(schema.type).toBe('object');
  expect(schema.properties).toEqual(expect.objectContaining({ name: expect.any(Object), url: expect.any(Object) }));
  expect(schema.required).toEqual(expect.arrayContaining(['name', 'url']));
  expect(create.responses['201']).toBeDefined();
  expect(create.responses['400']).toBeDefined();
  expect(create.responses['403']).toBeDefined();
  const files = doc.paths['/v1/projects/{id}/files'].get;
  expect(files.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'id', in: 'path', required: true }), expect.objectContaining({ name: 'path', in: 'query' })]));
});

test('examples ride along: bodies a client sends and the errors it may get', () => {
  const submit = doc.paths['/v1/runs'].post;
  expect(submit.requestBody.content['application/json'].example).toEqual({ tool: 'shell', command: 'uname -a' });
  expect(submit.responses['201']).toBeDefined();
  expect(doc.components.responses.Error401.content['application/json'].example).toEqual({ error: expect.any(String) });
  expect(doc.paths['/healthz'].get.responses['200'].content['application/json'].example).toEqual({ status: 'ok' });
});

test('the document asks for a token of any role, like every other read', async () => {
  const res = await t.as(null).get('/v1/openapi.json');
  expect(res.status).toBe(401);
  expect(res.body).toEqual({ error: expect.any(String) });
});
