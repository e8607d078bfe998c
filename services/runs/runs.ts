import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { SearchAttributePair } from '@temporalio/common';
import { createHash } from 'node:crypto';
import { DomainError, badRequest, conflict, forbidden, notFound } from '../../core/errors';
import { ansibleSpecOf, hostPatternFault } from '../../core/ansible/ansible-spec';
import { newId } from '../../core/ids';
import { carriedSecrets, encryptionKeyRequired, sealRunSecrets } from '../../core/runs/run-secrets';
import { combineVerdicts, judgeSubmission, type GateVerdict, type Hold, type SubmissionFacts } from '../../core/runs/policy-gate';
import type { StepDefinition } from '../../core/runs/workflow-graph';
import { runView } from '../../core/runs/run-view';
import { stateDigest } from '../../core/runs/state-digest';
import { isUniqueViolation } from '../../store/db';
import { appendEvent } from '../../store/events';
import { findRunByIdempotencyKey, getRun, SOURCE_KEYED, type IdempotencyScope, type SourceKeyed, getRunForUpdate, insertRunWithEvent, markCancelRequested, listChildRuns, markWorkflowStarted, type NewRun } from '../../store/runs';
import { listPolicies } from '../../store/policies';
import { markOwed } from '../../store/notifications';
import { oweEffects } from '../../store/outbox';
import { carryOut } from '../effects';
import { storedEntries, withholdEntrySecrets, type EntryInput } from '../notifications/notifications';
import { actorKindOf, type Caller } from '../../store/tokens';
import { environmentFault } from '../../tools/extra-vars';
import { requireRunnableTool } from '../../tools/registry';
import { canBuildIacBinary, IAC_BINARIES, locateIacBinary } from '../../embedded/iac-binaries';
import { requireQueueUse, requireRunAccess } from '../access/access';
import { hostsToRelaunch, limitOf } from '../ansible/host-results';
import { requireInventoryExists, requireInventoryUse } from '../ansible/inventories';
import { requireComposedInputs } from '../ansible/composed-inventories';
import { getProject } from '../../store/projects';
import { getInventoryHosts } from '../../store/inventories';
import { entryFields, recordMutation, unchanged, type AuditOrigin, type EntryDraft } from '../audit/audit';
import { requireCredentialsReady, requireCredentialsUsable, rerunCredentials } from '../credentials';
import { requireQueueAllowed } from '../access/licensing';
import { executionTaskQueue, runWorkflowId } from '../../workflows/ids';
import { GRAPH_WORKFLOW, RUN_WORKFLOW, SEARCH_ATTRIBUTES, type GraphWorkflowInput, type RunWorkflowInput } from '../../workflows/definitions';
import type { ServerContext } from '../context';
import { endUnrunChildren, recordRunEnd } from './run-lifecycle';
import { PARENT_KINDS, type Run, type RunSourceKind, type RunSpec } from '../../core/runs/run';

export interface RunRequest {
  /** For a parent, `pipeline` or `workflow`, or a split's tool. */
  tool: string;
  spec: RunSpec;
  queue: string;
  /** Seconds; zero or absent takes the server's --run-timeout. A parent's steps each carry it. */
  timeout?: number;
  rerunOf?: string;
  /** What starts the run; absent is the API (a person or an agent). A rerun's source is its original. */
  source?: { kind: RunSourceKind; id: string };
  /** Absent for a plain run. A parent's children are its `steps` (a split's are its shards). */
  kind?: 'run' | ParentKind;
  steps?: StepDefinition[];
  templateId?: string;
  /**
   * Secret values by var (secret survey answers), in clear: never stored, logged or shown. Sealed
   * to the run and to each child that runs a tool (core/run-secrets.ts); the tool receives them
   * as extra vars at execution. The audit entry names the vars, never the values.
   */
  secrets?: Record<string, string>;
  /** The run's own notification entries, secrets in clear as sent (sealed to the run when stored). */
  notifications?: EntryInput[];
  /**
   * Credential ids the run (and each step or shard of it that runs a tool) is given, opened and
   * injected at execution. submitRun checks each is ready (services/credentials.ts
   * requireCredentialsReady) and, for a run named directly (not a template's or a rerun's, whose
   * own paths check them), that the caller may use each.
   */
  credentials?: string[];
  /** Where `credentials` came from in the request, for a refusal's field (`credentials`, `run.credentials`). */
  credentialsField?: string;
  /**
   * Holds the run for approval whatever the policies say (a deny still refuses it): a drift
   * reconcile's proposal, with the saved plan its approval applies (services/iac/drift.ts).
   */
  hold?: Hold;
}

