import Koa from 'koa';
import { randomUUID } from 'node:crypto';
import type { ServerContext } from '../services/context';
import { auditOrigin } from './middleware/audit-origin';
import { authenticate } from './middleware/auth';
import { jsonBody } from './middleware/body';
import { errorHandler } from './middleware/errors';
import { requestTargetHygiene } from './middleware/hygiene';
import { loggablePath } from './hook-path';
import { accessRoutes } from './routes/access';
import { accountRoutes } from './routes/accounts';
import { oidcRoutes } from './routes/oidc';
import { forgeLinkRoutes } from './routes/forge-links';
import { samlRoutes } from './routes/saml';
import { auditRoutes } from './routes/audit';
import { federationRoutes } from './routes/federation';
import { healthRoutes } from './routes/health';
import { consoleRoutes } from './routes/console';
import { notificationRoutes } from './routes/notifications';
import { credentialRoutes } from './routes/credentials';
import { hookRoutes } from './routes/hooks';
import { policyRoutes } from './routes/policies';
import { projectRoutes } from './routes/projects';
import { callbackRoutes } from './routes/callbacks';
import { EXTERNAL_CALLBACK_PATH } from '../core/ansible/callbacks';
import { approvalRoutes } from './routes/approvals';
import { driftRoutes } from './routes/drift';
import { attentionRoutes } from './routes/attention';
import { pipelineRoutes } from './routes/pipelines';
import { runDecisionRoutes } from './routes/run-decisions';
import { runEvidenceRoutes } from './routes/run-evidence';
import { runOutputRoutes } from './routes/run-output';
import { runReceiptRoutes } from './routes/run-receipt';
import { runRoutes } from './routes/runs';
import { aiRoutes } from './routes/ai';
import { mcpRoutes } from './routes/mcp';
import { scheduleRoutes } from './routes/schedules';
import { templateRoutes } from './routes/templates';
import { triggerRoutes } from './routes/triggers';
import { workerRoutes } from './routes/workers';
import { inventoryRoutes } from './routes/inventories';
import { inventorySourceRoutes } from './routes/inventory-sources';
import { importRoutes } from './routes/imports';
import { fleetRoutes } from './routes/fleet';
import { factRoutes } from './routes/facts';
import { estateRoutes } from './routes/estate';
import { doctorRoutes } from './routes/doctor';
import { relayRoutes } from './routes/relay';
import { openApiRoutes } from './routes/openapi';
import type Router from '@koa/router';

const servedRouters = new WeakMap<Koa, Router[]>();

/** A route the application serves, as @koa/router registered it. */
export interface ServedRoute {
  method: string;
  path: string;
  /** Other routes of the same router, to say where a missing description belongs. */
  router: number;
}

/** Every method and path the application's routers serve (HEAD, which GET implies, left out). */
export function servedRoutes(app: Koa): ServedRoute[] {
  const routers = servedRouters.get(app) ?? [];
  const served: ServedRoute[] = [];
  routers.forEach((router, index) => {
    for (const layer of router.stack) {
      for (const method of layer.methods) {
        if (method === 'HEAD') continue;
        served.push({ method, path: typeof layer.path === 'string' ? layer.path : String(layer.path), router: index });
      }
    }
  });
  return served;
}

/** The HTTP application: hygiene and errors first, then who is calling, then the routes. */
export function createApp(server: ServerContext): Koa {
  const app = new Koa();
  app.proxy = false;
  app.silent = true;

  app.use(async (ctx, next) => {
    const started = process.hrtime.bigint();
    ctx.state.receivedAt = Date.now();
    ctx.state.requestId = randomUUID();
    ctx.state.logger = server.logger.child({ requestId: ctx.state.requestId });
    ctx.set('X-Request-Id', ctx.state.requestId);
    await next();
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // Paths only, a hook's token left out: query strings can carry tickets, and bodies are never logged.
    ctx.state.logger.debug({ method: ctx.method, path: loggablePath(ctx.path), status: ctx.status, ms: Math.round(ms * 10) / 10 }, 'request');
  });
  app.use(errorHandler);
  app.use(requestTargetHygiene);
  app.use(async (ctx, next) => {
    // Only /api/v2's external-compatible callback is ever served under /api/ (spec part A 1.1 rule 1).
    if ((ctx.path === '/api' || ctx.path.startsWith('/api/')) && !EXTERNAL_CALLBACK_PATH.test(ctx.path)) {
      ctx.status = 404;
      ctx.body = { error: `no route for ${ctx.method} ${ctx.path}` };
      return;
    }
    await next();
  });
  app.use(authenticate(server));
  app.use(jsonBody);
  app.use(auditOrigin);

  const routers = [
    healthRoutes(server),
    consoleRoutes(),
    accountRoutes(server),
    oidcRoutes(server),
    samlRoutes(server),
    forgeLinkRoutes(server),
    accessRoutes(server),
    runRoutes(server),
    runDecisionRoutes(server),
    aiRoutes(server),
    mcpRoutes(server),
    runOutputRoutes(server),
    runEvidenceRoutes(server),
    runReceiptRoutes(server),
    pipelineRoutes(server),
    templateRoutes(server),
    projectRoutes(server),
    callbackRoutes(server),
    scheduleRoutes(server),
    notificationRoutes(server),
    credentialRoutes(server),
    triggerRoutes(server),
    hookRoutes(server),
    approvalRoutes(server),
    driftRoutes(server),
    attentionRoutes(server),
    policyRoutes(server),
    auditRoutes(server),
    workerRoutes(server),
    inventoryRoutes(server),
    inventorySourceRoutes(server),
    importRoutes(server),
    fleetRoutes(server),
    factRoutes(server),
    estateRoutes(server),
    doctorRoutes(server),
    federationRoutes(server),
    // /relay/v1 only when the server was started with --worker-token; otherwise it is no route.
    ...(server.config.workerToken && server.relay ? [relayRoutes(server)] : []),
    openApiRoutes(),
  ];
  servedRouters.set(app, routers);
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
