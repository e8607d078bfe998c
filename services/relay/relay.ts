import { ActivityCancelledError, ActivityNotFoundError } from '@temporalio/client';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { DomainError } from '../../core/errors';
import { featureRefusal, tierAllows } from '../../core/access/license';
import type { ExecutionOutcome } from '../../core/runs/run-outcome';
import { sha256 } from '../../core/sha256';
import { loadJose } from '../../core/jose';
import type { Run } from '../../core/runs/run';
import { appendEvent } from '../../store/events';
import { appendLog } from '../../store/logs';
import { getRun } from '../../store/runs';
import { MAX_RESULT_HOSTS, MAX_RESULT_TASKS, resultsWanted, type ResultsWanted, type AnsibleResults, type HostResult, type TaskResult } from '../../core/ansible/ansible-results';
import { storeGatheredFacts, type FactsDocument } from '../ansible/facts';
import { storeAnsibleResults } from '../ansible/host-results';
import {
  dropRelayReports,
  reportedHosts,
  stagedRelayReports,
  stageRelayReports,
  deleteRelayLease,
  leaseByCapability,
  recordRelayWorkerContact,
  renewRelayLease,
  takeWaitingLease,
  type RelayLease,
} from '../../store/relay';
import { executionTaskQueue } from '../../workflows/ids';
import type { ServerContext } from '../context';
import { recordRunEnd } from '../runs/run-lifecycle';
import { JobRefused, runJob } from '../jobs';
import { prepareExecution, type PreparedExecution } from '../runs/run-preparation';
import { isPlanTool } from '../../tools/iac';
import { relayIacInputs, settleIacAttempt, startIacAttempt } from './relay-plans';

/** Items one report call may carry (spec part B 8: a few thousand). */
export const MAX_REPORT_ITEMS = 2000;
/** The longest a claim waits for a run before answering that none waits. */
export const MAX_CLAIM_WAIT_SECONDS = 30;
/**
 * The longest a waiting claim sleeps between looks. It is woken sooner when an attempt of its
 * queue is recorded (a NOTIFY); the limit covers a notification lost while the server's listening
 * connection was re-established.
 */
const CLAIM_LOOK_AGAIN_MS = 2000;

/** A relay worker as it describes itself on each call; untrusted, used only for the fleet view and the run's exec host. */
export interface RelayWorker {
  id: string;
  queue: string;
  host: string;
  pid: number;
  version: string;
}

/** Whether the presented bearer matches one of the configured worker tokens (kept as SHA-256 digests). */
export function workerTokenMatches(hashes: readonly Buffer[], presented: string): boolean {
  const digest = sha256(presented);
  let found = false;
  for (const hash of hashes) if (hash.length === digest.length && timingSafeEqual(hash, digest)) found = true;
  return found;
}

async function noteContact(server: ServerContext, worker: RelayWorker): Promise<void> {
  await recordRelayWorkerContact(server.sql, {
    ...worker,
    task_queue: executionTaskQueue(server.config.poolQueue, worker.queue),
    renew_seconds: server.config.leaseSeconds / 3,
  });
}

/** Every relay worker is Team (spec part A 1.2), checked at each claim so a lapsed license stops new work. */
function requireTeam(server: ServerContext): void {
  if (!tierAllows(server.licensing.tier, 'named_queue')) throw new DomainError('forbidden', featureRefusal('worker', server.licensing.tier));
}

export interface Claimed {
  run_id: string;
  /** The per-claim capability: shown once, kept only as its SHA-256. */
  capability: string;
  attempt: number;
  lease_seconds: number;
  heartbeat_seconds: number;
}

/**
 * Leases the oldest attempt of the worker's queue waiting for a relay worker, waiting up to
 * `waitSeconds` for one (woken when one is recorded). The attempt is checked alive with Temporal
 * first (a heartbeat): one Temporal no longer knows is dropped, one asked to cancel is reported
 * canceled, and the next is taken. Undefined when none came in time or the caller hung up
 * (`hungUp`).
 */