type ParentKind = 'pipeline' | 'workflow' | 'split';

/** A child run to record under a parent: a step, an approval step or a shard. */
interface ChildPlan {
  step: StepDefinition;
  index: number;
  tool: string;
  spec: RunSpec;
}

/**
 * What each step of a parent runs: its own tool and command (for an ansible step its playbook,
 * stored inventory and controls), with the parent's extra vars under its own.
 */
function childPlans(request: RunRequest): ChildPlan[] {
  return (request.steps ?? []).map((step, index) => {
    if (step.type === 'approval') return { step, index, tool: 'approval', spec: { command: step.description ?? '', extra_vars: {} } };
    const tool = step.tool ?? request.tool;
    const spec: RunSpec = {
      command: step.command ?? '',
      extra_vars: { ...request.spec.extra_vars, ...(step.extra_vars ?? {}) },
      ...ansibleSpecOf(tool, step),
      ...(step.shard ? { shard: step.shard } : {}),
      // A split's shards work in the same project commit as the split (spec part A 4.5).
      ...(step.shard && request.spec.project ? { project: request.spec.project } : {}),
      ...(request.spec.dry_run ? { dry_run: true as const } : {}),
    };
    return { step, index, tool, spec };
  });
}

/** What a submission executes: the run itself, or each step or shard that runs a tool. */
interface Execution {
  tool: string;
  spec: RunSpec;
  /** The step or shard's name, for a child. */
  step?: string;
  /** Where the execution's fields sit in the body, for a refusal naming one: `` for the run, `steps[2].` for a step. */
  fieldPrefix: string;
}

function executionsOf(request: RunRequest, children: ChildPlan[]): Execution[] {
  if (!request.steps) return [{ tool: request.tool, spec: request.spec, fieldPrefix: '' }];
  // A split's shards are the run's own command, named as the run's fields.
  const prefix = (c: ChildPlan) => (request.kind === 'split' ? '' : `steps[${c.index}].`);
  return children.filter((c) => c.step.type !== 'approval').map((c) => ({ tool: c.tool, spec: c.spec, step: c.step.name, fieldPrefix: prefix(c) }));
}

/**
 * Every execution's tool must be able to start with the environment its extra vars (and secrets)
 * make: a run that would fail with `spawn E2BIG` is refused now, naming the field, rather than
 * accepted and failed.
 */
async function requireStartable(executions: Execution[], secrets: Record<string, string> | undefined): Promise<void> {
  for (const execution of executions) {
    const tool = await requireRunnableTool(execution.tool);
    if (tool.installed === 'built') await requireIacBinary(execution.tool);
    const spec = secrets ? { ...execution.spec, extra_vars: { ...execution.spec.extra_vars, ...secrets } } : execution.spec;
    const invocation = tool.invocation(spec);
    const fault = environmentFault(invocation.env, invocation.argv);
    if (fault) throw badRequest(execution.step ? `step ${execution.step}: ${fault.message}` : fault.message, { field: fault.field });
  }
}

/**
 * A terraform or opentofu run needs its binary here or the means to build it (a Go toolchain):
 * the worker builds it on first use (embedded/iac-binaries.ts). Neither is a 400 naming the tool.
 */
async function requireIacBinary(name: string): Promise<void> {
  const which = IAC_BINARIES[name as keyof typeof IAC_BINARIES];
  if (!which) return;
  try {
    if ((await locateIacBinary(which)) || (await canBuildIacBinary())) return;
  } catch (err) {
    throw badRequest(`the ${name} tool is missing on this server: ${(err as Error).message}`, { field: 'tool' });
  }
  throw badRequest(
    `the ${name} tool is missing on this server: ${which.binary} is not installed and there is no Go toolchain to build ${which.title} ${which.version}; ` +
      `run \`cairn tools install ${name}\` or set ${which.envVar}`,
    { field: 'tool' },
  );
}

/**
 * The approval gate's verdict on a submission (spec part A 2.10, 4.17), judged before it is
 * recorded: a plain run on its own, a parent on every step that runs a tool.
 */
