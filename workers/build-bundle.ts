/**
 * Bundles the workflow code into the cache ahead of the first start, for installs whose directory
 * is read-only at run time (a container image):
 *
 *   node bin/run-ts.js workers/build-bundle.ts
 */
import { buildWorkflowBundle } from './bundle';

buildWorkflowBundle({ info: (line) => process.stdout.write(`${line}\n`), warn: (line) => process.stderr.write(`${line}\n`) }).then(
  (file) => process.stdout.write(`workflow bundle: ${file}\n`),
  (err) => {
    process.stderr.write(`could not bundle the workflow code: ${(err as Error).message}\n`);
    process.exit(1);
  },
);
