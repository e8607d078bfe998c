import Router from '@koa/router';
import { z } from 'zod';
import type { ServerContext } from '../../services/context';
import { runDoctor } from '../../services/doctor';
import { requireRole } from '../middleware/auth';
import { parseInput, queryObject } from '../validate';
import { describeRoute } from '../openapi/registry';

/** It takes no parameters; any sent is a 400 naming it. */
const doctorQuery = z.strictObject({});

/**
 * `GET /v1/doctor` (spec part A 4.15, part B 5.2): the install's health checks and findings, with
 * the server's ansible-core version and the tested releases under `ansible`. Admin.
 */
export function doctorRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/doctor' });
  describeRoute({ method: 'get', path: '/v1/doctor', summary: 'Health checks of the install', role: 'admin', query: doctorQuery });
  router.get('/', async (ctx) => {
    requireRole(ctx, 'admin');
    parseInput(doctorQuery, queryObject(ctx.query));
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await runDoctor(server);
  });
  return router;
}
