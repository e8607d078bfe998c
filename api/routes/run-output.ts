import Router from '@koa/router';
import { randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { z } from 'zod';
import { ApiError, notFound } from '../../core/errors';
import { hashBearerSecret } from '../../core/secrets';
import type { ServerContext } from '../../services/context';
import type { Sql } from '../../store/db';
import { eventsAfter, listEvents } from '../../store/events';
import { logByteRange, readLogChunks } from '../../store/logs';
import { eventView } from '../../core/run-view';
import { getRun, type Run } from '../../store/runs';
import { createStreamTicket, redeemStreamTicket } from '../../store/tickets';
import { recordMutation } from '../../services/audit';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { parseInput, queryObject } from '../validate';

export const LOG_TAIL_CAP = 4 * 1024 * 1024;
const STREAM_TICKET_SECONDS = 30;
const EXPORT_PAGE = 500;

const wholeNumber = (name: string) =>
  z.coerce.number({ message: `${name} must be a whole number` }).int(`${name} must be a whole number`).min(0, `${name} must not be negative`);

const logQuery = z.strictObject({ tail: wholeNumber('tail').optional() });
const eventQuery = z.strictObject({
  after: wholeNumber('after').default(0),
  limit: wholeNumber('limit').min(1, 'limit must be at least 1').max(1000, 'limit must be at most 1000').default(100),
  download: z.enum(['0', '1', 'true', 'false'], { message: 'download must be 1 or 0' }).optional(),
});

async function requireRun(sql: Sql, id: string): Promise<Run> {
  const run = await getRun(sql, id);
  if (!run) throw notFound(`run ${id}`);
  return run;
}

/** The log bytes in [from, to) for a stream; a stream cut short says so in its last line. */
async function* logBytes(sql: Sql, runId: string, from: number, to: number): AsyncGenerator<Buffer> {
  try {
    yield* logByteRange(sql, runId, from, to);
  } catch (err) {
    yield Buffer.from(`\nexport_incomplete: true reason: ${(err as Error).message}\n`);
  }
}

/** Every event after `after` as NDJSON, ending with an `export_incomplete` line if the export stops early. */
async function* eventLines(sql: Sql, runId: string, after: number): AsyncGenerator<string> {
  try {
    for await (const event of eventsAfter(sql, runId, after)) yield `${JSON.stringify(eventView(event))}\n`;
  } catch (err) {
    yield `${JSON.stringify({ export_incomplete: true, reason: (err as Error).message })}\n`;
  }
}

export function runOutputRoutes(server: ServerContext): Router {
  const router = new Router({ prefix: '/v1/runs/:id' });

  router.get('/logs', async (ctx) => {
    requireRole(ctx, 'viewer');
    const query = parseInput(logQuery, queryObject(ctx.query));
    const run = await requireRun(server.sql, ctx.params.id);
    const total = run.log_bytes;
    const from = query.tail === undefined ? 0 : Math.max(0, total - Math.min(query.tail, LOG_TAIL_CAP));
    if (from > 0) {
      ctx.set('Service-Log-Truncated', '1');
      ctx.set('Service-Log-Omitted-Bytes', String(from));
    }
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = Readable.from(logBytes(server.sql, run.id, from, total));
  });

  router.get('/events', async (ctx) => {
    requireRole(ctx, 'viewer');
    const query = parseInput(eventQuery, queryObject(ctx.query));
    const run = await requireRun(server.sql, ctx.params.id);
    if (query.download === '1' || query.download === 'true') {
      ctx.type = 'application/x-ndjson';
      ctx.attachment(`${run.id}-events.ndjson`);
      ctx.body = Readable.from(eventLines(server.sql, run.id, query.after));
      return;
    }
    const page = await listEvents(server.sql, run.id, query.after, query.limit + 1);
    const events = page.slice(0, query.limit);
    ctx.body = {
      events: events.map(eventView),
      count: events.length,
      has_more: page.length > query.limit,
      next_after: events.length ? events[events.length - 1].seq : query.after,
    };
  });

  router.post('/stream-ticket', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const run = await requireRun(server.sql, ctx.params.id);
    const ticket = randomBytes(32).toString('base64url');
    // A ticket is access to a run's live output, so its minting is in the chain; it is not a change
    // to the run and stays out of the run's receipt (no run_id on the entry).
    await recordMutation(server.sql, originOf(ctx), 201, async (tx, entry) => {
      await createStreamTicket(tx, { hash: hashBearerSecret(ticket), runId: run.id, accountId: caller.account.id, ttlSeconds: STREAM_TICKET_SECONDS });
      entry.body = { kind: 'stream_ticket.created', for_run: run.id };
    });
    ctx.status = 201;
    ctx.body = { ticket, expires_in: STREAM_TICKET_SECONDS };
  });

  router.get('/stream', async (ctx) => {
    const ticket = typeof ctx.query.ticket === 'string' ? ctx.query.ticket : '';
    if (!ticket) throw new ApiError(401, 'the stream needs ?ticket=<ticket> from POST /v1/runs/{id}/stream-ticket');
    if (!(await redeemStreamTicket(server.sql, hashBearerSecret(ticket), ctx.params.id))) {
      throw new ApiError(401, 'the stream ticket is not valid for this run: unknown, already used, or expired');
    }
    const run = await requireRun(server.sql, ctx.params.id);
    const out = new PassThrough();
    const closed = new AbortController();
    ctx.req.on('close', () => closed.abort());
    ctx.set({ 'Cache-Control': 'no-cache', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
    ctx.type = 'text/event-stream';
    ctx.body = out;
    void pumpStream(server, run.id, out, closed.signal).catch((err) => {
      server.logger.warn({ runId: run.id, err: (err as Error).message }, 'run stream ended with an error');
      out.end();
    });
  });

  return router;
}

/** Live events and log of one run as Server-Sent Events, until the run has ended and all is sent. */
async function pumpStream(server: ServerContext, runId: string, out: PassThrough, closed: AbortSignal): Promise<void> {
  const send = (event: string, data: unknown, id?: number) =>
    out.write(`event: ${event}\n${id !== undefined ? `id: ${id}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
  const decoder = new StringDecoder('utf8');
  let seq = 0;
  let offset = 0;
  let idleSince = Date.now();
  while (!closed.aborted) {
    const run = await requireRun(server.sql, runId);
    let progressed = false;
    for (const event of await listEvents(server.sql, runId, seq, EXPORT_PAGE)) {
      send('run-event', eventView(event), event.seq);
      seq = event.seq;
      progressed = true;
    }
    for (const chunk of await readLogChunks(server.sql, runId, offset)) {
      const fresh = chunk.data.subarray(Math.max(0, offset - chunk.start_offset));
      send('log', { offset, text: decoder.write(fresh) });
      offset = chunk.start_offset + chunk.data.length;
      progressed = true;
    }
    if (progressed) idleSince = Date.now();
    else if (run.finished_at && offset >= run.log_bytes) {
      send('end', { status: run.status, error: run.error });
      break;
    } else if (Date.now() - idleSince > 15_000) {
      out.write(': keep-alive\n\n');
      idleSince = Date.now();
    }
    if (!progressed) await server.hub.waitForActivity(runId, 1000, closed);
  }
  out.end();
}
