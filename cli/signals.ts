import type { Logger } from 'pino';

/**
 * A long-running command stops cleanly on SIGINT or SIGTERM: once, whichever comes first, exiting
 * 0 when its stop finished and 1 when it failed.
 */
export function stopOnSignal(logger: Logger, message: string, stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, message);
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
