import type { ExecutionOutcome } from '../../core/runs/run-outcome';
import { RunInputError } from '../../core/runs/run-outcome';
import { runView } from '../../core/runs/run-view';
import type { Run } from '../../core/runs/run';
import type { Sealer } from '../../core/credentials/seal';
import type { Injection } from '../../core/credentials/credential-kinds';
import { knownSecretValues, openRunSecrets, RunSecretsError } from '../../core/runs/run-secrets';
import type { Sql } from '../../store/db';
import { getTool } from '../../tools/registry';
import type { ToolInputs, ToolInvocation } from '../../tools/types';
import { DomainError } from '../../core/errors';
import { ansibleToolCredentials, scriptToolInjection } from '../../tools/credential-injection';
import { CredentialOpenError, openRunCredentials, type MintedLease } from '../credentials';
import type { ExtensionRegistry } from '../../core/extensions';
import { moveRun, unexplainedRelease } from './run-lifecycle';
import { runToolInputs } from './run-inputs';

/**
 * Claims the run for an attempt: pending or requeued becomes running, with its event, in one
 * write. `host` is the execution host the run's record names (the pool's host, or a relay
 * worker's). A run already ended or asked to cancel is not moved. `justRead`: the run as the caller
 * has just read it (moveRun).
 */
export async function claimRunAttempt(
  sql: Sql,
  runId: string,
  host: string,
  justRead?: Run,
): Promise<{ run: Run; previous: Run } | 'finished' | 'canceled' | 'missing'> {
  const result = await moveRun<'finished' | 'canceled' | 'missing'>(sql, runId, 'claim it', (previous) => {
    if (!previous) return { settled: 'missing' as const };
    if (previous.finished_at) return { settled: 'finished' as const };
    if (previous.cancel_requested_at) return { settled: 'canceled' as const };
    return {
      changes: { status: 'running' as const, started_at: previous.started_at ?? new Date(), attempts: previous.attempts + 1, exec_host: host },
      event:
        previous.status === 'pending' && previous.hold?.plan && previous.started_at
          ? // Approved at the plan gate: it goes on to apply, and was announced as started already.
            { kind: 'run.resumed', body: (next: Run) => ({ attempt: next.attempts, plan_digest: previous.hold!.plan!.digest }) }
          : previous.status === 'pending'
          ? { kind: 'run.started', body: (next: Run) => ({ run: runView(next, 'preview') }) }
          : {
              kind: 'run.requeued',
              body: (next: Run) => ({
                attempt: next.attempts,
                previous_host: previous.exec_host,
                reason: 'the worker executing the run stopped renewing its lease',
              }),
            },
      guard: { notCanceled: true },
    };
  }, justRead);
  return 'settled' in result ? result.settled : { run: result.moved, previous: result.previous };
}

/** Everything an executing side needs to run a claimed run's tool, resolved by the side holding the records. */
export interface PreparedExecution {
  kind: 'ready';
  run: Run;
  /** The run as it was before this claim: `running` means an earlier attempt was lost. */
  previous: Run;
  /** The tool's binary, for messages. */
  binary: string;
  argv: string[];
  /** The tool's own variables (its invocation's, its credentials', a shard's); the executor adds the base environment. */
  env: Record<string, string>;
  /** Files written into the work dir before the tool starts (credential files among them; a saved plan as bytes). */
  files: Record<string, string | Buffer>;
  /** Secret values the output masker hides: the run's secrets and its credentials'. */
  maskValues: string[];
  project?: { id: string; commit: string };
}

export interface PreparationDeps {
  sealer?: Sealer;
  federationIssuer?: string;
  /** Extension secret sources credentials may read from (none on a relay's server side). */
  secretSources?: ExtensionRegistry['secretSources'];
  /** Where the dynamic secrets minted for this execution are recorded, for their revocation when it ends. */
  leases?: MintedLease[];
  /**
   * Inputs only the executing side can resolve (a terraform run's staged binary, state and saved
   * plan; a go run's caches), for the claimed run; a RunInputError ends the run naming why.
   */
  executionInputs?: (run: Run) => Promise<Partial<ToolInputs>>;
}

