import type { ConnectionLike } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { msToTs } from '@temporalio/common/lib/time';
import type { Logger } from 'pino';

/** gRPC status codes Temporal answers with (google.rpc.Code). */
const NOT_FOUND = 5;
const ALREADY_EXISTS = 6;

/** Registers the namespace when the Temporal server lacks it, so a fresh cluster works on first start. */
export async function ensureNamespace(connection: ConnectionLike, namespace: string, logger: Logger): Promise<void> {
  try {
    await connection.workflowService.describeNamespace({ namespace });
    return;
  } catch (err) {
    if ((err as { code?: number }).code !== NOT_FOUND) throw err;
  }
  logger.info({ namespace }, 'registering the Temporal namespace');
  try {
    await connection.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: msToTs('7 days'),
    });
  } catch (err) {
    if ((err as { code?: number }).code !== ALREADY_EXISTS) throw err;
  }
  // A new namespace takes a moment to reach every Temporal service.
  for (let i = 0; i < 100; i++) {
    try {
      await connection.workflowService.describeNamespace({ namespace });
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * Connects to Temporal, waiting for a server that is still starting (a fresh dev server, or a
 * cluster coming up beside Cairn) to answer healthy. Gives up after the time given.
 */
export async function connectTemporal(address: string, logger: Logger, timeoutMs = 120_000): Promise<NativeConnection> {
  const deadline = Date.now() + timeoutMs;
  let lastWarning = 0;
  for (;;) {
    try {
      return await NativeConnection.connect({ address });
    } catch (err) {
      if (Date.now() > deadline) throw err;
      if (Date.now() - lastWarning > 10_000) {
        lastWarning = Date.now();
        logger.warn({ address, err: (err as Error).message }, 'Temporal is not answering yet; retrying');
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