async function judge(ctx: ServerContext, caller: Caller, request: RunRequest, executions: Execution[]): Promise<GateVerdict> {
  const policies = await listPolicies(ctx.sql);
  const verdicts: GateVerdict[] = [];
  for (const { tool: name, spec } of executions) {
    const tool = await requireRunnableTool(name);
    const dryRun = spec.dry_run === true;
    const facts: SubmissionFacts = {
      tool: name,
      command: spec.command,
      inventory_id: spec.inventory_id ?? null,
      queue: request.queue,
      actor: caller.token.name,
      account: caller.account.username,
      actor_kind: actorKindOf(caller),
      dry_run: dryRun,
      dry_run_change_free: dryRun && tool.dryRunChangeFree,
    };
    // Policy-file policies answer from Open Policy Agent; the same gate weighs them with the rest.
    const rego = policies.some((p) => p.rego) && ctx.regoPolicies ? await ctx.regoPolicies.evaluate(facts) : [];
    verdicts.push(judgeSubmission(facts, policies, rego));
  }
  return combineVerdicts(verdicts);
}

/**
 * The one way a run comes to exist: checked, judged by the approval gate, recorded with its events
 * and its chain entry in one transaction, then handed to Temporal unless it is held. The
 * hand-off is an effect owed in the same transaction (store/outbox.ts): if it fails the outbox
 * dispatcher makes it, so nothing is lost. A repeat with the same
 * Idempotency-Key by the same account (for a schedule's fire or a trigger's delivery: from the
 * same source) returns the original run and records nothing.
 */
/**
 * A limit reaches here from a body (checked there too), a template saved before the rule, a stored
 * run repeated, or a provisioning callback's host name: none may make Ansible read a file
 * (core/ansible-spec.ts). A stored one is a configuration that cannot start: 409 naming `limit`.
 */
function requireHostPatterns(executions: { spec: RunSpec }[]): void {
  for (const { spec } of executions) {
    const fault = spec.limit === undefined ? undefined : hostPatternFault(spec.limit);
    if (fault) throw conflict(`limit ${fault}`, { field: 'limit' });
  }
}

/** A schedule's fire and a trigger's delivery are keyed by their source; everything else by the caller's account. */
function idempotencyScope(caller: Caller, request: RunRequest): IdempotencyScope {
  const source = request.source;
  return source && (SOURCE_KEYED as readonly string[]).includes(source.kind) ? { source: { kind: source.kind as SourceKeyed, id: source.id } } : { accountId: caller.account.id };
}

/**
 * The queue a run executes on: its own (a submission's `queue`, or its template's), else the one its
 * stored inventory names (spec part A 1.2: a run inherits a queue from its template or inventory).
 * A parent runs every step on one queue, so steps whose inventories name different queues, with
 * none of its own to settle it, are a configuration error: 400 naming the second step's field.
 */
function effectiveQueue(own: string, inventories: { queue: string; field: string; inventoryId: string }[]): string {
  if (own !== '' || inventories.length === 0) return own;
  const [first, other] = [inventories[0], inventories.find((q) => q.queue !== inventories[0].queue)];
  if (other) {
    throw badRequest(
      `${other.field}: inventory ${other.inventoryId} runs on queue ${other.queue} and inventory ${first.inventoryId} on queue ${first.queue}; every step runs on one queue: name it as queue`,
      { field: other.field },
    );
  }
  return first.queue;
}

/**
 * A run's workflow started after its record, off the submitter's path: a schedule fire records its
 * run and goes on, and the start waits for the fires after it (workers/fires-first.ts). The outbox
 * keeps the start for this server for `graceSeconds` (longer than any deferral), then any
 * dispatcher makes it, so a server that dies in between makes the run late, never lost.
 */
export interface StartLater {
  graceSeconds: number;
  /** Takes the start to make later; it never throws (a failure is left to the dispatcher). */
  defer(start: () => Promise<void>): void;
}