export async function claimRun(server: ServerContext, worker: RelayWorker, waitSeconds: number, hungUp: AbortSignal): Promise<Claimed | undefined> {
  requireTeam(server);
  if (!worker.queue) throw new DomainError('invalid', 'a relay worker serves a named queue: send worker.queue', { field: 'worker.queue' });
  const relay = server.relay!;
  await relay.serveQueue(worker.queue);
  const deadline = Date.now() + waitSeconds * 1000;
  let contacted = 0;
  for (;;) {
    if (Date.now() - contacted >= (server.config.leaseSeconds * 1000) / 3) {
      await noteContact(server, worker);
      contacted = Date.now();
    }
    // Waiting from before the look, so an attempt recorded while it looks still wakes it.
    const looked = new AbortController();
    const woken = relay.waitForDispatch(worker.queue, Math.min(CLAIM_LOOK_AGAIN_MS, Math.max(0, deadline - Date.now())), AbortSignal.any([looked.signal, hungUp]));
    const capability = `cairn_cap_${randomBytes(32).toString('base64url')}`;
    const lease = await takeWaitingLease(server.sql, worker.queue, worker.id, sha256(capability));
    if (lease) {
      looked.abort();
      if (await attemptAlive(server, lease, { worker: worker.id, host: worker.host })) {
        return {
          run_id: lease.run_id,
          capability,
          attempt: lease.attempt,
          lease_seconds: server.config.leaseSeconds,
          heartbeat_seconds: server.config.leaseSeconds / 3,
        };
      }
      continue;
    }
    if (Date.now() >= deadline || hungUp.aborted) {
      looked.abort();
      return undefined;
    }
    await woken;
    // A worker that hung up meanwhile takes nothing: its lease would only lapse.
    if (hungUp.aborted) return undefined;
  }
}

/**
 * Heartbeats the attempt's activity. False when it is over: Temporal no longer knows it (its row
 * dropped) or it was asked to cancel before any worker started it (reported canceled, so the
 * workflow records the cancel).
 */
export async function attemptAlive(server: ServerContext, lease: RelayLease, details: Record<string, unknown>): Promise<boolean> {
  try {
    await server.temporal.activity.heartbeat(lease.task_token, details);
    return true;
  } catch (err) {
    if (err instanceof ActivityCancelledError) {
      await server.temporal.activity.reportCancellation(lease.task_token).catch(() => undefined);
    } else if (!(err instanceof ActivityNotFoundError)) {
      throw err;
    }
    await deleteRelayLease(server.sql, lease.run_id, lease.attempt);
    return false;
  }
}

/**
 * The lease a capability holds on the run: 403 when it holds none (forged, another run's, or
 * stale: its attempt was lost and requeued, so the lost holder writes nothing any more).
 */
export async function heldLease(server: ServerContext, runId: string | undefined, capability: string | undefined): Promise<RelayLease> {
  const lease = capability ? await leaseByCapability(server.sql, sha256(capability)) : undefined;
  if (!lease || (runId !== undefined && lease.run_id !== runId)) {
    throw new DomainError('forbidden', 'the Cairn-Capability header does not hold a lease on this run (unknown, another run\'s, or its lease was lost)');
  }
  return lease;
}

/**
 * Renews the lease: the attempt's activity heartbeat. `cancel` when the run was asked to stop
 * (a cancel, its timeout): the worker stops its tool and reports the end. 409 when the attempt is
 * gone (its lease was lost): the worker stops its tool and reports nothing.
 */
export async function renewLease(server: ServerContext, lease: RelayLease, worker: RelayWorker): Promise<'continue' | 'cancel'> {
  await noteContact(server, worker);
  try {
    await server.temporal.activity.heartbeat(lease.task_token, { host: worker.host, worker: worker.id });
  } catch (err) {
    if (err instanceof ActivityCancelledError) return 'cancel';
    if (err instanceof ActivityNotFoundError) {
      await deleteRelayLease(server.sql, lease.run_id, lease.attempt);
      throw new DomainError('conflict', 'this attempt is over: its lease was lost and the run requeued; stop its tool', { lease: 'lost' });
    }
    throw err;
  }
  await renewRelayLease(server.sql, lease.run_id, lease.attempt);
  return 'continue';
}

