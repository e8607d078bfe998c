// The floor under a Cairn run on Temporal (bench/temporal-cost.ts): a bare workflow whose one
// activity starts `bash -c true` (straight from the worker, or in a run's sandbox through a tool
// launcher, as the batch's worker was given), with no Cairn code, database or HTTP on the way.
import { proxyActivities } from '@temporalio/workflow';

const { startTrue } = proxyActivities<{ startTrue(): Promise<unknown> }>({ startToCloseTimeout: '1m' });

export async function bareRunWorkflow(): Promise<void> {
  await startTrue();
}
