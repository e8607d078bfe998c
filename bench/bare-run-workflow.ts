// The floor under a Cairn run on Temporal (bench/temporal-cost.ts): a bare workflow whose one
// activity spawns `bash -c true`, with no Cairn code, database or HTTP on the way.
import { proxyActivities } from '@temporalio/workflow';

const { spawnTrue } = proxyActivities<{ spawnTrue(): Promise<number> }>({ startToCloseTimeout: '1m' });

export async function bareRunWorkflow(): Promise<void> {
  await spawnTrue();
}