/** The execution as it travels: text files as they are, byte files (a saved plan) base64 in `binary_files`. */
type Execution = Omit<PreparedExecution, 'kind' | 'run' | 'previous' | 'files'> & { files: Record<string, string>; binary_files?: Record<string, string> };

function wireFiles(files: PreparedExecution['files']): Pick<Execution, 'files' | 'binary_files'> {
  const text: Record<string, string> = {};
  const binary: Record<string, string> = {};
  for (const [name, content] of Object.entries(files)) {
    if (typeof content === 'string') text[name] = content;
    else binary[name] = content.toString('base64');
  }
  return { files: text, ...(Object.keys(binary).length && { binary_files: binary }) };
}

export type StartAnswer =
  | { state: 'ended'; status: string | null }
  | ({ state: 'running'; run: Run; attempt: number; work_dir: string; preface?: string; results: ResultsWanted; iac?: { tool: string; phase: 'plan' | 'apply'; digest?: string } } & (
      | { execution: Execution }
      | { execution_sealed: string }
    ));

/** The worker's delivery key, checked before anything moves: a 400 naming `delivery_key` when it is no ECDH-ES public key. */
async function importDeliveryKey(deliveryKey: Record<string, unknown>): Promise<CryptoKey | Uint8Array> {
  const jose = await loadJose();
  try {
    return (await jose.importJWK(deliveryKey as never, 'ECDH-ES')) as CryptoKey | Uint8Array;
  } catch (err) {
    throw new DomainError('invalid', `delivery_key is not a public key for ECDH-ES (P-256, P-384, P-521 or X25519): ${(err as Error).message}`, { field: 'delivery_key' });
  }
}

/**
 * The execution (argv, environment, files: the run's opened secrets and credentials among them)
 * sealed to the worker's delivery key as a compact JWE (ECDH-ES, A256GCM): only the holder of the
 * private half opens it, whatever carries or logs the answer on the way.
 */
async function sealExecution(execution: Execution, key: CryptoKey | Uint8Array): Promise<string> {
  const jose = await loadJose();
  return new jose.CompactEncrypt(new TextEncoder().encode(JSON.stringify(execution))).setProtectedHeader({ alg: 'ECDH-ES', enc: 'A256GCM' }).encrypt(key);
}

/**
 * Fences the held run from pending (or a lost attempt's running) to running, and answers what its
 * tool needs: the argv, environment, files (credential files among them) and the values to mask,
 * resolved here so the worker holds no key. An end found now is recorded and the attempt completed.
 */
export async function startRun(server: ServerContext, lease: RelayLease, worker: RelayWorker, workRoot: string, deliveryKey?: Record<string, unknown>): Promise<StartAnswer> {
  const sealTo = deliveryKey && (await importDeliveryKey(deliveryKey));
  const prepared = await prepareExecution(
    server.sql,
    { sealer: server.sealer, federationIssuer: server.config.federationIssuer, executionInputs: (run) => relayIacInputs(server, run) },
    lease.run_id,
    worker.host,
    (run) => `${workRoot.replace(/\/+$/, '')}/${lease.run_id}-${run.attempts}`,
  );
  if (prepared.kind === 'ready') {
    const { kind: _kind, run, previous, files, ...rest } = prepared;
    const iac = await startIacAttempt(server, lease, run);
    const execution: Execution = { ...rest, ...wireFiles(files) };
    const prefaces = [
      previous.status === 'running' ? `\n[cairn] the worker running this run was lost; running it again (attempt ${run.attempts})\n` : '',
      iac?.phase === 'apply' ? `[cairn] applying the saved plan ${iac.digest} that was approved (${run.hold!.plan!.summary})\n` : '',
    ].join('');
    return {
      state: 'running',
      run,
      attempt: run.attempts,
      work_dir: `${workRoot.replace(/\/+$/, '')}/${lease.run_id}-${run.attempts}`,
      ...(sealTo ? { execution_sealed: await sealExecution(execution, sealTo) } : { execution }),
      results: resultsWanted(run),
      preface: prefaces || undefined,
      ...(iac && { iac }),
    };
  }
  if (prepared.kind === 'ended') await endAttempt(server, lease, prepared.outcome);
  else await completeAttempt(server, lease);
  return { state: 'ended', status: (await getRun(server.sql, lease.run_id))?.status ?? null };
}