export async function submitRun(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  request: RunRequest,
  idempotencyKey?: string,
  startLater?: StartLater,
): Promise<{ run: Run; created: boolean }> {
  const keyScope = idempotencyScope(caller, request);
  if (idempotencyKey) {
    const existing = await findRunByIdempotencyKey(ctx.sql, keyScope, idempotencyKey);
    if (existing) return { run: existing, created: false };
  }
  // A template's credentials were checked when it was saved and its picked ones at launch; a rerun's by rerunCredentials.
  if (!request.templateId && !request.rerunOf) await requireCredentialsUsable(ctx.sql, caller, request.credentials ?? [], request.credentialsField ?? 'credentials');
  await requireCredentialsReady(ctx, request.credentials ?? []);
  const secretVars = Object.keys(request.secrets ?? {}).sort();
  if (secretVars.length && !ctx.sealer) throw encryptionKeyRequired('the secret value', secretVars);
  const children = childPlans(request);
  const executions = executionsOf(request, children);
  await requireStartable(executions, request.secrets);
  requireHostPatterns(executions);
  // A stored inventory a run or step names needs the use grant on it (400 naming the field, such as
  // `steps[1].inventory_id`, when unreadable); a template's (and its steps') were checked when the
  // template was saved, and launching it needs use on the template. A template whose inventory is
  // gone cannot launch: a configuration error (spec part B 7.3).
  const checked = new Set<string>();
  const inventoryQueues: { queue: string; field: string; inventoryId: string }[] = [];
  for (const { spec, fieldPrefix } of executions) {
    const inventoryId = spec.inventory_id;
    if (!inventoryId || checked.has(inventoryId)) continue;
    checked.add(inventoryId);
    const field = `${fieldPrefix}inventory_id`;
    if (request.templateId) await requireInventoryExists(ctx.sql, inventoryId, field);
    else await requireInventoryUse(ctx.sql, caller, inventoryId, field);
    // A smart or constructed one whose input is gone cannot resolve: a configuration error, 400
    // naming the field with the whole reason (spec part B 7.3; a rerun makes it 409).
    const named = await getInventoryHosts(ctx.sql, inventoryId);
    if (named) await requireComposedInputs(ctx.sql, named, field);
    if (named?.queue) inventoryQueues.push({ queue: named.queue, field, inventoryId });
  }
  request = { ...request, queue: effectiveQueue(request.queue, inventoryQueues) };
  // A named queue, the run's own or inherited from its template or inventory, is Team (spec part A 1.2).
  requireQueueAllowed(request.queue, ctx.licensing.tier, inventoryQueues.find((q) => q.queue === request.queue && request.queue !== '')?.field ?? 'queue');
  await requireQueueUse(ctx.sql, caller, request.queue);
  const verdict = await judge(ctx, caller, request, executions);
  if (verdict.verdict === 'deny') {
    throw forbidden(`a deny policy refuses this run (${verdict.policies.join(', ')})`, { policies: verdict.policies });
  }
  // A proposal held whatever the policies say (a drift reconcile's saved plan) carries its own hold.
  const hold =
    verdict.verdict === 'hold'
      ? request.hold
        ? { ...verdict.hold, agent_hold: verdict.hold.agent_hold || request.hold.agent_hold, ...(request.hold.plan ? { plan: request.hold.plan } : {}), ...(request.hold.proposal ? { proposal: request.hold.proposal } : {}) }
        : verdict.hold
      : (request.hold ?? null);
  const timeoutSeconds = request.timeout && request.timeout > 0 ? request.timeout : ctx.config.runTimeout;
  const kind = request.kind ?? 'run';
  const requester = {
    requested_by: caller.account.username,
    account_id: caller.account.id,
    token_id: caller.token.id,
    actor_kind: actorKindOf(caller),
    queue: request.queue,
    timeout_seconds: timeoutSeconds,
    template_id: request.templateId ?? null,
    source_kind: request.source?.kind ?? (request.rerunOf ? 'rerun' : 'api'),
    source_id: request.source?.id ?? request.rerunOf ?? null,
  };

  const digested = request.steps ? { ...request.spec, steps: request.steps } : request.spec;
  const parentId = newId('run');
  withholdEntrySecrets(origin, request.notifications?.length ?? 0);
  const notifications = request.notifications?.length ? await storedEntries(ctx, parentId, request.notifications) : [];
  const parentDigest = stateDigest({ tool: request.tool, spec: digested, queue: request.queue, timeout_seconds: timeoutSeconds });
  const parent: NewRun = {
    ...requester,
    id: parentId,
    kind,
    tool: request.tool,
    status: hold ? 'held' : 'pending',
    spec: request.spec,
    graph: request.steps ?? null,
    rerun_of: request.rerunOf ?? null,
    idempotency_key: idempotencyKey ?? null,
    hold,
    state_digest: parentDigest,
    sealed_vars: sealRunSecrets(ctx.sealer, parentId, parentDigest, request.secrets),
    notifications,
    credentials: request.credentials ?? [],
  };
  const created = { kind: 'run.created', body: (row: Run) => ({ run: runView(row, 'preview') }) };
  const submitted = (row: Run): EntryDraft => ({
    id: newId('aud'),
    run_id: row.id,
    body: {
      kind: 'run.submitted',
      run_id: row.id,
      run_kind: row.kind,
      tool: row.tool,
      status: row.status,
      state_digest: row.state_digest,
      actor_kind: row.actor_kind,
      rerun_of: row.rerun_of,
      template_id: row.template_id,
      source: { kind: row.source_kind, id: row.source_id },
      // Names only: a secret's value never enters the chain.
      ...(secretVars.length ? { secret_vars: secretVars } : {}),
      ...(request.credentials?.length ? { credentials: request.credentials } : {}),
      hold,
      exempted_by: verdict.verdict === 'run' ? verdict.exempted_by : [],
      // Warnings of `warn: note` policy-file policies: recorded, holding nothing.
      ...(verdict.notes?.length ? { policy_notes: verdict.notes } : {}),
    },
  });

  // Who makes the run's start: this call, now, or later (within the grace it holds).
  const starter = startLater?.graceSeconds ?? true;
  let run: Run;
  try {
    if (children.length === 0 && !hold) {
      // The common case, one run to start now: the run, its event and its chain entry in one statement.
      run = await insertRunWithEvent(ctx.sql, parent, created, (row) => entryFields(origin, 201, submitted(row)), [{ effect: 'run.start', subject: parent.id }], starter);
    } else {
      run = await recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
        const inserted = await insertRunWithEvent(tx, parent, created);
        if (hold) {
          // The hold is owed to the run's notification targets from the transaction that makes it.
          const seq = await appendEvent(tx, inserted.id, 'run.held', { run: runView(inserted, 'preview'), blocker: 'approval_needed', hold });
          await markOwed(tx, inserted.id, seq, 'run.held');
        }
        for (const child of children) {
          const childId = newId('run');
          const childDigest = stateDigest({ tool: child.tool, spec: child.spec, queue: request.queue, timeout_seconds: timeoutSeconds });
          await insertRunWithEvent(
            tx,
            {
              ...requester,
              id: childId,
              kind: child.step.type === 'approval' ? 'approval' : kind === 'split' ? 'shard' : 'step',
              tool: child.tool,
              status: 'pending',
              spec: child.spec,
              parent_run_id: inserted.id,
              step_name: child.step.name,
              step_index: child.index,
              rerun_of: null,
              idempotency_key: null,
              hold: null,
              state_digest: childDigest,
              // Every step and shard that runs a tool receives the secrets; an approval step runs nothing.
              sealed_vars: child.step.type === 'approval' ? null : sealRunSecrets(ctx.sealer, childId, childDigest, request.secrets),
              // And the credentials, likewise.
              credentials: child.step.type === 'approval' ? [] : (request.credentials ?? []),
            },
            created,
          );
        }
        Object.assign(entry, submitted(inserted));
        // A run released at once owes its workflow's start (the pipeline's or split's: it starts its steps).
        return { ...inserted, owed_effects: hold ? [] : await oweEffects(tx, [{ effect: 'run.start', subject: inserted.id }], starter) };
      });
    }
  } catch (err) {
    if (idempotencyKey && isUniqueViolation(err)) {
      const existing = await findRunByIdempotencyKey(ctx.sql, keyScope, idempotencyKey);
      if (existing) return { run: existing, created: false };
    }
    throw err;
  }
  ctx.metrics.runsSubmitted.inc({ tool: run.tool });
  const { owed_effects: effects = [], ...submittedRun } = run as Run & { owed_effects?: string[] };
  if (!startLater) await carryOut(ctx, effects, 'starting the run workflow', (ids) => startRunWorkflow(ctx, submittedRun, ids));
  // Lost as a dying server loses it: the outbox's grace runs out and a dispatcher makes it.
  else if (effects.length && !ctx.faults.fire('deferred-start-lost')) {
    // Read again when it is made: the run may have been canceled meanwhile.
    startLater.defer(() => carryOut(ctx, effects, 'starting the run workflow', (ids) => startOwedRun(ctx, submittedRun.id, ids)));
  }
  return { run: submittedRun, created: true };
}

