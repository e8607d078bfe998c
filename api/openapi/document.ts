import { z } from 'zod';
import { isPublicPath } from '../middleware/auth';
import type { DescribedRoute } from './registry';

/**
 * The OpenAPI 3.1 document of the HTTP API, built from the route descriptions written beside the
 * routes (registry.ts) and the zod schemas they validate with (zod's own JSON Schema output, in
 * its input form: what a client sends). Which routes need a token is read from the same PUBLIC
 * list the authentication middleware uses, so the document cannot disagree with it.
 */
type Json = Record<string, unknown>;

const ERROR_MEANING: Record<number, string> = {
  400: 'The input is bad; `error` says why and `field` names the field at fault.',
  401: 'No valid credential: send `Authorization: Bearer <token>`.',
  403: "The caller's role or grants do not allow this.",
  404: 'No such object, or the caller may not know it exists.',
  409: 'The request conflicts with the current state (a duplicate, or a state that does not allow it).',
  410: 'It existed but is gone (expired or removed).',
  413: 'The body is larger than the route accepts.',
  422: 'The input is well formed but cannot be carried out.',
  429: 'Too many requests; `Retry-After` says when to try again.',
  502: 'A peer Cairn depends on answered badly.',
  503: 'Cairn or a service it needs is not available now.',
};

const ERROR_EXAMPLE: Record<number, Json> = {
  400: { error: 'name: Required', field: 'name' },
  401: { error: 'this route needs an Authorization: Bearer <token> header' },
  403: { error: 'this needs the operator role' },
  404: { error: 'run not found' },
  409: { error: 'a project named "web" already exists' },
  413: { error: 'the body is larger than 1 MiB' },
  429: { error: 'too many sign-in attempts; try again later' },
};

/** Converts a zod schema to JSON Schema, its `$defs` lifted into `components.schemas` under `prefix`. */
export function jsonSchemaOf(schema: z.ZodType, prefix: string, components: Json): Json {
  const converted = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any', reused: 'inline', cycles: 'ref' }) as Json;
  delete converted.$schema;
  const defs = converted.$defs as Record<string, Json> | undefined;
  delete converted.$defs;
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (value && typeof value === 'object') {
      const out: Json = {};
      for (const [key, inner] of Object.entries(value)) {
        if (key === '$ref' && typeof inner === 'string') {
          if (inner === '#') out[key] = `#/components/schemas/${prefix}`;
          else if (inner.startsWith('#/$defs/')) out[key] = `#/components/schemas/${prefix}_${inner.slice('#/$defs/'.length)}`;
          else out[key] = inner;
        } else out[key] = rewrite(inner);
      }
      return out;
    }
    return value;
  };
  const body = rewrite(converted) as Json;
  if (defs) {
    for (const [name, def] of Object.entries(defs)) components[`${prefix}_${name}`] = rewrite(def);
    if (JSON.stringify(body).includes(`"#/components/schemas/${prefix}"`)) components[prefix] = body;
  }
  return body;
}

/** `/v1/runs/:id` as OpenAPI writes it, `/v1/runs/{id}`, and the names of its parameters. */
export function openApiPath(path: string): { path: string; params: string[] } {
  const params: string[] = [];
  // `:name` is one segment; `{*name}` (path-to-regexp 8's wildcard) is the rest of the path.
  const converted = path.replace(/:([A-Za-z_][A-Za-z0-9_]*)(\([^)]*\))?|\{\*([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string | undefined, _re, rest: string | undefined) => {
    const param = (name ?? rest) as string;
    params.push(param);
    return `{${param}}`;
  });
  return { path: converted, params };
}

/** A path with its parameters filled in, to ask the authentication middleware whether it is public. */
const samplePath = (path: string) => path.replace(/:([A-Za-z_][A-Za-z0-9_]*)(\([^)]*\))?|\{\*[A-Za-z_][A-Za-z0-9_]*\}/g, 'x');

const operationId = (method: string, path: string) =>
  method +
  path
    .split('/')
    .filter(Boolean)
    .map((part) => part.replace(/^:/, 'by_').replace(/[^A-Za-z0-9]+/g, '_'))
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');

