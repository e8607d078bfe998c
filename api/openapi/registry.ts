import type { z } from 'zod';

/**
 * What each served route is, written beside the route (api/routes/*.ts) with `describeRoute`, so
 * the OpenAPI document (api/openapi/document.ts) is built from the same zod schemas that
 * `parseInput` validates with. test/integration/openapi.test.ts fails when a route is served but
 * not described, or described but not served.
 */
export type RouteMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';
export type RouteRole = 'viewer' | 'operator' | 'admin';

export interface RouteDescription {
  method: RouteMethod;
  /** The full path as the router serves it, Koa style (`/v1/runs/:id`). */
  path: string;
  summary: string;
  description?: string;
  /** The least role the route asks of a token caller; absent on the public routes (auth.ts PUBLIC). */
  role?: RouteRole;
  /** The zod schema the body is parsed with (JSON unless `bodyType` says otherwise). */
  body?: z.ZodType;
  bodyType?: string;
  bodyExample?: unknown;
  /** The zod schema the query string is parsed with (`parseInput(schema, queryObject(ctx.query))`). */
  query?: z.ZodType;
  /** The success status (200 unless given) and what it carries. */
  ok?: number;
  okDescription?: string;
  okType?: string;
  okExample?: unknown;
  /** Error statuses beyond those the document adds itself (400 for input, 401/403 for tokens, 404 for ids, 413 for bodies). */
  errors?: number[];
}

export interface DescribedRoute extends RouteDescription {
  /** Where the description was written (file:line), for messages that point a reader at it. */
  source: string;
}

const described = new Map<string, DescribedRoute>();

export const routeKey = (method: string, path: string) => `${method.toUpperCase()} ${path}`;

/** Describes one served route for the OpenAPI document; call it beside the `router.<method>(...)` it describes. */
export function describeRoute(description: RouteDescription): void {
  // The call site is captured now and formatted only when a message needs it: formatting a stack
  // for each of some two hundred routes at every server start costs more than the start's routing.
  const site = new Error();
  const entry = { ...description } as DescribedRoute;
  Object.defineProperty(entry, 'source', { enumerable: true, get: () => callerSource(site) });
  described.set(routeKey(description.method, description.path), entry);
}

/** Every described route, in the order they were described. */
export function describedRoutes(): DescribedRoute[] {
  return [...described.values()];
}

/** file:line of the describeRoute call that made `site` (its stack: Error, describeRoute, the caller). */
function callerSource(site: Error): string {
  const line = site.stack?.split('\n')[2] ?? '';
  const match = /\(?((?:[A-Za-z]:)?[^():]+):(\d+):\d+\)?$/.exec(line.trim());
  if (!match) return 'unknown';
  const file = match[1].replace(/\\/g, '/');
  const at = file.lastIndexOf('/api/');
  return `${at >= 0 ? file.slice(at + 1) : file}:${match[2]}`;
}
