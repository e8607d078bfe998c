import type { Client } from '@temporalio/client';
import type { ExtensionRegistry } from '../core/extensions';
import type { RegoEvaluator } from '../core/runs/policy-gate';
import type { Logger } from 'pino';
import type { AttentionSettings } from '../core/runs/attention';
import type { Config } from '../core/config';
import type { AiProvider } from '../core/ai/provider';
import type { ExecutionFacts } from '../core/runs/run-bound-settings';
import type { Sealer } from '../core/credentials/seal';
import type { Sql } from '../store/db';
import type { InstallIdentity } from './audit/install-identity';
import type { Licensing } from './access/licensing';
import type { Metrics } from './metrics';
import type { ChannelWakeups } from './channel-wakeups';

/** What request handlers, activities, the outbox dispatcher and the sweeper share: the stores, the Temporal client and settings. */
export interface ServerContext {
  config: Config;
  sql: Sql;
  /**
   * Set only on the context an import applies its plan through, whose `sql` is one open
   * transaction (services/imports.ts): the pool outside it, where a job's payloads are written,
   * since the worker that reads them cannot see what the transaction has not committed.
   */
  pool?: Sql;
  temporal: Client;
  logger: Logger;
  metrics: Metrics;
  /** Wakes live run streams when a run gets new events or log (NOTIFY on store/events.ts RUN_ACTIVITY_CHANNEL, keyed by run id). */
  hub: ChannelWakeups;
  faults: Faults;
  /** The install's id and signing key. */
  identity: InstallIdentity;
  /** The tier the install runs at, and the license that grants it. */
  licensing: Licensing;
  /**
   * Seals and opens secrets at rest (spec part B 5.3), built once at start from
   * SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT; undefined when neither is set.
   */
  sealer: Sealer | undefined;
  /** What this server's execution side found at start: sandboxing, the cgroups bounding runs, ansible-core (for the diagnostics check). */
  execution: ExecutionFacts;
  /** Attention alert thresholds: the defaults with --attention-file over them (services/attention-file.ts), read at start. */
  attention: AttentionSettings;
  /** Set when the server serves the worker relay (--worker-token): takes named queues' attempts for relay workers. */
  relay?: RelayDispatch;
  /** The wait before a failed notification delivery's first retry, doubled for each later one. */
  notificationRetryBaseMs: number;
  /** The notifiers and secret sources extensions registered (cli/plugins.ts); absent in tools that start no server. */
  extensions?: ExtensionRegistry;
  /** The policy file's policies, evaluated by Open Policy Agent (services/runs/policy-file.ts); absent without --policy-file. */
  regoPolicies?: RegoEvaluator;
  /** The advisory AI provider built at start from --ai-provider (services/ai/backends.ts); undefined when AI is off. */
  ai?: AiProvider;
}

/** What a server serving the relay provides beside the API: a Temporal worker taking a named queue's attempts (workers/relay-dispatch.ts). */
export interface RelayDispatch {
  /** Starts taking the named queue's execution attempts for relay workers, if this server does not yet. */
  serveQueue(queue: string): Promise<void>;
  /** Resolves when an attempt of the queue is recorded for relay workers (by any server), after `maxWaitMs`, or when the signal aborts. */
  waitForDispatch(queue: string, maxWaitMs: number, signal?: AbortSignal): Promise<void>;
}

/**
 * Faults a test arms through the in-process harness (test/support/server.ts); each fires once. A
 * server started from the command line has none armed, and nothing outside the process arms one.
 */
export class Faults {
  private readonly armed: Set<string>;
  constructor(names: Iterable<string> = []) {
    this.armed = new Set(names);
  }
  /** True the first time a fault named in the setting is reached. */
  fire(name: string): boolean {
    return this.armed.delete(name);
  }
}
