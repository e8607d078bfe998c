import { Runtime } from '@temporalio/worker';
import { setFlagsFromString } from 'node:v8';
import type { LogLevel, LogMetadata } from '@temporalio/common';
import type { Logger } from 'pino';

let installed = false;

/**
 * The young generation of each workflow thread's heap, in MiB per semi-space. A workflow
 * activation allocates little and briefly, so V8's default (up to 16 MiB a semi-space, kept once
 * grown) only holds memory: with 1 MiB an idle `cairn serve`, whose three Temporal workers each run
 * workflows in a thread of their own, rests about 15 MiB lower with glibc's malloc defaults and 15
 * to 30 MiB lower with the image's (docs/operations.md, Memory).
 */
const WORKFLOW_SEMI_SPACE_MB = 1;

/**
 * Sizes the young generation of the heaps of threads started from now on: V8 reads the flag when
 * it makes a heap, so the main thread's heap, made at start, keeps its own.
 */
export function sizeWorkflowHeaps(): void {
  setFlagsFromString(`--max-semi-space-size=${WORKFLOW_SEMI_SPACE_MB}`);
}

/**
 * Sets up Temporal's process-wide runtime, once, before the first worker: sizes the workflow
 * threads' heaps ({@link sizeWorkflowHeaps}), and sends the SDK's own log lines into the server's
 * pino log; its routine INFO lines (worker state changes) become debug so an operator's info log
 * stays about Cairn.
 */
export function installTemporalRuntime(logger: Logger): void {
  if (installed) return;
  installed = true;
  sizeWorkflowHeaps();
  const sdk = logger.child({ component: 'temporal-sdk' });
  const emit = (level: LogLevel, message: string, meta?: LogMetadata) => {
    const fields = meta ?? {};
    switch (level) {
      case 'ERROR':
        return sdk.error(fields, message);
      case 'WARN':
        return sdk.warn(fields, message);
      case 'TRACE':
        return sdk.trace(fields, message);
      default:
        return sdk.debug(fields, message);
    }
  };
  Runtime.install({
    // The SDK's native core prints to the console unless its lines are forwarded to this logger.
    telemetryOptions: { logging: { filter: { core: 'WARN', other: 'WARN' }, forward: {} } },
    logger: {
      log: emit,
      trace: (m, meta) => emit('TRACE', m, meta),
      debug: (m, meta) => emit('DEBUG', m, meta),
      info: (m, meta) => emit('INFO', m, meta),
      warn: (m, meta) => emit('WARN', m, meta),
      error: (m, meta) => emit('ERROR', m, meta),
    },
  });
}
