import type postgres from 'postgres';
import { expectStatus, type BenchClient } from './http';
import { sleep } from './stats';

const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'interrupted', 'rejected']);

export interface RunBody {
  id: string;
  status: string;
  error: string | null;
  exit_code: number | null;
}

/** Submits the trivial run every benchmark uses. */
export async function submitTrue(client: BenchClient): Promise<RunBody> {
  return expectStatus(await client.request<RunBody>('POST', '/v1/runs', { tool: 'bash', command: 'true' }), 201, 'POST /v1/runs');
}

/** Polls GET /v1/runs/{id} every `intervalMs` until it has ended; a non-success end is an error. */
export async function waitSucceeded(client: BenchClient, id: string, intervalMs: number, timeoutMs = 30_000): Promise<RunBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = expectStatus(await client.request<RunBody>('GET', `/v1/runs/${id}`), 200, `GET /v1/runs/${id}`);
    if (run.status === 'succeeded') return run;
    if (TERMINAL.has(run.status)) throw new Error(`run ${id} ended ${run.status} (exit ${run.exit_code}): ${run.error}`);
    if (Date.now() > deadline) throw new Error(`run ${id} did not end within ${timeoutMs} ms; still ${run.status}`);
    await sleep(intervalMs);
  }
}

/** How many runs the list endpoint reports with this status (its `total`). */
export async function countWithStatus(client: BenchClient, status: string): Promise<number> {
  const body = expectStatus(
    await client.request<{ total: number }>('GET', `/v1/runs?status=${status}&limit=1`),
    200,
    `GET /v1/runs?status=${status}`,
  );
  return body.total;
}

/**
 * Waits until the runs named (every run of the install when none are) have ended, read from the
 * database so that finding the end costs the servers nothing; fails, naming `what` and how many
 * had not ended, once `timeoutMs` have passed since `since` (epoch ms).
 */
export async function untilRunsEnded(sql: postgres.Sql, what: string, options: { ids?: string[]; since: number; timeoutMs: number }): Promise<void> {
  const { ids, since, timeoutMs } = options;
  for (;;) {
    const [{ open }] = await sql<{ open: number }[]>`
      SELECT count(*)::int AS open FROM runs WHERE finished_at IS NULL ${ids ? sql`AND id IN ${sql(ids)}` : sql``}`;
    if (open === 0) return;
    if (Date.now() - since > timeoutMs) throw new Error(`${what}: ${open} ${ids ? `of ${ids.length} ` : ''}runs had not ended after ${timeoutMs / 1000} s`);
    await sleep(200);
  }
}
