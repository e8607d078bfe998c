import type { WorkflowClient } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import type { temporal } from '@temporalio/proto';
import { tsToMs } from '@temporalio/common/lib/time';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { installTemporalRuntime } from '../../workers/runtime';
import { DEV_SERVER_TUNING } from '../../embedded/temporal';
import { goBuildInto, isExecutable, onPath } from '../../embedded/temporal-binary';
import { machineCacheDir } from '../../embedded/machine-cache';
import { ensureSearchAttributes } from '../../cli/temporal-connection';

/**
 * A Temporal server that can skip time, for tests of long waits (a schedule over weeks, an
 * approval's 30 days) that finish in seconds.
 *
 * The SDK's own time-skipping server (`TestWorkflowEnvironment.createTimeSkipping`) is a Java
 * binary downloaded from GitHub at first use; embedded/temporal-dev is instead a small Go program
 * on Temporal Server 1.32 (SQLite, one process, the same `server start-dev` flags as the CLI) with
 * the server's own time skipping turned on. It is built from its Go module once per machine, into
 * the machine's cache (embedded/machine-cache.ts) under a hash of its sources, so a changed main.go
 * or go.mod builds again and every checkout of the same sources finds the one build.
 *
 * Time skipping is per workflow: turned on for one execution (`enableTimeSkipping`), the server
 * moves that workflow's clock straight to its next timer whenever the workflow is idle (no
 * workflow task, activity or child in flight), and its continued-as-new runs and children inherit
 * it. Workflow code sees the skipped clock (`Date.now()` in a workflow); activities, PostgreSQL
 * and everything else keep the real one, so a wait an activity measures against its own clock
 * (a notification retry's due time, activities/notify.ts) is not skipped.
 */

const PROJECT_ROOT = path.resolve(__dirname, '../..');
export const TIME_SKIPPING_SOURCE_DIR = path.join(PROJECT_ROOT, 'embedded', 'temporal-dev');
const SOURCES = ['main.go', 'go.mod', 'go.sum'];

/** The cached build's path for the sources as they are now. */
export async function timeSkippingServerPath(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of SOURCES) hash.update(`${file}\0`).update(await fs.readFile(path.join(TIME_SKIPPING_SOURCE_DIR, file))).update('\0');
  // Beside the Temporal CLI's build (embedded/temporal-binary.ts).
  return path.join(machineCacheDir(), 'temporal-dev', hash.digest('hex').slice(0, 16), 'cairn-temporal-dev');
}

/**
 * The time-skipping server binary: CAIRN_TEMPORAL_DEV when set, else the cached build, else a
 * fresh `go build` (a few minutes the first time on a machine; Go modules come from the module proxy).
 */
export async function findTimeSkippingServer(log: (line: string) => void = () => {}): Promise<string> {
  const fromEnv = process.env.CAIRN_TEMPORAL_DEV;
  if (fromEnv) {
    if (await isExecutable(fromEnv)) return fromEnv;
    throw new Error(`CAIRN_TEMPORAL_DEV is set to ${fromEnv}, which is not an executable file`);
  }
  const target = await timeSkippingServerPath();
  if (await isExecutable(target)) return target;
  const go = (await onPath('go')) ?? ((await isExecutable('/usr/local/go/bin/go')) ? '/usr/local/go/bin/go' : undefined);
  if (!go) throw new Error('the time-skipping Temporal server needs the Go toolchain to build embedded/temporal-dev (or set CAIRN_TEMPORAL_DEV)');
  log(`building the time-skipping Temporal server (embedded/temporal-dev) into ${path.dirname(target)} (first use only; takes a few minutes)`);
  const started = Date.now();
  // VCS stamping would read the work tree's git state, which a build of test tooling has no use for.
  const env = { ...process.env, GOFLAGS: `${process.env.GOFLAGS ?? ''} -buildvcs=false`.trim() };
  await goBuildInto(go, TIME_SKIPPING_SOURCE_DIR, '.', target, env);
  log(`built the time-skipping Temporal server in ${Math.round((Date.now() - started) / 1000)} s`);
  return target;
}

/**
 * The dev server's low-latency values, and no lead for new timer tasks. The server schedules a
 * new timer task at least `history.timerProcessorMaxTimeShift` (1 s by default) ahead, a margin for
 * clocks of several hosts, so every skip waited a second: 60 skips took 60 s. With 0 they take
 * under a second (about 10 ms each); small non-zero values (1 ms to 300 ms) were slower or stalled.
 */
const TIME_SKIPPING_TUNING = [...DEV_SERVER_TUNING, 'history.timerProcessorMaxTimeShift=0s'];

export interface TimeSkippingTemporal {
  /** host:port, for TEMPORAL_ADDRESS. */
  address: string;
  client: WorkflowClient;
  teardown(): Promise<void>;
}

/**
 * Starts the time-skipping server through the SDK's launcher (as global-setup starts the CLI) and
 * answers its address and a client. One per test file: its SQLite database lives in memory and goes with it.
 */
export async function startTimeSkippingTemporal(): Promise<TimeSkippingTemporal> {
  const executable = await findTimeSkippingServer((line) => process.stderr.write(`${line}\n`));
  // The SDK's runtime is one per process and created by its first user: install Cairn's (as
  // `serve` does, which then finds it installed) before the launcher below would create a default one.
  installTemporalRuntime(pino({ level: process.env.CAIRN_TEST_LOG_LEVEL ?? 'silent' }));
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: executable },
      ip: '127.0.0.1',
      log: { level: 'error', format: 'json' },
      extraArgs: TIME_SKIPPING_TUNING.flatMap((value) => ['--dynamic-config-value', value]),
    },
  });
  await ensureSearchAttributes(env.connection, env.namespace ?? 'default', pino({ level: 'silent' }));
  return { address: env.address, client: env.client.workflow, teardown: () => env.teardown() };
}

/** How a workflow skips time. */
export interface TimeSkipping {
  /** Skips (one per timer jumped to) before the server stops skipping; the server's default is 200. */
  maxSkips?: number;
}

/** The start option that turns time skipping on for a workflow a test starts itself (client.start(..., { ...options, ...withTimeSkipping() })). */
export function withTimeSkipping(skipping: TimeSkipping = {}): Record<symbol, unknown> {
  return { [Symbol.for('__temporal_internal_client_workflow_start_options')]: { timeSkippingConfig: timeSkippingConfig(skipping) } };
}

function timeSkippingConfig({ maxSkips = 100_000 }: TimeSkipping): temporal.api.common.v1.ITimeSkippingConfig {
  return { enabled: true, maxSessionSkipCount: maxSkips };
}

/**
 * Turns time skipping on for a workflow already started (by Cairn itself, as a real server
 * starts schedules and runs), its current run and the runs it continues as.
 */
export async function enableTimeSkipping(client: WorkflowClient, workflowId: string, skipping: TimeSkipping = {}): Promise<void> {
  await client.workflowService.updateWorkflowExecutionOptions({
    namespace: client.options.namespace,
    workflowExecution: { workflowId },
    workflowExecutionOptions: { timeSkippingConfig: timeSkippingConfig(skipping) },
    updateMask: { paths: ['time_skipping_config'] },
  });
}

/** The workflow's clock as the server keeps it (skipped time included); undefined while it has never skipped. */
export async function workflowNow(client: WorkflowClient, workflowId: string): Promise<Date | undefined> {
  const res = await client.workflowService.describeWorkflowExecution({ namespace: client.options.namespace, execution: { workflowId } });
  const current = res.workflowExtendedInfo?.timeSkippingInfo?.currentTime;
  return current ? new Date(tsToMs(current)) : undefined;
}