export function buildOpenApiDocument(routes: DescribedRoute[], version: string): Json {
  const schemas: Json = {
    Error: {
      type: 'object',
      description: 'The one error shape of every failed answer: `error` is a sentence the caller can act on; details such as `field` join it.',
      required: ['error'],
      properties: {
        error: { type: 'string' },
        field: { type: 'string', description: 'The field at fault, for 400s about input.' },
      },
      additionalProperties: true,
    },
  };
  const responses: Json = {};
  const codes = Object.keys(ERROR_MEANING).map(Number);
  for (const status of codes) {
    responses[`Error${status}`] = {
      description: ERROR_MEANING[status],
      content: {
        'application/json': { schema: { $ref: '#/components/schemas/Error' }, ...(ERROR_EXAMPLE[status] ? { example: ERROR_EXAMPLE[status] } : {}) },
      },
      ...(status === 429 ? { headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait.' } } } : {}),
    };
  }

  const paths: Record<string, Record<string, Json>> = {};
  const sorted = [...routes].sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
  for (const route of sorted) {
    const { path, params } = openApiPath(route.path);
    const id = operationId(route.method, route.path);
    const isPublic = isPublicPath(samplePath(route.path));
    const parameters: Json[] = params.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } }));
    if (route.query) {
      const query = jsonSchemaOf(route.query, `${id}Query`, schemas);
      const properties = query.properties as Record<string, Json> | undefined;
      const required = new Set((query.required as string[] | undefined) ?? []);
      if (properties) {
        for (const [name, schema] of Object.entries(properties)) {
          const { description, ...rest } = schema;
          parameters.push({ name, in: 'query', required: required.has(name), schema: rest, ...(typeof description === 'string' ? { description } : {}) });
        }
      } else {
        parameters.push({ name: 'query', in: 'query', style: 'form', explode: true, schema: query });
      }
    }

    const ok = route.ok ?? 200;
    const okType = route.okType ?? 'application/json';
    const answers: Json = {
      [String(ok)]:
        ok === 204 || (ok >= 300 && ok < 400)
          ? { description: route.okDescription ?? 'Done; no body.' }
          : {
              description: route.okDescription ?? 'Success.',
              content: { [okType]: { ...(okType === 'application/json' ? { schema: { type: 'object' } } : { schema: { type: 'string' } }), ...(route.okExample !== undefined ? { example: route.okExample } : {}) } },
            },
    };
    const errors = new Set<number>(route.errors ?? []);
    if (route.body || route.query || params.length > 0) errors.add(400);
    if (!isPublic) errors.add(401);
    if (route.role && route.role !== 'viewer') errors.add(403);
    if (params.length > 0) errors.add(404);
    if (route.body) errors.add(413);
    for (const status of [...errors].sort((a, b) => a - b)) {
      answers[String(status)] = ERROR_MEANING[status] ? { $ref: `#/components/responses/Error${status}` } : { description: 'Error.', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    }

    const operation: Json = {
      operationId: id,
      summary: route.summary,
      tags: [tagOf(route.path)],
      ...(route.description || route.role
        ? { description: [route.description, route.role ? `Needs the **${route.role}** role (or above) on the token.` : undefined].filter(Boolean).join('\n\n') }
        : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(isPublic ? { security: [] } : {}),
      responses: answers,
      'x-cairn-role': route.role ?? (isPublic ? 'public' : 'any'),
    };
    if (route.body) {
      const bodyType = route.bodyType ?? 'application/json';
      operation.requestBody = {
        required: true,
        content: { [bodyType]: { schema: jsonSchemaOf(route.body, `${id}Body`, schemas), ...(route.bodyExample !== undefined ? { example: route.bodyExample } : {}) } },
      };
    }
    (paths[path] ??= {})[route.method] = operation;
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'Cairn API',
      version,
      description:
        'The Cairn automation run service. Every failed answer is `{"error": "...", ...details}` (components.schemas.Error). ' +
        'Routes need `Authorization: Bearer <token>` unless their `security` is empty. The prose reference is docs/api.md.',
    },
    servers: [{ url: '/' }],
    security: [{ bearerToken: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerToken: { type: 'http', scheme: 'bearer', description: 'An API, agent or session token (POST /v1/auth/login, POST /v1/tokens).' },
      },
      schemas,
      responses,
    },
  };
}

function tagOf(path: string): string {
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'v1' && parts[1]) return parts[1];
  if (parts[0] === 'auth' || parts[0] === '.well-known') return parts[0] === 'auth' ? 'auth' : 'discovery';
  return parts[0] ?? 'root';
}