/** The worker's end report: the run's end recorded once, then the attempt's activity completed (or reported canceled). */
export async function endAttempt(server: ServerContext, lease: RelayLease, reported: ExecutionOutcome | { kind: 'gated' }): Promise<Run | undefined> {
  const run = await getRun(server.sql, lease.run_id);
  if (reported.kind === 'canceled' || run?.cancel_requested_at) {
    // The workflow records a canceled or timed-out end itself, as for a pool worker's cancellation.
    await server.temporal.activity.reportCancellation(lease.task_token).catch(ignoreGone);
    await deleteRelayLease(server.sql, lease.run_id, lease.attempt);
    return getRun(server.sql, lease.run_id);
  }
  // A plan tool's end is settled with its plan gate's decision: held, refused, applied.
  const outcome = run && isPlanTool(run.tool) ? await settleIacAttempt(server, run, lease, reported) : reported;
  if (outcome === 'held') {
    await dropRelayReports(server.sql, lease.run_id);
    await completeAttempt(server, lease, 'held');
    return getRun(server.sql, lease.run_id);
  }
  if (outcome.kind === 'gated') throw new DomainError('invalid', 'outcome.kind gated is the end of a terraform or opentofu run held or refused at its plan gate', { field: 'outcome.kind' });
  let final: ExecutionOutcome = outcome;
  if (run && run.tool === 'ansible' && outcome.kind === 'exited') final = await storeReportedResults(server, run, lease, outcome);
  await dropRelayReports(server.sql, lease.run_id);
  const ended = await recordRunEnd(server.sql, lease.run_id, final);
  if (ended) server.metrics.runsFinished.inc({ status: ended.status, tool: ended.tool });
  await completeAttempt(server, lease);
  return ended ?? getRun(server.sql, lease.run_id);
}

/** Completes the attempt's activity: with `held` when the run waits at its plan gate (the workflow then waits for the decision). */
async function completeAttempt(server: ServerContext, lease: RelayLease, result?: 'held'): Promise<void> {
  await server.temporal.activity.complete(lease.task_token, result).catch(ignoreGone);
  await deleteRelayLease(server.sql, lease.run_id, lease.attempt);
}

function ignoreGone(err: unknown): void {
  if (!(err instanceof ActivityNotFoundError)) throw err;
}

/**
 * The held run's project tree at its commit, as a tar archive: made by a job on the pool (the
 * server itself runs no git), from the project's cache there. Undefined for a run without a project.
 */
export async function projectArchive(server: ServerContext, lease: RelayLease): Promise<Buffer | undefined> {
  const run = await getRun(server.sql, lease.run_id);
  const project = run?.spec.project;
  if (!project) return undefined;
  try {
    return Buffer.from(await runJob(server, 'projectArchiveJob', { projectId: project.id, commit: project.commit }), 'base64');
  } catch (err) {
    if (err instanceof JobRefused) throw new DomainError('conflict', `the project's tree at ${project.commit} could not be read: ${err.message}`);
    throw err;
  }
}

/** A host's summary as a worker reports it (core/ansible/ansible-results.ts HostResult). */
export type ReportedHost = HostResult;
/** A task's summary as a worker reports it: its times as RFC 3339 text. */
export type ReportedTask = Omit<TaskResult, 'started_at' | 'finished_at'> & { started_at: string | null; finished_at: string | null };

