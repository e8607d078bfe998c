import { LOG_ENCODING } from '../../core/logs/log-codec';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

/** The log text a stream of the whole run carries, read to its end. */
async function streamedLog(runId: string): Promise<string> {
  const ticket = (await t.api.post(`/v1/runs/${runId}/stream-ticket`)).body.ticket;
  const text = await (await fetch(`${t.url}/v1/runs/${runId}/stream?ticket=${ticket}`)).text();
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('event: log\n'))
    .map((block) => JSON.parse(block.slice(block.indexOf('data: ') + 6)).text as string)
    .join('');
}

test('a log whose first chunks were stored raw before schema 043 and the rest compressed reads back whole, in tails, streams and evidence', async () => {
  // About 700 kB of lines, some with multi-byte characters: three compressed chunks as stored now.
  const run = (await t.api.post('/v1/runs', { tool: 'bash', command: `for i in $(seq 1 7000); do echo "line $i café € 😀 ${'x'.repeat(70)}"; done` })).body;
  await waitForRunEnd(t.api, run.id, 60_000);
  const original = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  const bytes = Buffer.from(original);
  expect(bytes.length).toBeGreaterThan(600_000);

  const sql = t.server.context.sql;
  const stored = await sql<{ encoding: number; compression: string | null; size: number; start: number }[]>`
    SELECT encoding, pg_column_compression(data) AS compression, octet_length(data) AS size, start_offset AS start
    FROM run_log_chunks WHERE run_id = ${run.id} ORDER BY start_offset`;
  // Compressed by Cairn and not again by PostgreSQL, and far smaller than the output.
  expect(stored.filter((c) => c.encoding === LOG_ENCODING.deflateRaw).length).toBeGreaterThanOrEqual(2);
  expect(stored.every((c) => c.compression === null)).toBe(true);
  expect(stored.reduce((n, c) => n + Number(c.size), 0)).toBeLessThan(bytes.length / 5);

  // The chunks before the first seam past 100,003 bytes become what a server before schema 043
  // stored: raw rows of odd sizes (one cut mid-character) with no encoding named, in a column
  // PostgreSQL compresses. (How the output was cut into chunks depends on how fast it came.)
  const seam = stored.find((c) => Number(c.start) > 100_003)!;
  const firstEnd = Number(seam.start);
  const cuts = [0, 1001, 100_003, firstEnd];
  await sql.begin(async (tx) => {
    await tx`ALTER TABLE run_log_chunks ALTER COLUMN data SET STORAGE EXTENDED`;
    await tx`DELETE FROM run_log_chunks WHERE run_id = ${run.id} AND start_offset < ${firstEnd}`;
    for (let i = 0; i + 1 < cuts.length; i++) {
      await tx`INSERT INTO run_log_chunks (run_id, start_offset, data) VALUES (${run.id}, ${cuts[i]}, ${bytes.subarray(cuts[i], cuts[i + 1])})`;
    }
    await tx`ALTER TABLE run_log_chunks ALTER COLUMN data SET STORAGE EXTERNAL`;
  });
  const mixed = await sql<{ encoding: number; compression: string | null }[]>`
    SELECT encoding, pg_column_compression(data) AS compression FROM run_log_chunks WHERE run_id = ${run.id} ORDER BY start_offset`;
  expect(mixed.slice(0, 3).map((c) => c.encoding)).toEqual([LOG_ENCODING.raw, LOG_ENCODING.raw, LOG_ENCODING.raw]);
  expect(mixed[1].compression).toBe('pglz');
  expect(mixed[3].encoding).toBe(seam.encoding);
  expect(mixed.slice(3).some((c) => c.encoding === LOG_ENCODING.deflateRaw)).toBe(true);

  // The whole log, and tails that start inside old raw chunks, at the seam and inside compressed ones.
  expect((await t.api.get(`/v1/runs/${run.id}/logs`)).text === original).toBe(true);
  for (const from of [1, 1000, 1001, 1002, 99_999, firstEnd - 1, firstEnd, firstEnd + 1, firstEnd + 300_000, bytes.length - 5]) {
    const tail = await t.api.get(`/v1/runs/${run.id}/logs?tail=${bytes.length - from}`);
    expect(tail.headers.get('service-log-omitted-bytes')).toBe(String(from));
    expect(Buffer.from(await (await fetch(`${t.url}/v1/runs/${run.id}/logs?tail=${bytes.length - from}`, { headers: { authorization: `Bearer ${t.adminToken}` } })).arrayBuffer()).equals(bytes.subarray(from))).toBe(true);
  }
  expect(await streamedLog(run.id)).toBe(original);
  const evidence = (await t.api.get(`/v1/runs/${run.id}/evidence?format=json`)).body;
  expect(evidence.log === original).toBe(true);

  // The events export is untouched: NDJSON lines, one per event.
  const exported = await fetch(`${t.url}/v1/runs/${run.id}/events?download=1`, { headers: { authorization: `Bearer ${t.adminToken}` } });
  expect(exported.headers.get('content-type')).toMatch(/ndjson/);
  expect((await exported.text()).trim().split('\n').map((line) => JSON.parse(line).event)).toEqual(['run.created', 'run.started', 'run.finished']);
}, 120_000);

test('output with secrets is masked before it is compressed, and a short line is stored as it was written', async () => {
  const run = (await t.api.post('/v1/runs', { tool: 'bash', command: `echo "password=hunter2hunter2"; echo short` })).body;
  await waitForRunEnd(t.api, run.id);
  const log = (await t.api.get(`/v1/runs/${run.id}/logs`)).text;
  expect(log).not.toContain('hunter2hunter2');
  expect(log).toContain('short\n');
  const rows = await t.server.context.sql<{ data: Buffer }[]>`SELECT data FROM run_log_chunks WHERE run_id = ${run.id}`;
  expect(Buffer.concat(rows.map((r) => r.data)).toString('latin1')).not.toContain('hunter2');
});
