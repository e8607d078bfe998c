import Router from '@koa/router';
import { randomBytes } from 'node:crypto';
import { PassThrough, Readable, type Writable } from 'node:stream';
import { z } from 'zod';
import { DomainError, conflict, notFound } from '../../core/errors';
import { OPEN_TOKEN_ID } from '../../store/tokens';
import { hashBearerSecret } from '../../core/credentials/secrets';
import type { ServerContext } from '../../services/context';
import type { Sql } from '../../store/db';
import { eventsAfter, listEvents } from '../../store/events';
import { logByteRange } from '../../store/logs';
import { RunFeeds, STREAM_LOG_MESSAGE_BYTES, logPieces, readActivity, type FeedItem, type StreamPosition } from '../../services/runs/run-feed';

export { STREAM_LOG_MESSAGE_BYTES };
import { eventView } from '../../core/runs/run-view';
import { getRun } from '../../store/runs';
import { createStreamTicket, redeemStreamTicket } from '../../store/tickets';
import { readableRun } from '../../services/access/access';
import { recordMutation } from '../../services/audit/audit';
import { admitStreamTicket } from '../../services/access/throttle';
import { originOf } from '../middleware/audit-origin';
import { requireRole } from '../middleware/auth';
import { parseInput, queryObject } from '../validate';
import { noFields } from '../schemas/common';
import type { Run } from '../../core/runs/run';
import { describeRoute } from '../openapi/registry';

export const LOG_TAIL_CAP = 4 * 1024 * 1024;
const STREAM_TICKET_SECONDS = 30;
/**
 * A stream's log messages are at most STREAM_LOG_MESSAGE_BYTES of log each (services/runs/run-feed.ts).
 * What a stream holds for its client is bounded by construction: after each message it waits
 * until at most STREAM_QUEUE_BYTES of what it sent are still held (queued in the stream and the
 * response, not yet taken by the network), and reads nothing from the store meanwhile. So it holds
 * at most that plus one message however far behind its client is. A log message is at most six
 * times its bytes (a control byte is JSON-escaped as \u00XX) plus its `event:` and `id:` lines.
 * A client that takes nothing at all for the stall limit (--stream-stall-timeout) is too far
 * behind: it is told where to resume and its stream ends. The same span is then left for it to
 * read what was queued before its connection is closed.
 */
export const STREAM_QUEUE_BYTES = 64 * 1024;
export const STREAM_HELD_BOUND = STREAM_QUEUE_BYTES + 6 * STREAM_LOG_MESSAGE_BYTES + 1024;
/** run_events.seq is an integer column. */
const MAX_EVENT_SEQ = 2 ** 31 - 1;

const wholeNumber = (name: string) =>
  z.coerce.number({ message: `${name} must be a whole number` }).int(`${name} must be a whole number`).min(0, `${name} must not be negative`);

