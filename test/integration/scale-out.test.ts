import os from 'node:os';
import { Connection, Client } from '@temporalio/client';
import { createTestDatabase } from '../support/database';
import { apiClient, type ApiClient } from '../support/http';
import { testLicense } from '../support/license';
import { startCairn, startTsScript, type ChildHandle } from '../support/processes';
import { testSettings, testTemporalAddress } from '../support/server';
import { soakSize } from '../support/soak';
import { tempDir } from '../support/temp';
import { runExecutions } from '../support/run-executions';

// The scale-out shape (docs/architecture.md "Processes"): several `cairn serve` and `cairn worker`
// processes on one PostgreSQL and one Temporal namespace and task queue.

// 200 runs under CAIRN_SOAK=1; the smoke size still spreads over both workers.
const RUNS = soakSize(40, 200);

test(`two servers and two workers on one database and Temporal run ${RUNS} runs, each exactly once, spread over both workers`, async () => {
  const database = await createTestDatabase();
  const shared = testSettings(database.url, { CAIRN_LOG_LEVEL: 'info' });
  const env = (extra: Record<string, string>) => ({ ...process.env, ...shared, CAIRN_DATA_DIR: tempDir('cairn-scale-out'), ...extra });
  const children: ChildHandle[] = [];
  try {
    // The servers execute one run at a time on their own pool worker, so the workers carry the load.
    const first = startCairn(['serve'], env({ CAIRN_POOL_SIZE: '1' }));
    children.push(first);
    const [, token] = await first.waitFor(/admin token: (\S+)/);
    // The schema and the first admin are in place: the other three start together.
    const second = startCairn(['serve'], env({ CAIRN_POOL_SIZE: '1' }));
    // Every worker is Team tier (spec part A 1.2): these trust the test's license key.
    const license = await testLicense('team');
    const worker = () => startTsScript('test/support/worker-process.ts', [JSON.stringify(license.publicJwk)], env({ CAIRN_POOL_SIZE: '8', CAIRN_LICENSE_FILE: license.file }));
    const workers = [worker(), worker()];
    children.push(second, ...workers);
    const [[, url1], [, url2]] = await Promise.all([first.waitFor(/serving at (\S+)/), second.waitFor(/serving at (\S+)/), ...workers.map((w) => w.waitFor(/worker polling/))]);
    expect(second.output()).not.toMatch(/admin token:/);

    const apis: ApiClient[] = [apiClient(url1, token), apiClient(url2, token)];
    // Half the runs through each server, 20 submissions in flight.
    const ids: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        while (next < RUNS) {
          const i = next++;
          const { status, body } = await apis[i % 2].post('/v1/runs', { tool: 'bash', command: `echo run ${i}` });
          if (status !== 201) throw new Error(`submit ${i}: ${status} ${JSON.stringify(body)}`);
          ids.push(body.id);
        }
      }),
    );

    // Every run ends succeeded, read through either server.
    const deadline = Date.now() + 180_000;
    for (;;) {
      const { body } = await apis[1].get('/v1/runs?status=succeeded&limit=1');
      if (body.total === RUNS) break;
      const failed = (await apis[0].get('/v1/runs?status=failed&limit=5')).body;
      if (failed.total > 0) throw new Error(`runs failed: ${JSON.stringify(failed.runs)}`);
      if (Date.now() > deadline) throw new Error(`only ${body.total} of ${RUNS} runs succeeded within 180 s`);
      await new Promise((r) => setTimeout(r, 250));
    }

    // Executed exactly once: one attempt, one start and one end in the record, the tool's output once.
    const connection = await Connection.connect({ address: testTemporalAddress() });
    const temporal = new Client({ connection });
    const executedBy = new Map<string, number>();
    try {
      let n = 0;
      await Promise.all(
        Array.from({ length: 10 }, async () => {
          while (n < ids.length) {
            const id = ids[n++];
            const run = (await apis[n % 2].get(`/v1/runs/${id}`)).body;
            expect(run).toMatchObject({ status: 'succeeded', attempts: 1 });
            const events = (await apis[0].get(`/v1/runs/${id}/events?limit=1000`)).body.events.map((e: any) => e.event);
            expect(events.filter((k: string) => k === 'run.started')).toHaveLength(1);
            expect(events.filter((k: string) => k === 'run.finished')).toHaveLength(1);
            expect(events).not.toContain('run.requeued');
            const log = (await apis[1].get(`/v1/runs/${id}/logs`)).text;
            expect(log).toMatch(/^run \d+\n$/);
            // Which process executed the tool: the identity (`<pid>@<host>`) Temporal records on the
            // activity's start; the run record keeps only the host (exec_host), the same for all four here.
            const { startedBy } = await runExecutions(temporal, id);
            expect(startedBy).toHaveLength(1);
            const by = startedBy[0];
            executedBy.set(by, (executedBy.get(by) ?? 0) + 1);
          }
        }),
      );
    } finally {
      await connection.close();
    }
    const counted = [...executedBy.values()].reduce((a, b) => a + b, 0);
    expect(counted).toBe(RUNS);
    const perWorker = workers.map((w) => executedBy.get(`${w.child.pid}@${os.hostname()}`) ?? 0);
    // Both workers took a real share of the load.
    for (const share of perWorker) expect(share).toBeGreaterThanOrEqual(RUNS / 10);
    process.stdout.write(`scale-out: executions by process ${JSON.stringify(Object.fromEntries(executedBy))}; workers ${perWorker.join(' / ')}\n`);
  } finally {
    for (const child of children.reverse()) await child.stop();
    await database.drop();
  }
}, 300_000);
