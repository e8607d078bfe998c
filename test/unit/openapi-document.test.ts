import { z } from 'zod';
import { buildOpenApiDocument, jsonSchemaOf, openApiPath } from '../../api/openapi/document';

describe('openApiPath', () => {
  test('Koa parameters and wildcards become OpenAPI templates', () => {
    expect(openApiPath('/v1/runs/:id/decisions/:record/redact')).toEqual({ path: '/v1/runs/{id}/decisions/{record}/redact', params: ['id', 'record'] });
    expect(openApiPath('/ui/{*rest}')).toEqual({ path: '/ui/{rest}', params: ['rest'] });
    expect(openApiPath('/healthz')).toEqual({ path: '/healthz', params: [] });
  });
});

describe('jsonSchemaOf', () => {
  test('a schema is read in its input form: what a client sends before transforms', () => {
    const schema = z.strictObject({ at: z.string().transform((v) => new Date(v)), n: z.number().optional() });
    const components = {};
    expect(jsonSchemaOf(schema, 'X', components)).toEqual({
      type: 'object',
      properties: { at: { type: 'string' }, n: { type: 'number' } },
      required: ['at'],
      additionalProperties: false,
    });
  });

  test('a recursive schema refers into components, never to $defs the document lacks', () => {
    type Node = { name: string; children?: Node[] };
    const node: z.ZodType<Node> = z.lazy(() => z.object({ name: z.string(), children: z.array(node).optional() }));
    const components: Record<string, unknown> = {};
    const schema = jsonSchemaOf(z.object({ root: node }), 'Tree', components);
    const text = JSON.stringify([schema, components]);
    expect(text).not.toContain('#/$defs/');
    for (const ref of text.match(/#\/components\/schemas\/[A-Za-z0-9_]+/g) ?? []) {
      expect(Object.keys(components)).toContain(ref.slice('#/components/schemas/'.length));
    }
  });
});

test('a public route has empty security and no 401; a token route lists 401, 403 and 404 as its role and path ask', () => {
  const doc = buildOpenApiDocument(
    [
      { method: 'get', path: '/healthz', summary: 'live', source: 'x' },
      { method: 'put', path: '/v1/things/:id', summary: 'replace', role: 'operator', body: z.object({ a: z.string() }), source: 'x' },
    ],
    '1',
  ) as any;
  expect(doc.paths['/healthz'].get.security).toEqual([]);
  expect(Object.keys(doc.paths['/healthz'].get.responses)).toEqual(['200']);
  expect(Object.keys(doc.paths['/v1/things/{id}'].put.responses).sort()).toEqual(['200', '400', '401', '403', '404', '413']);
  expect(doc.paths['/v1/things/{id}'].put['x-cairn-role']).toBe('operator');
});
