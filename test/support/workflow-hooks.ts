// Not exported from the package's index, so reached by path: a release that moves it fails the type check.
import { globalHandlers } from '@temporalio/worker/lib/workflow/vm-shared';

/**
 * Takes out the promise hook the Temporal SDK installs for workflow stack traces, where workflow
 * code runs on the test's own thread (ServerHarness.workflowsOnMainThread, the replayer).
 *
 * In a worker thread of its own (production) that hook sees only workflow code. On the main thread
 * it runs for every promise the jest worker makes, the server's and the test's: each call builds a
 * function to find the promise's workflow (a fresh `Function(...)`), some 2.5 µs a promise against
 * 0.1 without it. The SDK never removes it in this mode, and each test file loads the SDK afresh,
 * so every file left one more hook behind in its jest worker, slowing every later file's promises.
 * (Each hook also reaches its file's module graph, but something else still holds that graph: a
 * worker's heap grows about 50 MB a file with the hooks taken out too; see jest.config.js.)
 *
 * Without it, a workflow's stack trace query has no promise chains to show; no test asks for one.
 * The SDK installs it again when a later worker is made in the same file, so this is called after
 * every start.
 */
export function removeWorkflowPromiseHooks(): void {
  globalHandlers.uninstall();
}