export async function reportHosts(server: ServerContext, lease: RelayLease, hosts: ReportedHost[], ended: boolean): Promise<void> {
  await stageRelayReports(server.sql, lease.run_id, lease.attempt, 'host', hosts);
  // Marks that results were reported at all (an empty results file is still results), and whether the playbook reached its end.
  await stageRelayReports(server.sql, lease.run_id, lease.attempt, 'ended', [ended]);
}

export async function reportTasks(server: ServerContext, lease: RelayLease, tasks: ReportedTask[]): Promise<void> {
  await stageRelayReports(server.sql, lease.run_id, lease.attempt, 'task', tasks);
}

/** Facts gathered per host: only for hosts the attempt has already reported results for (a 400 naming the first other). */
export async function reportFacts(server: ServerContext, lease: RelayLease, facts: FactsDocument[], supplied: Record<string, string>): Promise<void> {
  const known = await reportedHosts(server.sql, lease.run_id, lease.attempt, facts.map((f) => f.host));
  const index = facts.findIndex((f) => !known.has(f.host));
  if (index >= 0) throw new DomainError('invalid', `facts for host ${JSON.stringify(facts[index].host)}, which this run has reported no result for (send host-summary first)`, { field: `facts[${index}].host` });
  await stageRelayReports(server.sql, lease.run_id, lease.attempt, 'facts', facts);
  if (Object.keys(supplied).length) await stageRelayReports(server.sql, lease.run_id, lease.attempt, 'supplied', [supplied]);
}

/** The attempt's reported results and facts, stored as the pool stores them at an ansible run's exit. */
async function storeReportedResults(server: ServerContext, run: Run, lease: RelayLease, outcome: Extract<ExecutionOutcome, { kind: 'exited' }>): Promise<ExecutionOutcome> {
  const { sql } = server;
  const hosts = await stagedRelayReports<ReportedHost>(sql, run.id, lease.attempt, 'host');
  const tasks = await stagedRelayReports<ReportedTask>(sql, run.id, lease.attempt, 'task');
  const marks = await stagedRelayReports<boolean>(sql, run.id, lease.attempt, 'ended');
  if (run.spec.fact_cache && run.spec.inventory_id) {
    const facts = await stagedRelayReports<FactsDocument>(sql, run.id, lease.attempt, 'facts');
    const supplied = Object.assign({}, ...(await stagedRelayReports<Record<string, string>>(sql, run.id, lease.attempt, 'supplied'))) as Record<string, string>;
    if (facts.length) await storeGatheredFacts(sql, run, facts, supplied);
  }
  // No host-summary call: the run left no results (as a pool run without its results file).
  if (!marks.length) return outcome;
  const ended = marks.some(Boolean);
  const time = (value: string | null) => (value ? new Date(value) : null);
  const results: AnsibleResults = {
    hosts: hosts.slice(0, MAX_RESULT_HOSTS),
    tasks: tasks.slice(0, MAX_RESULT_TASKS).map((t) => ({ ...t, started_at: time(t.started_at), finished_at: time(t.finished_at) })),
    ended,
  };
  return storeAnsibleResults(sql, run, results, outcome);
}

/** Appends captured output (already masked by the worker) to the held run's log. */
export async function appendRelayLog(server: ServerContext, lease: RelayLease, data: Buffer): Promise<void> {
  if (data.length) await appendLog(server.sql, lease.run_id, data);
}

/** Appends the worker's structured events; their kinds are the worker's own (`worker.*`), so none can pose as a lifecycle event. */
export async function appendRelayEvents(server: ServerContext, lease: RelayLease, events: { kind: string; body: Record<string, unknown> }[]): Promise<void> {
  for (const event of events) await appendEvent(server.sql, lease.run_id, event.kind, { ...event.body, attempt: lease.attempt });
}