/**
 * Claims the run and resolves what its tool needs (secrets, credentials, inputs, the invocation),
 * as the execution of an attempt starts. `workDirOf` names the work dir on the executing side,
 * where credential files are placed. An end found now (refused, unknown tool, credentials that do
 * not open) is returned for the caller to record; `skipped` means the run had already ended.
 */
export async function prepareExecution(
  sql: Sql,
  deps: PreparationDeps,
  runId: string,
  host: string,
  workDirOf: (run: Run) => string,
): Promise<PreparedExecution | { kind: 'ended'; outcome: ExecutionOutcome } | { kind: 'skipped' } | { kind: 'missing' }> {
  const release = await unexplainedRelease(sql, runId);
  if (release.refusal) return { kind: 'ended', outcome: { kind: 'refused', message: release.refusal } };
  const claimed = await claimRunAttempt(sql, runId, host, release.run);
  if (claimed === 'missing') return { kind: 'missing' };
  if (claimed === 'finished') return { kind: 'skipped' };
  if (claimed === 'canceled') return { kind: 'ended', outcome: { kind: 'canceled' } };
  const { run, previous } = claimed;
  const spawnFailed = (message: string) => ({ kind: 'ended' as const, outcome: { kind: 'spawn_failed' as const, message } });
  const definition = getTool(run.tool);
  if (!definition) return spawnFailed(`the ${run.tool} tool is not available on this server`);
  // The run's sealed secrets, opened only here: they join its extra vars and its masker's known values.
  let secrets: Record<string, string>;
  try {
    secrets = openRunSecrets(deps.sealer, run);
  } catch (err) {
    if (err instanceof RunSecretsError) return spawnFailed(err.message);
    throw err;
  }
  const workDir = workDirOf(run);
  let injection: Injection;
  // The ansible tool takes a machine credential its own way (tools/ansible.ts): user and key file
  // as extra vars, the passwords and the key's passphrase through its inputs.
  let machine: ToolInputs['machine'];
  try {
    const opened = await openRunCredentials(sql, deps.sealer, run, deps.federationIssuer, deps.secretSources, deps.leases);
    if (run.tool === 'ansible') {
      const { sshKeyFile, sshKeyPassphrase, password, becomePassword, ...rest } = ansibleToolCredentials(opened, workDir);
      injection = rest;
      machine = { sshKeyFile, sshKeyPassphrase, password, becomePassword };
    } else {
      injection = scriptToolInjection(opened, workDir);
    }
  } catch (err) {
    if (err instanceof CredentialOpenError) return spawnFailed(err.message);
    throw err;
  }
  // What the tool needs resolved now (an ansible run's stored inventory, as it is at this start).
  let inputs: ToolInputs;
  try {
    inputs = { ...(await runToolInputs(sql, run)), ...(machine && { machine }), ...(await deps.executionInputs?.(run)) };
  } catch (err) {
    if (err instanceof RunInputError) return spawnFailed(err.message);
    throw err;
  }
  const injectedVars = { ...injection.extraVars, ...secrets };
  let invocation: ToolInvocation;
  try {
    invocation = definition.invocation(
      Object.keys(injectedVars).length ? { ...run.spec, extra_vars: { ...run.spec.extra_vars, ...injectedVars } } : run.spec,
      inputs,
    );
  } catch (err) {
    // What this run asks of its tool cannot be had here (a terraform run without its binary).
    if (err instanceof DomainError) return spawnFailed(err.message);
    throw err;
  }
  const shard = run.spec.shard;
  return {
    kind: 'ready',
    run,
    previous,
    binary: definition.binary,
    argv: invocation.argv,
    env: { ...invocation.env, ...injection.env, ...(shard ? { CAIRN_SHARD_INDEX: String(shard.index), CAIRN_SHARD_COUNT: String(shard.count) } : {}) },
    files: { ...invocation.files, ...injection.files },
    maskValues: [...knownSecretValues(secrets), ...knownSecretValues(Object.fromEntries(injection.secrets.entries()))],
    project: run.spec.project,
  };
}
