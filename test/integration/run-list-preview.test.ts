import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t?.stop();
});

async function submit(body: Record<string, unknown>): Promise<any> {
  const { status, body: run } = await t.api.post('/v1/runs', body);
  expect(status).toBe(201);
  return run;
}

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value));
const KiB = 1024;

// 600 KB of command; 100 KB of extra vars in ten values (as much as a tool's environment takes).
const longCommand = `echo start\n# ${'x'.repeat(600_000)}\n`;
const largeVars = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`PART_${i}`, 'v'.repeat(10_000)]));

test('run lists carry a bounded preview of a huge command and extra vars, and the run itself carries them whole', async () => {
  const withCommand = await submit({ tool: 'bash', command: longCommand });
  const withVars = await submit({ tool: 'bash', command: 'echo vars', extra_vars: largeVars });
  const small = await submit({ tool: 'bash', command: 'echo small', extra_vars: { NAME: 'world' } });

  const list = await t.api.get('/v1/runs?limit=10');
  expect(list.status).toBe(200);
  expect(Buffer.byteLength(list.text)).toBeLessThan(24 * KiB);
  const row = (id: string) => list.body.runs.find((r: any) => r.id === id);

  expect(bytesOf(row(withCommand.id))).toBeLessThan(8 * KiB);
  expect(row(withCommand.id)).toMatchObject({
    command: longCommand.slice(0, 1000),
    command_truncated: true,
    extra_vars: {},
    extra_vars_truncated: false,
  });
  expect(bytesOf(row(withVars.id))).toBeLessThan(8 * KiB);
  expect(row(withVars.id)).toMatchObject({ command: 'echo vars', command_truncated: false, extra_vars: null, extra_vars_truncated: true });
  expect(row(small.id)).toMatchObject({ command: 'echo small', command_truncated: false, extra_vars: { NAME: 'world' }, extra_vars_truncated: false });

  const whole = await t.api.get(`/v1/runs/${withCommand.id}`);
  expect(whole.body.command === longCommand).toBe(true);
  expect(whole.body.command_truncated).toBe(false);
  const wholeVars = await t.api.get(`/v1/runs/${withVars.id}`);
  expect(wholeVars.body.extra_vars).toEqual(largeVars);
  expect(wholeVars.body.extra_vars_truncated).toBe(false);

  // The run in an event body is the preview too: the whole is one GET away and never changes.
  for (const run of [withCommand, withVars]) {
    await waitForRunEnd(t.api, run.id);
    const { body } = await t.api.get(`/v1/runs/${run.id}/events`);
    const withRun = body.events.filter((e: any) => e.run);
    expect(withRun.map((e: any) => e.event)).toEqual(['run.created', 'run.started', 'run.finished']);
    for (const event of withRun) {
      expect(bytesOf(event)).toBeLessThan(8 * KiB);
      expect(event.run.command_truncated || event.run.extra_vars_truncated).toBe(true);
    }
  }
}, 60_000);

test('a preview never cuts a character in half, and a command of exactly the preview length is whole', async () => {
  // The emoji's two UTF-16 halves sit at positions 999 and 1000: the cut falls before it.
  const straddling = await submit({ tool: 'bash', command: `${'a'.repeat(999)}😀${'b'.repeat(100)}` });
  const exact = await submit({ tool: 'bash', command: 'c'.repeat(1000) });
  const { body } = await t.api.get('/v1/runs?limit=10');
  const row = (id: string) => body.runs.find((r: any) => r.id === id);
  expect(row(straddling.id)).toMatchObject({ command: 'a'.repeat(999), command_truncated: true });
  expect(row(exact.id)).toMatchObject({ command: 'c'.repeat(1000), command_truncated: false });
});

test('the shards of a split are listed as previews', async () => {
  const split = await submit({ tool: 'bash', command: longCommand, shards: 3 });
  const { status, body } = await t.api.get(`/v1/runs/${split.id}/shards`);
  expect(status).toBe(200);
  expect(body.shards).toHaveLength(3);
  for (const shard of body.shards) {
    expect(bytesOf(shard)).toBeLessThan(8 * KiB);
    expect(shard).toMatchObject({ command_truncated: true, command: longCommand.slice(0, 1000) });
  }
  expect((await t.api.get(`/v1/runs/${body.shards[0].id}`)).body.command === longCommand).toBe(true);
});
