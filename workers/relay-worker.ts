import os from 'node:os';
import type { Logger } from 'pino';
import { newId } from '../core/ids';
import type { ExecutionOutcome } from '../core/runs/run-outcome';
import { LauncherStopped, ToolLauncher } from '../runtime/launcher';
import { jobSandbox, type RunIsolationSettings } from '../runtime/sandbox-setup';
import { executeTool, PROJECT_COPY_TIMEOUT_MS } from '../runtime/tool-execution';
import { extractArchive } from '../runtime/git';
import { readToolResults, type ToolResults } from '../activities/run-results';
import type { ResultsWanted } from '../core/ansible/ansible-results';
import { GitError } from '../core/project-paths';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { createHash, createPrivateKey, createPublicKey } from 'node:crypto';
import { loadJose } from '../core/jose';
import { RELAY_PLAN_FILE_BYTES, RELAY_PLAN_JSON_BYTES } from '../core/iac/plan';
import { IAC_BINARIES, IacBinaryUnavailable } from '../embedded/iac-binaries';
import { iacSite, IacSiteError } from '../runtime/iac';
import type { SandboxBind } from '../runtime/sandbox';
import type { AttemptTail } from '../runtime/tool-execution';
import { readWorkFile } from '../runtime/work-dir';
import { IAC_APPLY_ARGV, iacSiteInvocation, PLAN_FILE, PLAN_JSON_FILE } from '../tools/iac';

/** This worker's release, as it reports it to the fleet view. */
export const RELAY_WORKER_VERSION = '0.1.0';

export interface RelayWorkerOptions {
  /** The server's base URL (https, or http on loopback or with --allow-insecure-relay). */
  serverUrl: string;
  /** The worker token the server was started with (--worker-token). */
  token: string;
  queue: string;
  /** Runs executed at once (--pool-size). */
  slots: number;
  /** The same sandbox and bounds as the pool (--run-isolation, --run-network, --run-user, the run bounds, --data-dir). */
  isolation: RunIsolationSettings;
  logger: Logger;
  /**
   * A PEM private key (EC P-256/P-384/P-521 or X25519) the worker registers the public half of at
   * each start: the run's execution is then answered sealed to it, and only this worker opens it.
   */
  deliveryKeyFile?: string;
  /** How long a claim waits on the server for a run (seconds); shorter in tests. */
  claimWaitSeconds?: number;
}

export class RelayCallError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
    path: string,
  ) {
    super(`${path} answered ${status}: ${typeof body === 'object' && body && 'error' in body ? String((body as { error: unknown }).error) : ''}`);
  }
}

/** Items a report call carries at most (spec part B 8: a few thousand). */
const REPORT_BATCH = 2000;
/** Output one log call carries at most: 512 KiB is about 683 KiB of base64, under the relay's 1 MiB body bound. */
const LOG_CALL_BYTES = 512 * 1024;
/** The JSON a facts call carries at most, under the relay's 8 MiB bound for it. */
const FACTS_CALL_BYTES = 6 * 1024 * 1024;

interface Claimed {
  run_id: string;
  capability: string;
  attempt: number;
  lease_seconds: number;
  heartbeat_seconds: number;
}

interface Started {
  state: 'running' | 'ended';
  run: { id: string; template_id: string | null; dry_run: boolean };
  attempt: number;
  work_dir: string;
  preface?: string;
  results: ResultsWanted;
  /** A terraform or opentofu run: its tool and phase (plan, or apply the approved plan in binary_files). */
  iac?: { tool: 'terraform' | 'opentofu'; phase: 'plan' | 'apply'; digest?: string };
  execution: {
    binary: string;
    argv: string[];
    env: Record<string, string>;
    files: Record<string, string>;
    /** Byte files (a saved plan), base64. */
    binary_files?: Record<string, string>;
    maskValues: string[];
    project?: { id: string; commit: string };
  };
}

