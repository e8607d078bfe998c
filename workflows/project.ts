import { condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { ProjectActivities } from '../activities/projects';
import { projectUpdateRequested, type ProjectUpdateWorkflowInput } from './definitions';

/**
 * One project's updates (spec part A 4.5): fetch its repository and record the commit (or the
 * error) as an activity on the pool, heartbeating while git runs, retried when a worker is lost or
 * the store fails (a git error is an outcome, recorded, not retried). A save asked for while one
 * runs (`projectUpdateRequested`) makes one more after it; the workflow then ends, and the next
 * save starts it again.
 */
export async function projectUpdateWorkflow(input: ProjectUpdateWorkflowInput): Promise<void> {
  const { updateProject } = proxyActivities<ProjectActivities>({
    // Several git commands, each within --git-timeout, plus recording.
    startToCloseTimeout: `${input.fetchTimeoutSeconds * 3 + 60}s`,
    heartbeatTimeout: '30s',
    retry: { initialInterval: '2s', maximumInterval: '1m', maximumAttempts: 10 },
  });
  let requested = true;
  setHandler(projectUpdateRequested, () => {
    requested = true;
  });
  while (requested) {
    requested = false;
    await updateProject(input.projectId);
    // Signals that came while the activity ran are handled before the loop checks again.
    await condition(() => true);
  }
}
