import type { ApiClient } from './http';
import type { Receiver } from './receivers';

/** The body of an answer with the expected status; any other status fails with the answer's text. */
export async function ok(res: { status: number; text: string; body: any }, status = 201): Promise<any> {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`);
  return res.body;
}

/** Before each test: the receiver forgets what it was sent and answers 200 again. */
export function freshReceiverEachTest(receiver: () => Receiver): void {
  beforeEach(() => {
    receiver().received.length = 0;
    receiver().answer(() => ({ status: 200 }));
  });
}

/** Waits until at least `count` deliveries of the run exist and every one has finished (arrived, failed or skipped). */
export async function settledDeliveries(api: ApiClient, runId: string, count: number, timeoutMs = 30_000): Promise<any[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const told = (await api.get(`/v1/runs/${runId}/notifications`)).body;
    const deliveries = told?.events?.flatMap((e: any) => e.deliveries) ?? [];
    if (deliveries.length >= count && deliveries.every((d: any) => ['arrived', 'failed', 'skipped'].includes(d.status))) return deliveries;
    if (Date.now() > deadline) throw new Error(`deliveries of ${runId} did not settle: ${JSON.stringify(told)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
