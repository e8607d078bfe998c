import Koa from 'koa';
import { randomUUID } from 'node:crypto';
import type { ServerContext } from '../services/context';
import { auditOrigin } from './middleware/audit-origin';
import { authenticate } from './middleware/auth';
import { jsonBody } from './middleware/body';
import { errorHandler } from './middleware/errors';
import { requestTargetHygiene } from './middleware/hygiene';
import { accountRoutes } from './routes/accounts';
import { auditRoutes } from './routes/audit';
import { federationRoutes } from './routes/federation';
import { healthRoutes } from './routes/health';
import { policyRoutes } from './routes/policies';
import { approvalRoutes } from './routes/approvals';
import { pipelineRoutes } from './routes/pipelines';
import { runDecisionRoutes } from './routes/run-decisions';
import { runEvidenceRoutes } from './routes/run-evidence';
import { runOutputRoutes } from './routes/run-output';
import { runReceiptRoutes } from './routes/run-receipt';
import { runRoutes } from './routes/runs';
import { templateRoutes } from './routes/templates';
import { workerRoutes } from './routes/workers';

/** The HTTP application: hygiene and errors first, then who is calling, then the routes. */
export function createApp(server: ServerContext): Koa {
  const app = new Koa();
  app.proxy = false;
  app.silent = true;

  app.use(async (ctx, next) => {
    const started = process.hrtime.bigint();
    ctx.state.requestId = randomUUID();
    ctx.state.logger = server.logger.child({ requestId: ctx.state.requestId });
    ctx.set('X-Request-Id', ctx.state.requestId);
    await next();
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // Paths only: query strings can carry tickets, and bodies are never logged.
    ctx.state.logger.debug({ method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round(ms * 10) / 10 }, 'request');
  });
  app.use(errorHandler);
  app.use(requestTargetHygiene);
  app.use(async (ctx, next) => {
    // Only /api/v2's external-compatible callback is ever served under /api/, and not by this release.
    if (ctx.path === '/api' || ctx.path.startsWith('/api/')) {
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
    accountRoutes(server),
    runRoutes(server),
    runDecisionRoutes(server),
    runOutputRoutes(server),
    runEvidenceRoutes(server),
    runReceiptRoutes(server),
    pipelineRoutes(server),
    templateRoutes(server),
    approvalRoutes(server),
    policyRoutes(server),
    auditRoutes(server),
    workerRoutes(server),
    federationRoutes(),
  ];
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