/**
 * Makes the start a run owes (its `run.start` effect) from the run as it stands now: nothing for a
 * run ended or held meanwhile, and the cancel for one canceled before its start. `completing`: the
 * effects the start's last write completes.
 */
export async function startOwedRun(ctx: ServerContext, runId: string, completing: string[] = []): Promise<void | 'completed'> {
  const run = await getRun(ctx.sql, runId);
  // Ended, or canceled before its start: nothing to start (a cancel ends a run with no workflow).
  if (!run || run.finished_at || run.status === 'held') return;
  if (run.cancel_requested_at) return deliverCancel(ctx, runId);
  return startRunWorkflow(ctx, run, completing);
}

/**
 * What the Temporal UI and CLI show of a run (docs/operations.md, "Finding runs in Temporal"): its
 * search attributes (status, tool, requester, template, queue, source; the workflow keeps the
 * status current; no status when `tracksStatus` is false, `--temporal-run-status off`) and a memo
 * naming the command's digest (`sha256:` + hex SHA-256 of the command as submitted, so the
 * command itself, which may name anything, stays out of Temporal) and the template.
 */
export function opsWindow(run: Run, tracksStatus: boolean): { typedSearchAttributes: SearchAttributePair[]; memo: Record<string, string | null> } {
  const keyword = (key: SearchAttributePair['key'], value: string | null): SearchAttributePair[] =>
    value ? [{ key, value } as SearchAttributePair] : [];
  return {
    typedSearchAttributes: [
      ...keyword(SEARCH_ATTRIBUTES.runStatus, tracksStatus ? run.status : null),
      ...keyword(SEARCH_ATTRIBUTES.tool, run.tool),
      ...keyword(SEARCH_ATTRIBUTES.requester, run.requested_by),
      ...keyword(SEARCH_ATTRIBUTES.template, run.template_id),
      ...keyword(SEARCH_ATTRIBUTES.queue, run.queue),
      ...keyword(SEARCH_ATTRIBUTES.source, run.source_kind),
    ],
    memo: {
      command_digest: `sha256:${createHash('sha256').update(run.spec.command ?? '').digest('hex')}`,
      template_id: run.template_id,
    },
  };
}