const logQuery = z.strictObject({ tail: wholeNumber('tail').optional() });
const eventQuery = z.strictObject({
  after: wholeNumber('after').max(MAX_EVENT_SEQ, `after must be at most ${MAX_EVENT_SEQ}`).default(0),
  limit: wholeNumber('limit').min(1, 'limit must be at least 1').max(1000, 'limit must be at most 1000').default(100),
  download: z.enum(['0', '1', 'true', 'false'], { message: 'download must be 1 or 0' }).optional(),
});
/** Where a stream starts: after this event seq, and at this byte of the log (from a `resume` event or an `id:`). */
const streamQuery = z.strictObject({
  ticket: z.string().optional(),
  after: wholeNumber('after').max(MAX_EVENT_SEQ, `after must be at most ${MAX_EVENT_SEQ}`).default(0),
  log_offset: wholeNumber('log_offset').max(Number.MAX_SAFE_INTEGER, `log_offset must be at most ${Number.MAX_SAFE_INTEGER}`).default(0),
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
  // One reader per run on this server, however many streams of it are open.
  const feeds = new RunFeeds(server.sql, server.hub);

  describeRoute({ method: 'get', path: '/v1/runs/:id/logs', summary: 'A run\'s output log', role: 'viewer', query: logQuery });
  router.get('/logs', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(logQuery, queryObject(ctx.query));
    const run = await readableRun(server.sql, caller, ctx.params.id);
    const total = run.log_bytes;
    const from = query.tail === undefined ? 0 : Math.max(0, total - Math.min(query.tail, LOG_TAIL_CAP));
    if (from > 0) {
      ctx.set('Service-Log-Truncated', '1');
      ctx.set('Service-Log-Omitted-Bytes', String(from));
    }
    ctx.type = 'text/plain; charset=utf-8';
    // Byte mode: the answer holds one read ahead of a slow client, not sixteen.
    ctx.body = Readable.from(logBytes(server.sql, run.id, from, total), { objectMode: false });
  });

  describeRoute({ method: 'get', path: '/v1/runs/:id/events', summary: 'A run\'s events', role: 'viewer', query: eventQuery });
  router.get('/events', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    const query = parseInput(eventQuery, queryObject(ctx.query));
    const run = await readableRun(server.sql, caller, ctx.params.id);
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

  describeRoute({ method: 'post', path: '/v1/runs/:id/stream-ticket', summary: 'A short-lived ticket for the run\'s live stream', role: 'viewer', body: noFields, ok: 201 });
  router.post('/stream-ticket', async (ctx) => {
    const caller = requireRole(ctx, 'viewer');
    parseInput(noFields, ctx.request.body);
    // A ticket opens the run's output, so it goes only to a caller who may read the run.
    const run = await readableRun(server.sql, caller, ctx.params.id);
    if (caller.token.id === OPEN_TOKEN_ID) {
      throw conflict('an install running open has no token to bind a stream ticket to: read the output with GET /v1/runs/{id}/output, or mint a token (which ends open running)');
    }
    // Each ticket is a chain entry: the limit keeps a viewer from growing the chain without bound.
    await admitStreamTicket(server.sql, caller.account.id);
    const ticket = randomBytes(32).toString('base64url');
    // A ticket is access to a run's live output, so its minting is in the chain; it is not a change
    // to the run and stays out of the run's receipt (no run_id on the entry).
    await recordMutation(server.sql, originOf(ctx), 201, async (tx, entry) => {
      await createStreamTicket(tx, { hash: hashBearerSecret(ticket), runId: run.id, accountId: caller.account.id, tokenId: caller.token.id, ttlSeconds: STREAM_TICKET_SECONDS });
      entry.body = { kind: 'stream_ticket.created', for_run: run.id };
    });
    ctx.status = 201;
    ctx.body = { ticket, expires_in: STREAM_TICKET_SECONDS };
  });

  describeRoute({ method: 'get', path: '/v1/runs/:id/stream', summary: 'The run\'s live event stream (server-sent events; the ticket is the credential)', query: streamQuery });
  router.get('/stream', async (ctx) => {
    // The query is checked before the ticket is spent, so a mistyped position costs no ticket.
    const query = parseInput(streamQuery, queryObject(ctx.query));
    if (!query.ticket) throw new DomainError('unauthorized', 'the stream needs ?ticket=<ticket> from POST /v1/runs/{id}/stream-ticket');
    if (!(await redeemStreamTicket(server.sql, hashBearerSecret(query.ticket), ctx.params.id))) {
      throw new DomainError('unauthorized', 'the stream ticket is not valid for this run: unknown, already used, or expired');
    }
    const run = await requireRun(server.sql, ctx.params.id);
    const out = new PassThrough();
    const closed = new AbortController();
    ctx.req.on('close', () => closed.abort());
    // No Connection header of ours: Node sends keep-alive for HTTP/1.1, and close when the client
    // asked to close, which a header set here would override (leaving its connection idle open).
    ctx.set({ 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' });
    ctx.type = 'text/event-stream';
    ctx.body = out;
    const res = ctx.res;
    const client = streamClient(out, res, closed.signal, server.config.streamStallTimeout * 1000);
    res.once('close', server.metrics.streamOpened(client.held));
    void pumpStream(server, feeds, run.id, { after: query.after, log_offset: query.log_offset }, client)
      .catch((err) => server.logger.warn({ runId: run.id, err: (err as Error).message }, 'run stream ended with an error'))
      .finally(() => {
        out.end();
        if (res.writableFinished || res.destroyed) return;
        // A client that reads nothing would hold its connection open forever.
        const hangUp = setTimeout(() => res.destroy(), client.stallMs).unref();
        res.once('close', () => clearTimeout(hangUp));
      });
  });

  return router;
}

type Delivery = 'sent' | 'stalled' | 'closed';

/** One stream's client: what the stream writes to (piped into the response), and when to give up on it. */
interface StreamClient {
  out: PassThrough;
  res: Writable;
  /** Bytes written for the client and not yet taken by the network: in the stream's buffers and the response's. */
  held(): number;
  closed: AbortSignal;
  stallMs: number;
}

function streamClient(out: PassThrough, res: Writable, closed: AbortSignal, stallMs: number): StreamClient {
  return { out, res, held: () => out.writableLength + out.readableLength + res.writableLength, closed, stallMs };
}

/** A stream with nothing to send for this long sends a comment line, so proxies keep it open. */
const KEEP_ALIVE_MS = 15_000;

/** How often a stream waiting for its client looks again, besides the buffers' drain events. */
const ROOM_CHECK_MS = 100;

/**
 * Queues text for the client, then waits until the client has taken all but STREAM_QUEUE_BYTES of
 * what is held for it: 'stalled' when it took nothing for `stallMs`.
 */
function deliver(client: StreamClient, text: string): Promise<Delivery> {
  const { out, res, held, closed, stallMs } = client;
  if (closed.aborted || out.destroyed) return Promise.resolve('closed');
  out.write(text);
  if (held() <= STREAM_QUEUE_BYTES) return Promise.resolve('sent');
  return new Promise((resolve) => {
    let least = held();
    let tookAt = Date.now();
    const check = () => {
      if (closed.aborted || out.destroyed) return settle('closed');
      const now = held();
      if (now <= STREAM_QUEUE_BYTES) return settle('sent');
      if (now < least) {
        least = now;
        tookAt = Date.now();
      } else if (Date.now() - tookAt >= stallMs) settle('stalled');
    };
    // The response's drain is when the network took what it held; the timer covers the rest.
    const timer = setInterval(check, ROOM_CHECK_MS);
    const settle = (result: Delivery) => {
      clearInterval(timer);
      out.off('drain', check);
      out.off('close', check);
      res.off('drain', check);
      closed.removeEventListener('abort', check);
      resolve(result);
    };
    out.on('drain', check);
    out.on('close', check);
    res.on('drain', check);
    closed.addEventListener('abort', check);
  });
}

/**
 * Live events and log of one run as Server-Sent Events from a position on, until the run has
 * ended and all is sent. Every message's `id:` is the position after it (`<seq>:<log offset>`); a
 * client too far behind gets a `resume` event with the position instead of the rest. What the
 * stream sends comes from the run's feed on this server (one reader of the store for all its
 * streams); a stream further behind than the feed holds reads the store itself until it has
 * caught up.
 */
async function pumpStream(server: ServerContext, feeds: RunFeeds, runId: string, from: StreamPosition, client: StreamClient): Promise<void> {
  const { out, closed } = client;
  const at: StreamPosition = { ...from };
  const send = (text: string) => deliver(client, text);
  const message = (event: string, data: unknown) => `event: ${event}\nid: ${at.after}:${at.log_offset}\ndata: ${JSON.stringify(data)}\n\n`;
  /** The message for a feed item, moving the position past it; made once for every stream standing where the feed did. */
  const itemMessage = (item: FeedItem): string => {
    const shared = at.after === item.before.after && at.log_offset === item.before.log_offset;
    if (shared && item.message !== undefined) {
      Object.assign(at, item.after);
      return item.message;
    }
    let text: string;
    if (item.event) {
      at.after = item.event.seq;
      text = message('run-event', eventView(item.event));
    } else {
      const offset = at.log_offset;
      at.log_offset = item.after.log_offset;
      text = message('log', { offset, text: item.log!.toString('utf8', offset - item.before.log_offset) });
    }
    if (shared) item.message = text;
    return text;
  };
  const { feed, release } = feeds.subscribe(runId, at);
  let cursor: number | undefined;
  let delivery: Delivery = 'sent';
  let idleSince = Date.now();
  try {
    while (delivery === 'sent' && !closed.aborted) {
      const step = feed.next(at, cursor);
      if (step.kind === 'item') {
        cursor = step.cursor;
        delivery = await send(itemMessage(step.item));
        idleSince = Date.now();
        continue;
      }
      if (step.kind === 'end') {
        await send(message('end', { status: step.status, error: step.error }));
        return;
      }
      if (step.kind === 'wait') {
        const quiet = Date.now() - idleSince;
        if (quiet >= KEEP_ALIVE_MS) {
          delivery = await send(': keep-alive\n\n');
          idleSince = Date.now();
        } else await feed.waitForNews(KEEP_ALIVE_MS - quiet, closed);
        continue;
      }
      // Behind what the feed holds: one read of the store of its own.
      cursor = undefined;
      const read = await readActivity(server.sql, runId, at);
      if (!read) throw notFound(`run ${runId}`);
      let progressed = false;
      for (const event of read.events) {
        at.after = event.seq;
        progressed = true;
        delivery = await send(message('run-event', eventView(event)));
        if (delivery !== 'sent') break;
      }
      if (delivery !== 'sent') break;
      for (const piece of logPieces(read.log)) {
        const offset = at.log_offset;
        at.log_offset += piece.length;
        progressed = true;
        delivery = await send(message('log', { offset, text: piece.toString('utf8') }));
        if (delivery !== 'sent') break;
      }
      if (delivery !== 'sent') break;
      if (progressed) idleSince = Date.now();
      else if (read.finished && at.log_offset >= read.log_bytes) {
        await send(message('end', { status: read.status, error: read.error }));
        return;
      } else if (Date.now() - idleSince > KEEP_ALIVE_MS) {
        delivery = await send(': keep-alive\n\n');
        idleSince = Date.now();
      }
      if (!progressed) await server.hub.waitFor(runId, 1000, closed);
    }
  } finally {
    release();
  }
  // Queued behind everything sent, so a client that reads it has everything up to the position it names.
  if (delivery === 'stalled') {
    out.write(message('resume', at));
    server.metrics.streamsStalled.inc();
  }
}
