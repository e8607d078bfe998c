import { proxyActivities, sleep } from '@temporalio/workflow';
import type { FederationActivities } from '../activities/federation';
import type { KeyRotationWorkflowInput } from './definitions';

/**
 * A normal key rotation's two timed steps (spec part A 3.4): the new key signs once the overlap
 * has passed since it was published, and the old key leaves the key set once as long again has
 * passed. Each step is recorded at the workflow's own time and does nothing when an emergency
 * rotation has removed its keys meanwhile.
 */
export async function keyRotationWorkflow(input: KeyRotationWorkflowInput): Promise<void> {
  const { activateRotatedKey, removeRetiredKey } = proxyActivities<FederationActivities>({
    startToCloseTimeout: '1m',
    retry: { initialInterval: '1s', maximumInterval: '1m' },
  });
  const overlapMs = input.overlapSeconds * 1000;
  const untilActivation = input.publishedAt + overlapMs - Date.now();
  if (untilActivation > 0) await sleep(untilActivation);
  const activatedAt = Date.now();
  await activateRotatedKey(input.newKeyId, input.oldKeyId, activatedAt);
  await sleep(overlapMs);
  await removeRetiredKey(input.oldKeyId, Date.now());
}
