import net from 'node:net';
import { statementsSentSoFar } from '../../store/db';
import { STREAM_HELD_BOUND, STREAM_LOG_MESSAGE_BYTES, STREAM_QUEUE_BYTES } from '../../api/routes/run-output';
import { waitUntil } from '../support/schedules';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';
import { soakSize } from '../support/soak';

const STALL_SECONDS = 4;
let t: TestServer;
beforeAll(async () => {
  // A short stall limit, so a stalled client is closed within the test's time.
  t = await startTestServer({ CAIRN_RUN_TIMEOUT: '1h', CAIRN_STREAM_STALL_TIMEOUT: `${STALL_SECONDS}s` });
});
afterAll(async () => {
  await t?.stop();
});

interface SseMessage {
  event: string;
  id?: string;
  data: any;
}

/** Whole SSE messages in order; a message cut off by a closed connection is left out. */
function parseSse(text: string): SseMessage[] {
  const blocks = text.split('\n\n');
  blocks.pop(); // after the last blank line: empty, or a message cut short
  const messages: SseMessage[] = [];
  for (const block of blocks) {
    const message: SseMessage = { event: 'message', data: undefined };
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = line.slice(0, colon);
      const value = line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') message.event = value;
      else if (field === 'id') message.id = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length === 0) continue;
    message.data = JSON.parse(data.join('\n'));
    messages.push(message);
  }
  return messages;
}

const logTextOf = (messages: SseMessage[]) => messages.filter((m) => m.event === 'log').map((m) => m.data.text).join('');
const eventsOf = (messages: SseMessage[]) => messages.filter((m) => m.event === 'run-event').map((m) => m.data);

async function submit(command: string): Promise<any> {
  const { status, body } = await t.api.post('/v1/runs', { tool: 'bash', command });
  expect(status).toBe(201);
  return body;
}

async function ticketFor(runId: string): Promise<string> {
  const { status, body } = await t.api.post(`/v1/runs/${runId}/stream-ticket`);
  expect(status).toBe(201);
  return body.ticket;
}

/** A stream read by an ordinary client to its end. */
async function readStream(runId: string, query = ''): Promise<{ status: number; text: string }> {
  const response = await fetch(`${t.url}/v1/runs/${runId}/stream?ticket=${await ticketFor(runId)}${query}`);
  return { status: response.status, text: await response.text() };
}

/** A raw HTTP client that asks for the stream and then reads nothing until told to. */
function openUnreadStream(runId: string, ticket: string): net.Socket {
  const { hostname, port } = new URL(t.url);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => undefined); // a client the server gives up on sees its connection reset
  socket.write(`GET /v1/runs/${runId}/stream?ticket=${ticket} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nConnection: close\r\n\r\n`);
  return socket;
}

/**
 * Starts reading a raw client and resolves once the server closes the connection (the request asks
 * it to close after the response, rather than keep the connection idle for reuse): the response
 * head, the body (chunked encoding undone) and whether the body was complete (its last chunk came).
 */
function readToClose(socket: net.Socket): Promise<{ head: string; body: string; complete: boolean }> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    socket.on('data', (data: Buffer) => parts.push(data));
    socket.on('close', () => {
      const raw = Buffer.concat(parts);
      const split = raw.indexOf('\r\n\r\n');
      const head = raw.subarray(0, split).toString('latin1');
      const complete = raw.subarray(raw.length - 5).toString('latin1') === '0\r\n\r\n';
      resolve({ head, body: dechunk(raw.subarray(split + 4)).toString('utf8'), complete });
    });
  });
}

function dechunk(data: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  while (at < data.length) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) break;
    const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (!size) break;
    out.push(data.subarray(lineEnd + 2, Math.min(data.length, lineEnd + 2 + size)));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(out);
}

const MiB = 1024 * 1024;