/**
 * Starts the run's workflow on the pool queue, its tool routed to the run's queue. Workflow id =
 * run id, with both id policies set explicitly: starting a workflow that is still running returns
 * the running one (`USE_EXISTING`), and a workflow that has finished is never started again for
 * the same run (`REJECT_DUPLICATE`, answered with WorkflowExecutionAlreadyStartedError). Either way
 * the repeat is harmless: the `run.start` effect (store/outbox.ts) is carried out at least once.
 * `completing`: the server's own `run.start` effects, completed with the mark that the workflow started.
 */
export async function startRunWorkflow(ctx: ServerContext, run: Run, completing: string[] = []): Promise<'completed'> {
  if (ctx.faults.fire('workflow-start-once')) throw new Error('injected fault: workflow start failed');
  const tracksStatus = ctx.config.temporalRunStatus === 'tracked';
  const once = {
    workflowId: runWorkflowId(run.id),
    taskQueue: ctx.config.poolQueue,
    workflowIdReusePolicy: 'REJECT_DUPLICATE',
    workflowIdConflictPolicy: 'USE_EXISTING',
    ...opsWindow(run, tracksStatus),
  } as const;
  const executionQueue = executionTaskQueue(ctx.config.poolQueue, run.queue);
  // Left out when tracked (JSON drops undefined), so a run's input is what it always was by default.
  const tracksRunStatus = tracksStatus ? undefined : false;
  try {
    if (PARENT_KINDS.includes(run.kind)) {
      // A parent runs its children; each child carries the parent's timeout and queue as its own.
      await ctx.temporal.workflow.start<(input: GraphWorkflowInput) => Promise<void>>(GRAPH_WORKFLOW, {
        ...once,
        args: [{ parentRunId: run.id, stepTimeoutSeconds: run.timeout_seconds, leaseSeconds: ctx.config.leaseSeconds, executionQueue, tracksRunStatus }],
      });
    } else {
      await ctx.temporal.workflow.start<(input: RunWorkflowInput) => Promise<void>>(RUN_WORKFLOW, {
        ...once,
        args: [{ runId: run.id, timeoutSeconds: run.timeout_seconds, leaseSeconds: ctx.config.leaseSeconds, executionQueue, tracksRunStatus }],
      });
    }
  } catch (err) {
    // The workflow ran and finished: it is not started again.
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  await markWorkflowStarted(ctx.sql, run.id, completing);
  return 'completed';
}

/**
 * Records the cancel with the `run.cancel` effect it owes, then cancels the workflow, whose
 * activity kills the tool's process group and whose final write marks the run canceled. A run with
 * no workflow (held, not started yet, or gone) is ended here directly. The outbox dispatcher
 * repeats the Temporal half if this server dies first.
 */
export async function cancelRun(ctx: ServerContext, caller: Caller, origin: AuditOrigin, runId: string): Promise<Run> {
  const { effects } = await recordMutation(ctx.sql, origin, 202, async (tx, entry) => {
    const current = await getRunForUpdate(tx, runId);
    if (!current) throw notFound(`run ${runId}`);
    await requireRunAccess(tx, caller, current, 'cancel');
    if (current.finished_at) throw conflict(`run ${runId} has already ended (${current.status})`, { status: current.status });
    // A second cancel of a run still ending changes nothing and is not recorded again; the first's effect is still owed.
    if (current.cancel_requested_at) return unchanged({ effects: [] as string[] });
    await markCancelRequested(tx, runId, caller.account.username);
    await appendEvent(tx, runId, 'run.cancel_requested', { by: caller.account.username });
    entry.run_id = runId;
    entry.body = { kind: 'run.cancel_requested', run_id: runId, status: current.status };
    return { effects: await oweEffects(tx, [{ effect: 'run.cancel', subject: runId }], true) };
  });
  await carryOut(ctx, effects, 'cancelling the run workflow', () => deliverCancel(ctx, runId));
  return waitForEnd(ctx, runId, 3000);
}

/**
 * The Temporal half of a cancel; safe to repeat. The workflow is cancelled if there is one (its
 * activity ends the tool; its end records `canceled`); a run with none (held, not started yet, or
 * its workflow gone) is ended here, with any steps it never ran. A workflow started after this
 * finds its run ended and executes nothing.
 */
export async function deliverCancel(ctx: ServerContext, runId: string): Promise<void> {
  const run = await getRun(ctx.sql, runId);
  if (!run || run.finished_at) return;
  try {
    await ctx.temporal.workflow.getHandle(runWorkflowId(run.id)).cancel();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    await endUnrunChildren(ctx.sql, run.id, 'not run: canceled before it started');
    await recordRunEnd(ctx.sql, run.id, { kind: 'canceled' });
  }
}

/** The run once it has ended, or as it stands when the wait runs out. */
export async function waitForEnd(ctx: ServerContext, runId: string, timeoutMs: number): Promise<Run> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await getRun(ctx.sql, runId);
    if (!run) throw notFound(`run ${runId}`);
    if (run.finished_at || Date.now() >= deadline) return run;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What a run was asked to do, so a rerun or retry submits the same again. */
function requestOf(original: Run): RunRequest {
  return {
    tool: original.tool,
    spec: original.spec,
    queue: original.queue,
    timeout: original.timeout_seconds,
    rerunOf: original.id,
    kind: original.kind === 'run' ? undefined : (original.kind as ParentKind),
    steps: PARENT_KINDS.includes(original.kind) ? (original.graph as StepDefinition[]) : undefined,
    templateId: original.template_id ?? undefined,
  };
}

/** The run to rerun or retry: one the caller may rerun (services/access.ts), that has ended and is not a step. */
async function requireFinished(ctx: ServerContext, caller: Caller, runId: string, what: string): Promise<Run> {
  const original = await getRun(ctx.sql, runId);
  if (!original) throw notFound(`run ${runId}`);
  await requireRunAccess(ctx.sql, caller, original, 'rerun');
  if (!original.finished_at) throw conflict(`run ${runId} has not ended yet (${original.status}); ${what} a finished run`);
  if (original.parent_run_id) throw conflict(`run ${runId} is a step of run ${original.parent_run_id}; ${what} that run instead`);
  return original;
}

/** A fresh run with this run's execution settings (a parent with all its steps); the original stays as it was. */
export async function rerunRun(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  runId: string,
  idempotencyKey?: string,
): Promise<Run> {
  const original = await requireFinished(ctx, caller, runId, 'rerun');
  return resubmit(ctx, caller, origin, { ...requestOf(original), secrets: carriedSecrets(ctx.sealer, original) }, idempotencyKey);
}

/** A new split from only the shards of a finished split that did not succeed; the original stays as it was. */
export async function retryRun(ctx: ServerContext, caller: Caller, origin: AuditOrigin, runId: string, idempotencyKey?: string): Promise<Run> {
  const original = await requireFinished(ctx, caller, runId, 'retry');
  if (original.kind !== 'split') {
    throw conflict(`run ${runId} is not a split; retry makes a new split from failed shards, and rerun repeats any run`, { kind: original.kind });
  }
  const shards = await listChildRuns(ctx.sql, original.id);
  const failed = (original.graph as StepDefinition[]).filter((step) => shards.find((s) => s.step_name === step.name)?.status !== 'succeeded');
  if (failed.length === 0) throw conflict(`every shard of run ${runId} succeeded; there is nothing to retry`);
  return resubmit(ctx, caller, origin, { ...requestOf(original), steps: failed, secrets: carriedSecrets(ctx.sealer, original) }, idempotencyKey);
}

/**
 * A rerun, retry or relaunch repeats the original's project and stored inventory: when either has
 * since been deleted it cannot run, a configuration error answered 409 naming what is missing
 * (spec part B 7.3) rather than a run that fails as it starts.
 */
async function requireStillPresent(ctx: ServerContext, runId: string, spec: RunSpec): Promise<void> {
  const missing: { kind: 'project' | 'inventory'; id: string }[] = [];
  if (spec.project && !(await getProject(ctx.sql, spec.project.id))) missing.push({ kind: 'project', id: spec.project.id });
  if (spec.inventory_id && !(await getInventoryHosts(ctx.sql, spec.inventory_id))) missing.push({ kind: 'inventory', id: spec.inventory_id });
  // A composed inventory whose input is gone is refused by submitRun, as a rerun's 409 (resubmit).
  if (missing.length === 0) return;
  const names = missing.map((m) => `${m.kind} ${m.id}`).join(' and its ');
  throw conflict(`run ${runId} cannot run again: its ${names} no longer ${missing.length === 1 ? 'exists' : 'exist'}`, { missing });
}

/**
 * Submits a rerun or retry. Its request is the stored run's, not the caller's, so what submission
 * refuses as a bad request (a tool this server no longer runs, an environment too large to start)
 * is a configuration error of the original here: 409 with the whole reason (spec part B 7.3).
 */
/**
 * A new ansible run limited to the hosts a finished run left failed or unreachable (spec part A
 * 3.1, 4.1): the original's execution settings with `limit` naming exactly those hosts; the
 * original never changes. 409 when it left none (or is not an ansible run).
 */
export async function relaunchFailedRun(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  runId: string,
  idempotencyKey?: string,
): Promise<Run> {
  const original = await requireFinished(ctx, caller, runId, 'relaunch-failed');
  const hosts = await hostsToRelaunch(ctx.sql, original);
  const request = requestOf(original);
  request.spec = { ...original.spec, limit: limitOf(hosts) };
  return resubmit(ctx, caller, origin, { ...request, secrets: carriedSecrets(ctx.sealer, original) }, idempotencyKey);
}

async function resubmit(ctx: ServerContext, caller: Caller, origin: AuditOrigin, request: RunRequest, idempotencyKey?: string): Promise<Run> {
  await requireStillPresent(ctx, request.rerunOf!, request.spec);
  // The original's credentials go with it; one its template does not name needs use again.
  const credentials = await rerunCredentials(ctx.sql, caller, request.rerunOf!, request.templateId ?? null);
  if (credentials.length) request = { ...request, credentials };
  try {
    const { run } = await submitRun(ctx, caller, origin, request, idempotencyKey);
    return run;
  } catch (err) {
    if (err instanceof DomainError && err.code === 'invalid') throw conflict(err.message, err.details);
    throw err;
  }
}
