import Router from '@koa/router';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { ServerContext } from '../../services/context';
import { databaseAnswers } from '../../store/db';
import { requireRole } from '../middleware/auth';

const UI_DIR = path.resolve(__dirname, '..', '..', 'ui');

export function healthRoutes(server: ServerContext): Router {
  const router = new Router();

  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });

  router.get('/readyz', async (ctx) => {
    const ready = await databaseAnswers(server.sql);
    ctx.status = ready ? 200 : 503;
    ctx.body = ready ? { status: 'ready' } : { error: 'the store does not answer', status: 'unavailable' };
  });

  router.get('/metrics', async (ctx) => {
    requireRole(ctx, 'viewer');
    ctx.type = server.metrics.contentType;
    ctx.body = await server.metrics.collect();
  });

  router.get('/', (ctx) => ctx.redirect('/ui/'));
  // Routes match with or without a trailing slash, so only the bare /ui may redirect (else /ui/ loops).
  router.get('/ui', (ctx, next) => (ctx.path === '/ui' ? ctx.redirect('/ui/') : next()));
  router.get('/ui/', async (ctx) => {
    ctx.type = 'text/html; charset=utf-8';
    ctx.set('Content-Security-Policy', "default-src 'self'; style-src 'unsafe-inline'");
    ctx.body = await fs.readFile(path.join(UI_DIR, 'index.html'));
  });
  router.get('/ui/app.js', async (ctx) => {
    ctx.type = 'application/javascript; charset=utf-8';
    ctx.body = await fs.readFile(path.join(UI_DIR, 'app.js'));
  });

  return router;
}
