import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { BUNDLE_CACHE_DIR, buildWorkflowBundle, bundleInputs, workflowBundleDigest } from '../../workers/bundle';
import { ROOT } from '../support/processes';

test('workflow code is bundled once and the bundle on disk is reused by the next start', async () => {
  const first = await buildWorkflowBundle();
  expect(path.dirname(first)).toBe(BUNDLE_CACHE_DIR);
  expect(path.basename(first)).toBe(`${await workflowBundleDigest()}.js`);
  const written = statSync(first).mtimeMs;
  expect(await buildWorkflowBundle()).toBe(first);
  expect(statSync(first).mtimeMs).toBe(written);
});

test('the bundle is keyed by every source file it holds and the SDK version', async () => {
  const bundled = new Set(
    [...readFileSync(await buildWorkflowBundle(), 'utf8').matchAll(/"\.\/((?:[\w-]+\/)*[\w-]+\.ts)"/g)]
      .map(([, file]) => file)
      .filter((file) => !file.startsWith('node_modules/')),
  );
  expect([...bundled]).toEqual(expect.arrayContaining(['workflows/index.ts', 'workflows/run.ts', 'workflows/graph.ts', 'core/runs/workflow-graph.ts']));
  const { files, packages } = await bundleInputs();
  expect(files.map((f) => path.relative(ROOT, f))).toEqual(expect.arrayContaining([...bundled]));
  expect(packages).toEqual(expect.arrayContaining(['@temporalio/worker', '@temporalio/workflow']));
});
