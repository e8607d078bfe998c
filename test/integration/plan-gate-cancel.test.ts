import { randomBytes } from 'node:crypto';
import { Client } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { ExecutionOutcome } from '../../core/runs/run-outcome';
import { workflowBundle } from '../../workers/bundle';
import { RUN_WORKFLOW, type RunWorkflowInput } from '../../workflows/definitions';
import { testTemporalAddress } from '../support/server';

// The run workflow (the real workflow code, on a real Temporal dev server) when a cancel reaches it
// as the execution that held the run at its plan gate is still finishing: the execution answers
// `held` to a workflow already canceled. Which of the two Temporal delivers first is not Cairn's to
// choose, so the executing worker here answers in the order that once lost the run's end: it asks
// for the cancel, then returns `held`. The workflow must still record the run's end as canceled.

test('a cancel that arrives as the plan gate holds a run still records the run canceled', async () => {
  const connection = await NativeConnection.connect({ address: testTemporalAddress() });
  const client = new Client({ connection });
  const taskQueue = `plan-gate-cancel-${randomBytes(4).toString('hex')}`;
  const runId = `run_${randomBytes(8).toString('hex')}`;
  const recorded: ExecutionOutcome[] = [];
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities: {
      // The executing worker: it holds the run at the plan gate while its workflow is canceled.
      async executeRun(): Promise<'held'> {
        await client.workflow.getHandle(runId).cancel();
        return 'held';
      },
      async finishRun(_runId: string, outcome: ExecutionOutcome): Promise<void> {
        recorded.push(outcome);
      },
      async runStatus(): Promise<string> {
        return recorded.length ? 'canceled' : 'held';
      },
    },
  });
  try {
    await worker.runUntil(async () => {
      const input: RunWorkflowInput = { runId, timeoutSeconds: 0, leaseSeconds: 30, executionQueue: taskQueue };
      const handle = await client.workflow.start(RUN_WORKFLOW, { taskQueue, workflowId: runId, args: [input] });
      // The workflow records the end and completes; before the fix it ended canceled with none recorded.
      await expect(handle.result()).resolves.toBeUndefined();
    });
  } finally {
    await connection.close();
  }
  expect(recorded).toEqual([{ kind: 'canceled' }]);
}, 60_000);
