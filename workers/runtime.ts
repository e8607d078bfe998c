import { Runtime } from '@temporalio/worker';
import type { LogLevel, LogMetadata } from '@temporalio/common';
import type { Logger } from 'pino';

let installed = false;

/**
 * Sends the Temporal SDK's own log lines into the server's pino log. The SDK's routine INFO lines
 * (worker state changes) become debug so an operator's info log stays about Cairn. The runtime is
 * process-wide and can be installed once, before the first worker.
 */
export function installTemporalLogging(logger: Logger): void {
  if (installed) return;
  installed = true;
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
