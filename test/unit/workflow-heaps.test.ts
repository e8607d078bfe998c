import { Worker } from 'node:worker_threads';
import { sizeWorkflowHeaps } from '../../workers/runtime';

/** The committed size of a new thread's young generation after it has made a few MiB of short-lived garbage. */
function youngGenerationOfNewThread(): Promise<number> {
  const code = `
    const v8 = require('node:v8');
    let kept = [];
    for (let i = 0; i < 200000; i++) {
      kept.push({ i, text: 'garbage ' + i });
      if (kept.length > 5000) kept = [];
    }
    require('node:worker_threads').parentPort.postMessage(v8.getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size);`;
  return new Promise((resolve, reject) => {
    const thread = new Worker(code, { eval: true });
    thread.once('message', (size: number) => void thread.terminate().then(() => resolve(size)));
    thread.once('error', reject);
  });
}

test('threads started after the workflow heaps are sized keep a young generation of 1 MiB semi-spaces while they churn', async () => {
  sizeWorkflowHeaps();
  // Two semi-spaces of 1 MiB; V8's default lets the same churn grow it to 8 MiB or more.
  expect(await youngGenerationOfNewThread()).toBeLessThanOrEqual(2 * 2 ** 20);
});