/** One series of the server's /metrics, summed over its labels. */
async function metric(name: string): Promise<number> {
  const { status, text } = await t.api.get('/metrics');
  expect(status).toBe(200);
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name} `) || line.startsWith(`${name}{`))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

test('clients that stop reading a stream of a large log cost the server a bounded buffer each; a slow one is closed with where to resume, one that never reads is cut off', async () => {
  // Far more than the network and the streams' buffers hold, so unread streams must stop reading.
  const logBytes = soakSize(32_000_000, 200_000_000);
  // Lines of 100 bytes: 99 zeros and a line break.
  const run = await submit(`yes "$(printf '%099d' 0)" | head -c ${logBytes}`);
  await waitForRun(t.api, run.id, (r) => r.log_bytes > 0);
  const tickets = await Promise.all([0, 1, 2, 3, 4].map(() => ticketFor(run.id)));
  const stalledBefore = await metric('cairn_run_streams_stalled_total');
  const clients = tickets.map((ticket) => openUnreadStream(run.id, ticket));

  // What the server holds for each client, as it counts it (the stream's and the response's
  // buffers), sampled until every stream has given up on its client; while a stream waits for its
  // client, what it holds stays put, so the samples see each stream's most.
  let mostHeld = 0;
  let streamsSeen = 0;
  await waitUntil(
    'all five streams to stall',
    async () => {
      mostHeld = Math.max(mostHeld, await metric('cairn_run_stream_held_bytes_max'));
      streamsSeen = Math.max(streamsSeen, await metric('cairn_run_streams'));
      return (await metric('cairn_run_streams_stalled_total')) - stalledBefore >= 5;
    },
    60_000,
  );
  console.log(`five unread streams of a ${logBytes / 1e6} MB log: at most ${(mostHeld / MiB).toFixed(2)} MiB held for one client (bound ${(STREAM_HELD_BOUND / MiB).toFixed(2)} MiB)`);
  expect(streamsSeen).toBe(5);
  // Each stream waited with more than its queue allowance held (so the clients were behind), and never more than its bound.
  expect(mostHeld).toBeGreaterThan(STREAM_QUEUE_BYTES);
  expect(mostHeld).toBeLessThanOrEqual(STREAM_HELD_BOUND);

  // One client starts reading now: it finds everything sent before the stall, then a resume
  // event naming what it has. The others read nothing and are cut off a stall limit later.
  const slow = await readToClose(clients[0]);
  expect(slow.complete).toBe(true);
  expect(slow.head).toMatch(/^HTTP\/1\.1 200/);
  // It asked to close after the response, and the stream's headers do not override that with keep-alive.
  expect(slow.head).toMatch(/\r\nConnection: close(\r\n|$)/i);
  const received = parseSse(slow.body);
  const resume = received[received.length - 1];
  expect(resume.event).toBe('resume');
  const sentText = logTextOf(received);
  const sentEvents = eventsOf(received);
  expect(resume.data).toEqual({ after: sentEvents[sentEvents.length - 1].seq, log_offset: Buffer.byteLength(sentText) });
  expect(received[received.length - 2].id).toBe(`${resume.data.after}:${resume.data.log_offset}`);
  // The stream stopped reading the log once its client was behind: it sent what the network held and its bound.
  expect(resume.data.log_offset).toBeLessThan(logBytes / 2);
  console.log(`the slow client had ${resume.data.log_offset} bytes of the log when it was closed`);

  // Resuming from there gives exactly what the slow client had not received, then the end.
  await waitForRunEnd(t.api, run.id, 150_000);
  const rest = await readStream(run.id, `&after=${resume.data.after}&log_offset=${resume.data.log_offset}`);
  const allEvents = (await t.api.get(`/v1/runs/${run.id}/events?limit=1000`)).body.events;
  const fullLog = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(rest.status).toBe(200);
  const resumed = parseSse(rest.text);
  expect(resumed[resumed.length - 1]).toMatchObject({ event: 'end', data: { status: 'succeeded' } });
  const restText = logTextOf(resumed);
  expect(restText.length).toBe(fullLog.length - resume.data.log_offset);
  expect(sentText + restText === fullLog).toBe(true);
  expect([...sentEvents, ...eventsOf(resumed)]).toEqual(allEvents);

  // The clients that never read are disconnected a stall limit after their stream gave up: once
  // the server has closed every stream, the silent client reads what the network held and then
  // the end of the connection, with the response cut short.
  await waitUntil('the unread streams to be closed', async () => (await metric('cairn_run_streams')) === 0, 30_000);
  const silent = await readToClose(clients[1]);
  for (const other of clients.slice(2)) other.destroy();
  expect(silent.complete).toBe(false);
  expect(parseSse(silent.body).some((m) => m.event === 'resume')).toBe(false);
}, 300_000);

test('a reader that keeps up receives every byte and event in order, in whole characters, each message naming its position', async () => {
  // About 6 MB of lines with two-, three- and four-byte characters, written while the stream is open.
  const run = await submit(`for i in $(seq 1 70000); do echo "line $i: café € 😀 ${'x'.repeat(60)}"; done`);
  const { status, text } = await readStream(run.id);
  expect(status).toBe(200);
  const messages = parseSse(text);
  expect(messages[messages.length - 1]).toMatchObject({ event: 'end', data: { status: 'succeeded' } });

  const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(Buffer.byteLength(log)).toBeGreaterThan(5 * MiB);
  const logMessages = messages.filter((m) => m.event === 'log');
  expect(logMessages.length).toBeGreaterThan(5); // read a bounded piece at a time
  // Each message holds at most 64 KiB of the log, so its text stays out of V8's large-object space.
  expect(Math.max(...logMessages.map((m) => Buffer.byteLength(m.data.text)))).toBeLessThanOrEqual(STREAM_LOG_MESSAGE_BYTES);
  expect(logTextOf(messages) === log).toBe(true);
  expect(logTextOf(messages)).not.toContain('\uFFFD');

  // Each piece starts where the one before ended, and each id is the position after its message.
  let offset = 0;
  let after = 0;
  for (const m of messages.slice(0, -1)) {
    if (m.event === 'log') {
      expect(m.data.offset).toBe(offset);
      offset += Buffer.byteLength(m.data.text);
    } else {
      after = m.data.seq;
    }
    expect(m.id).toBe(`${after}:${offset}`);
  }
  const events = (await t.api.get(`/v1/runs/${run.id}/events?limit=1000`)).body.events;
  expect(eventsOf(messages)).toEqual(events);
  expect(events.map((e: any) => e.event)).toEqual(['run.created', 'run.started', 'run.finished']);
}, 120_000);

test('a stream resumes from an event seq and log offset, and a bad position is refused naming the field without spending the ticket', async () => {
  const run = await submit(`printf 'one\\ntwo\\nthree\\n'`);
  await waitForRunEnd(t.api, run.id);
  const ticket = await ticketFor(run.id);
  const open = (query: string) => fetch(`${t.url}/v1/runs/${run.id}/stream?ticket=${ticket}${query}`);
  for (const [query, field] of [
    ['&after=-1', 'after'],
    ['&after=1.5', 'after'],
    ['&after=2147483648', 'after'],
    ['&log_offset=abc', 'log_offset'],
    ['&log_offset=100000000000000000000', 'log_offset'],
    ['&from=3', 'from'],
  ]) {
    const refused = await open(query);
    expect(refused.status).toBe(400);
    expect((await refused.json()).field).toBe(field);
  }
  const resumed = await open('&after=2&log_offset=4');
  expect(resumed.status).toBe(200);
  const messages = parseSse(await resumed.text());
  expect(eventsOf(messages).map((e) => e.seq)).toEqual([3]);
  expect(messages.find((m) => m.event === 'log')?.data).toEqual({ offset: 4, text: 'two\nthree\n' });
  expect(messages[messages.length - 1]).toMatchObject({ event: 'end', data: { status: 'succeeded' } });
});

test('a stream ticket stops working once the token that minted it is revoked or its account deleted', async () => {
  // A template's run, so that a viewer granted the template reads it (docs/api.md, Access).
  const template = await t.api.post('/v1/templates', { name: 'stream watch', tool: 'bash', command: 'echo hello' });
  expect(template.status).toBe(201);
  const run = (await t.api.post(`/v1/templates/${template.body.id}/launch`, {})).body;
  await waitForRunEnd(t.api, run.id);
  const streamStatus = async (ticket: string) => (await fetch(`${t.url}/v1/runs/${run.id}/stream?ticket=${ticket}`)).status;
  const mintTicket = async (token: string) => {
    const { status, body } = await t.as(token).post(`/v1/runs/${run.id}/stream-ticket`);
    expect(status).toBe(201);
    return body.ticket as string;
  };

  const minted = await t.api.post('/v1/tokens', { name: 'stream watcher' });
  expect(minted.status).toBe(201);
  const live = await mintTicket(minted.body.token);
  const revoked = await mintTicket(minted.body.token);
  expect(await streamStatus(live)).toBe(200);
  expect((await t.api.request('DELETE', `/v1/tokens/${minted.body.id}`)).status).toBe(204);
  expect(await streamStatus(revoked)).toBe(401);

  const user = await t.api.post('/v1/users', { username: 'leaving-viewer', role: 'viewer' });
  expect(user.status).toBe(201);
  expect((await t.api.post('/v1/grants', { object: template.body.id, permission: 'read', user_id: user.body.id })).status).toBe(201);
  const usersToken = await t.api.post('/v1/tokens', { name: 'viewer token', username: 'leaving-viewer' });
  expect(usersToken.status).toBe(201);
  const orphaned = await mintTicket(usersToken.body.token);
  expect((await t.api.request('DELETE', `/v1/users/${user.body.id}`)).status).toBe(204);
  expect(await streamStatus(orphaned)).toBe(401);
});

test('many streams of one live run share one reader of the store, and a stream that joins far behind the others still gets everything', async () => {
  // A line every 20 ms for about two seconds, then 5 MB at once: more than a run's feed keeps.
  const command = `for i in $(seq 1 100); do echo "tick $i"; sleep 0.02; done; yes "$(printf '%099d' 7)" | head -c 5000000`;
  const READERS = 40;
  /** Statements the server sent while `readers` streams of one run of the command were read to the end. */
  const statementsFor = async (readers: number) => {
    const run = await submit(command);
    const tickets = await Promise.all(Array.from({ length: readers }, () => ticketFor(run.id)));
    const before = statementsSentSoFar();
    const texts = await Promise.all(tickets.map(async (ticket) => (await fetch(`${t.url}/v1/runs/${run.id}/stream?ticket=${ticket}`)).text()));
    const statements = statementsSentSoFar() - before;
    return { run, texts, statements };
  };
  const alone = await statementsFor(1);
  const many = await statementsFor(READERS);
  const log = (await t.api.get(`/v1/runs/${many.run.id}/logs`)).text;
  expect(Buffer.byteLength(log)).toBeGreaterThan(5_000_000);
  for (const text of many.texts) {
    const messages = parseSse(text);
    expect(messages[messages.length - 1]).toMatchObject({ event: 'end', data: { status: 'succeeded' } });
    expect(logTextOf(messages) === log).toBe(true);
  }
  console.log(`statements while streams were read: one stream ${alone.statements}, ${READERS} streams ${many.statements}`);
  // Each stream costs its ticket and run row, not a read of the store per wake-up (which was 40 times one stream's).
  expect(many.statements).toBeLessThan(alone.statements * 2 + READERS * 4);

  // A stream that joins a live run from the start once the feed has moved past it (more than the
  // 2 MiB it keeps) reads the store on its own, then joins the others: every stream gets it all.
  const live = await submit(`yes "$(printf '%099d' 3)" | head -c 5000000; sleep 2; for i in $(seq 1 20); do echo "after $i"; sleep 0.02; done`);
  const leader = readStream(live.id);
  await waitForRun(t.api, live.id, (r) => r.log_bytes >= 5_000_000);
  const [first, late] = await Promise.all([leader, readStream(live.id)]);
  const liveLog = (await t.api.get(`/v1/runs/${live.id}/logs`)).text;
  for (const stream of [first, late]) {
    const messages = parseSse(stream.text);
    expect(messages[messages.length - 1]).toMatchObject({ event: 'end', data: { status: 'succeeded' } });
    expect(logTextOf(messages) === liveLog).toBe(true);
  }
}, 120_000);
