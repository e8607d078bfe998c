import Router from '@koa/router';
import type { Context } from 'koa';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { installRoot } from '../../core/install-root';
import { describeRoute } from '../openapi/registry';

/** Where `npm install` (bin/setup.js, ui/build.mjs) puts the built console. */
export const CONSOLE_DIST = path.join(installRoot(__dirname, 2), 'ui', 'dist');

/**
 * The console loads only its own files: no inline script or style, no eval, no other origin, and
 * no page may frame it (clickjacking). Mantine's styles are a static stylesheet, so style-src needs
 * no 'unsafe-inline'; React sets element styles through the CSSOM, which the policy allows.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.js': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.map': 'application/json; charset=utf-8',
};

/** A built asset's name: hashed by the build, never a path. */
const ASSET_NAME = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.(js|css|svg|png|woff2|map)$/;

function consoleHeaders(ctx: Context): void {
  ctx.set('Content-Security-Policy', CONSOLE_CSP);
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
  ctx.set('Permissions-Policy', 'camera=(), microphone=(), geolocation=()');
}

async function readOrUndefined(file: string): Promise<Buffer | undefined> {
  try {
    return await fs.readFile(file);
  } catch {
    return undefined;
  }
}

/** The web console at /ui/: its page for every path under /ui/ (the console routes itself), and its hashed assets. */
export function consoleRoutes(): Router {
  const router = new Router();

  describeRoute({ method: 'get', path: '/', summary: 'The web console\'s entry (redirect)', ok: 302, okDescription: 'Redirect to /ui/.' });
  router.get('/', (ctx) => ctx.redirect('/ui/'));
  // Routes match with or without a trailing slash, so only the bare /ui may redirect (else /ui/ loops).
  describeRoute({ method: 'get', path: '/ui', summary: 'The web console', ok: 302, okDescription: 'Redirect to /ui/.' });
  router.get('/ui', (ctx, next) => (ctx.path === '/ui' ? ctx.redirect('/ui/') : next()));

  describeRoute({ method: 'get', path: '/ui/assets/:name', summary: 'A web console asset', okType: 'application/octet-stream' });
  router.get('/ui/assets/:name', async (ctx) => {
    consoleHeaders(ctx);
    const name = ctx.params.name;
    const body = ASSET_NAME.test(name) ? await readOrUndefined(path.join(CONSOLE_DIST, 'assets', name)) : undefined;
    if (!body) {
      ctx.status = 404;
      ctx.body = { error: `no console asset ${name}` };
      return;
    }
    ctx.type = TYPES[path.extname(name)];
    // Names carry their content's hash, so a name always means the same bytes.
    ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
    ctx.body = body;
  });

  describeRoute({ method: 'get', path: '/ui/{*rest}', summary: 'The web console (client-side routes)', okType: 'text/html', errors: [503] });
  router.get('/ui/{*rest}', async (ctx) => {
    consoleHeaders(ctx);
    ctx.set('Cache-Control', 'no-cache');
    const page = await readOrUndefined(path.join(CONSOLE_DIST, 'index.html'));
    ctx.type = 'text/html; charset=utf-8';
    if (!page) {
      ctx.status = 503;
      ctx.body =
        '<!doctype html><meta charset="utf-8"><title>Cairn</title><p>The console is not built on this server: ' +
        'run <code>npm install</code> (which builds it) or <code>node ui/build.mjs</code>, then reload. The API at /v1 works without it.</p>';
      return;
    }
    ctx.body = page;
  });

  return router;
}
