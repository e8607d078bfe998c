import type { ConnectionLike } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { msToTs } from '@temporalio/common/lib/time';
import type { Logger } from 'pino';
import { SEARCH_ATTRIBUTES } from '../workflows/definitions';

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

/** temporal.api.enums.v1.IndexedValueType: INDEXED_VALUE_TYPE_KEYWORD. */
const INDEXED_TYPES = { KEYWORD: 2 } as const;

/**
 * Registers Cairn's custom search attributes (workflows/definitions.ts SEARCH_ATTRIBUTES) on the
 * namespace through the operator service, at every start: the same call works on the embedded dev
 * server, a self-hosted cluster and the test suite's server (the dev server's `--search-attribute`
 * flag would cover only the first). Only the missing ones are added; one already there, or added by
 * another process starting at the same moment, is fine. A cluster that refuses the call (no
 * operator rights, or its visibility store takes no custom attributes) is logged, not fatal: runs
 * work the same, only the Temporal UI cannot find them by Cairn's attributes.
 */
export async function ensureSearchAttributes(connection: ConnectionLike, namespace: string, logger: Logger): Promise<boolean> {
  const wanted = Object.values(SEARCH_ATTRIBUTES);
  try {
    const listed = await connection.operatorService.listSearchAttributes({ namespace });
    const missing = wanted.filter((key) => !(key.name in (listed.customAttributes ?? {})));
    if (missing.length === 0) return true;
    logger.info({ namespace, search_attributes: missing.map((key) => key.name) }, 'registering Cairn search attributes on the Temporal namespace');
    try {
      await connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map((key) => [key.name, INDEXED_TYPES[key.type]])),
      });
    } catch (err) {
      if ((err as { code?: number }).code !== ALREADY_EXISTS) throw err;
    }
    return true;
  } catch (err) {
    logger.warn(
      { namespace, err: (err as Error).message },
      'could not register Cairn search attributes on the Temporal namespace; register them with `temporal operator search-attribute create` (docs/operations.md)',
    );
    return false;
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