/** The answer to a plan report (services/relay/relay-plans.ts PlanAnswer). */
interface PlanAnswer {
  decision: 'apply' | 'hold' | 'recorded' | 'refused';
  digest: string;
  notes: string[];
}

/** How an attempt stopped where its plan gate said (held for approval, or refused): the server records which. */
const GATED = { kind: 'gated' } as const;
type AttemptEnd = ExecutionOutcome | typeof GATED;

/**
 * An outbound worker of the relay (`cairn worker --server URL --worker-token T --queue Q`): no
 * database, no Temporal, only HTTPS calls to a server's /relay/v1. Each of its slots claims a run
 * of its queue by long poll, fences it to running, runs its tool exactly as the pool does
 * (runtime/tool-execution.ts: the same work dir, sandbox, launcher, bounds and masker), streams
 * its masked output, renews its lease by heartbeat (the answer `cancel` stops the tool) and
 * reports its end. A lease it finds lost (403 or 409) stops the tool and reports nothing: the run
 * has been requeued and another attempt owns it.
 */
export async function startRelayWorker(options: RelayWorkerOptions): Promise<{ id: string; stop(): Promise<void> }> {
  const { logger } = options;
  const site = await jobSandbox(options.isolation, (line) => logger.info(line));
  const launcher = new ToolLauncher(site.sandbox);
  const worker = { id: newId('wrk'), queue: options.queue, host: os.hostname(), pid: process.pid, version: RELAY_WORKER_VERSION };
  const base = options.serverUrl.replace(/\/+$/, '');
  const delivery = options.deliveryKeyFile ? await loadDeliveryKey(options.deliveryKeyFile) : undefined;
  const stopping = new AbortController();
  const executions = new Set<AbortController>();

  async function call<T>(method: string, path: string, body?: unknown, capability?: string): Promise<T | undefined> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${options.token}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...(capability && { 'cairn-capability': capability }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: path === '/relay/v1/claim' ? stopping.signal : undefined,
    });
    if (response.status === 204) return undefined;
    const text = await response.text();
    const parsed = text ? (JSON.parse(text) as unknown) : undefined;
    if (!response.ok) throw new RelayCallError(response.status, parsed, path);
    return parsed as T;
  }

  /** Waits, or less when the worker is stopping. */
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        stopping.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      stopping.signal.addEventListener('abort', done);
    });

  /** Per-host and per-task results, then facts, each in calls of at most MAX_REPORT_ITEMS items (and facts of at most a few MiB). */
  async function sendResults(runPath: string, capability: string, read: ToolResults): Promise<void> {
    const { results, facts } = read;
    if (results) {
      const hosts = results.hosts;
      for (let i = 0; i === 0 || i < hosts.length; i += REPORT_BATCH) {
        const last = i + REPORT_BATCH >= hosts.length;
        await call('POST', `${runPath}/host-summary`, { hosts: hosts.slice(i, i + REPORT_BATCH), ended: last && results.ended }, capability);
      }
      for (let i = 0; i < results.tasks.length; i += REPORT_BATCH) {
        const tasks = results.tasks.slice(i, i + REPORT_BATCH).map((t) => ({ ...t, started_at: t.started_at?.toISOString() ?? null, finished_at: t.finished_at?.toISOString() ?? null }));
        await call('POST', `${runPath}/task-summary`, { tasks }, capability);
      }
    }
    if (facts && facts.documents.length) {
      let batch: typeof facts.documents = [];
      let bytes = 0;
      const flush = async (supplied: Record<string, string>) => {
        if (batch.length) await call('POST', `${runPath}/host-facts`, { facts: batch, supplied }, capability);
        batch = [];
        bytes = 0;
      };
      let first = true;
      for (const document of facts.documents) {
        const size = JSON.stringify(document).length;
        // One host's facts too large for a call even alone are sent by size only, as facts too large to keep.
        const item = size > FACTS_CALL_BYTES ? { host: document.host, size: document.size } : document;
        if (batch.length >= REPORT_BATCH || bytes + Math.min(size, FACTS_CALL_BYTES) > FACTS_CALL_BYTES) {
          await flush(first ? facts.supplied : {});
          first = false;
        }
        batch.push(item);
        bytes += Math.min(size, FACTS_CALL_BYTES);
      }
      await flush(first ? facts.supplied : {});
    }
  }

  /**
   * Sends the plan phase's saved plan and its JSON to the server (propose-apply, or drift-plan for a
   * dry run) and writes what the gate said into the log: `apply` the plan now (the server passed
   * exactly this digest), `stop` where the gate held or refused it, or `go on` (a dry run's plan
   * recorded, or none to send: the server then fails the run naming why).
   */
  async function reportPlan(runPath: string, capability: string, dryRun: boolean, workDir: string, tail: AttemptTail): Promise<'apply' | 'stop' | 'go on' | ExecutionOutcome> {
    const plan = await readWorkFile(workDir, PLAN_FILE, RELAY_PLAN_FILE_BYTES);
    if (!plan) return 'go on';
    if (plan.size > RELAY_PLAN_FILE_BYTES) {
      tail.note(`the saved plan is ${plan.size} bytes, more than a relay worker hands over (${RELAY_PLAN_FILE_BYTES}); nothing was applied`);
      return 'go on';
    }
    const json = await readWorkFile(workDir, PLAN_JSON_FILE, RELAY_PLAN_JSON_BYTES);
    const inline = json && json.size <= RELAY_PLAN_JSON_BYTES ? json.bytes.toString('utf8') : null;
    let answer: PlanAnswer | undefined;
    try {
      answer = await call<PlanAnswer>(
        'POST',
        `${runPath}/${dryRun ? 'drift-plan' : 'propose-apply'}`,
        { plan: plan.bytes.toString('base64'), plan_json: inline, ...(json && inline === null && { plan_json_bytes: json.size }) },
        capability,
      );
    } catch (err) {
      // A lost lease ends the attempt unreported; a refused report is said in the log and the run fails at its end.
      if (err instanceof RelayCallError && err.status !== 403 && err.status !== 409 && err.status < 500) {
        tail.note(`the plan could not be handed over: ${err.message}`);
        return 'go on';
      }
      throw err;
    }
    for (const line of answer!.notes) tail.note(line);
    if (answer!.decision === 'apply') {
      const digest = `sha256:${createHash('sha256').update(plan.bytes).digest('hex')}`;
      if (digest !== answer!.digest) return { kind: 'spawn_failed', message: `the plan gate passed ${answer!.digest}, not this attempt's plan ${digest}; nothing was applied` };
      return 'apply';
    }
    return answer!.decision === 'recorded' ? 'go on' : 'stop';
  }

  async function execute(claimed: Claimed): Promise<void> {
    const { run_id: runId, capability } = claimed;
    const runPath = `/relay/v1/runs/${runId}`;
    const answer = await call<Started & { execution_sealed?: string }>(
      'POST',
      `${runPath}/start`,
      { worker, work_root: site.workRoot, ...(delivery && { delivery_key: delivery.publicJwk }) },
      capability,
    );
    if (!answer || answer.state !== 'running') return;
    const started: Started = answer.execution_sealed ? { ...answer, execution: await delivery!.open(answer.execution_sealed) } : answer;
    const { binary_files: binaryFiles, ...execution } = started.execution;
    let files: Record<string, string | Buffer> = { ...execution.files };
    for (const [name, base64] of Object.entries(binaryFiles ?? {})) files[name] = Buffer.from(base64, 'base64');
    const cancel = new AbortController();
    executions.add(cancel);
    let lost = false;
    let beating: Promise<void> | undefined;
    // A cancel reaches the tool on the next heartbeat: every second at most, as on the pool.
    const heartbeat = setInterval(() => {
      if (beating) return;
      beating = call<{ action: string }>('POST', '/relay/v1/heartbeat', { run_id: runId, worker }, capability)
        .then((answer) => {
          if (answer?.action === 'cancel') cancel.abort();
        })
        .catch((err) => {
          if (err instanceof RelayCallError && (err.status === 403 || err.status === 409)) {
            lost = true;
            cancel.abort();
          } else {
            logger.warn({ runId, err: (err as Error).message }, 'renewing the lease failed; trying again');
          }
        })
        .finally(() => (beating = undefined));
    }, Math.min(1000, claimed.heartbeat_seconds * 1000));
    let outcome: AttemptEnd;
    /** Bytes at the start of the log batch being retried that were stored already. */
    let logSent = 0;
    try {
      // This worker's own site for a terraform or opentofu run: the binary (built on first use,
      // under the heartbeat), the state it keeps for the template, its provider mirror.
      let env = execution.env;
      let binds: SandboxBind[] = [];
      let unavailable: string | undefined;
      if (started.iac) {
        try {
          const where = await iacSite(site, IAC_BINARIES[started.iac.tool], started.run, (line) => logger.info({ runId }, line));
          const overlay = iacSiteInvocation(where);
          env = { ...env, ...overlay.env };
          files = { ...files, ...overlay.files };
          binds = where.binds;
        } catch (err) {
          if (!(err instanceof IacBinaryUnavailable || err instanceof IacSiteError)) throw err;
          unavailable = err.message.slice(0, 2000);
        }
      }
      outcome = unavailable !== undefined ? { kind: 'spawn_failed', message: unavailable } : await executeTool<AttemptEnd>(
            site,
            launcher,
            { runId, attempt: started.attempt, workDir: started.work_dir, ...execution, env, files, binds, preface: started.preface },
            {
              // The project's tree comes through the relay as a tar archive, unpacked as the pool unpacks a commit.
              placeProject: execution.project && (async (workDir) => {
                const response = await fetch(`${base}${runPath}`, { headers: { authorization: `Bearer ${options.token}`, 'cairn-capability': capability, accept: 'application/x-tar' } });
                if (!response.ok) throw new GitError(`the project's tree could not be fetched through the relay (${response.status}): ${(await response.text()).slice(0, 500)}`);
                const archive = path.join(site.workRoot, `${runId}-${started.attempt}.tar`);
                await fs.writeFile(archive, Buffer.from(await response.arrayBuffer()), { mode: 0o644 });
                try {
                  await extractArchive(site, archive, workDir, PROJECT_COPY_TIMEOUT_MS);
                } finally {
                  await fs.rm(archive, { force: true });
                }
              }),
              // A fast tool's batches grow past what one log call carries (1 MiB of JSON, base64): sent in
              // slices. A failed slice fails the batch, which the sink hands again with more after it;
              // the slices already stored are skipped then, so no output is stored twice.
              storeLog: async (data) => {
                let offset = logSent;
                try {
                  while (offset < data.length) {
                    const end = Math.min(offset + LOG_CALL_BYTES, data.length);
                    await call('POST', `${runPath}/log`, { data: data.subarray(offset, end).toString('base64') }, capability);
                    offset = end;
                  }
                  logSent = 0;
                } catch (err) {
                  logSent = offset;
                  throw err;
                }
              },
              onLogError: (err) => logger.warn({ runId, err: (err as Error).message }, 'sending run output failed; will retry'),
              cancelSignal: cancel.signal,
              afterExit: async (workDir, exited, tail) => {
                if (cancel.signal.aborted) return { kind: 'canceled' };
                // A plan phase's plan goes to the server's plan gate (or, a dry run's, to its drift record).
                if (started.iac?.phase === 'plan' && exited.kind === 'exited' && exited.exitCode === 0) {
                  const gated = await reportPlan(runPath, capability, started.run.dry_run, workDir, tail);
                  if (gated === 'apply') {
                    const applied = await tail.launchAgain(IAC_APPLY_ARGV);
                    return cancel.signal.aborted ? { kind: 'canceled' } : applied;
                  }
                  return gated === 'stop' ? GATED : gated === 'go on' ? exited : gated;
                }
                // An ansible run's results and facts are read now, before its work dir goes, and sent in bounded batches.
                await sendResults(runPath, capability, await readToolResults(started.results, workDir, exited));
                return exited;
              },
            },
          );
    } finally {
      clearInterval(heartbeat);
      await beating;
      executions.delete(cancel);
    }
    if (lost || stopping.signal.aborted) {
      logger.warn({ runId }, 'the lease on this run was lost; its end is not reported');
      return;
    }
    // The end is reported however long the server refuses; a lost lease ends the trying.
    for (let wait = 250; ; wait = Math.min(wait * 2, 5000)) {
      try {
        const reportable = outcome.kind === 'gated'
          ? outcome
          : outcome.kind === 'exited'
          ? { kind: 'exited', exit_code: outcome.exitCode, signal: outcome.signal }
          : outcome.kind === 'bound_exceeded'
            ? { kind: 'bound_exceeded', exit_code: outcome.exitCode, bound: outcome.bound, flag: outcome.flag, limit: outcome.limit }
            : outcome.kind === 'spawn_failed'
              ? outcome
              : { kind: 'canceled' };
        await call('POST', `${runPath}/save`, { outcome: reportable }, capability);
        return;
      } catch (err) {
        if (err instanceof RelayCallError && err.status >= 400 && err.status < 500) {
          logger.error({ runId, err: err.message }, "the run's end was refused");
          return;
        }
        logger.warn({ runId, err: (err as Error).message }, "reporting the run's end failed; trying again");
        await pause(wait);
      }
    }
  }

  async function slot(): Promise<void> {
    while (!stopping.signal.aborted) {
      let claimed: Claimed | undefined;
      try {
        claimed = await call<Claimed>('POST', '/relay/v1/claim', { worker, wait_seconds: options.claimWaitSeconds ?? 20 });
      } catch (err) {
        if (stopping.signal.aborted) return;
        // A refused token or license will not mend itself within the second: say so plainly and wait longer.
        const refused = err instanceof RelayCallError && (err.status === 401 || err.status === 403);
        if (refused) logger.error({ err: (err as Error).message }, 'the server refused this worker; trying again in 10 s');
        else logger.warn({ err: (err as Error).message }, 'claiming a run failed; trying again');
        await pause(refused ? 10_000 : 1000);
        continue;
      }
      if (!claimed) continue;
      try {
        await execute(claimed);
      } catch (err) {
        if (err instanceof LauncherStopped) return;
        logger.error({ runId: claimed.run_id, err: (err as Error).message }, 'executing the run failed; its lease will lapse and it will be requeued');
      }
    }
  }

  const slots = Array.from({ length: options.slots }, () => slot());
  logger.info({ queue: options.queue, server: base, workerId: worker.id }, 'relay worker polling');
  return {
    id: worker.id,
    async stop() {
      stopping.abort();
      // Runs still executing are stopped unreported: their leases lapse and they are requeued elsewhere.
      for (const execution of executions) execution.abort();
      await Promise.allSettled(slots);
      await launcher.stop();
    },
  };
}

/** The worker's delivery key: its public half as a JWK to register, and the opener of what is sealed to it. */
async function loadDeliveryKey(file: string): Promise<{ publicJwk: Record<string, unknown>; open(sealed: string): Promise<Started['execution']> }> {
  const privateKey = createPrivateKey(await fs.readFile(file));
  const publicJwk = createPublicKey(privateKey).export({ format: 'jwk' }) as Record<string, unknown>;
  return {
    publicJwk,
    async open(sealed) {
      const jose = await loadJose();
      const { plaintext } = await jose.compactDecrypt(sealed, privateKey);
      return JSON.parse(new TextDecoder().decode(plaintext)) as Started['execution'];
    },
  };
}
