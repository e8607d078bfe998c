/**
 * Attention (spec part A 2.12, 3.3; part B 6.6): the one main blocker of each piece of unfinished
 * work, its alert thresholds and the `--attention-file` that changes them. Pure: the facts come
 * from store/attention.ts, the answer and the alerts from services/attention.ts.
 */
import { parseDuration } from '../duration';

/** Blockers in the order of spec part A 3.3: an item's main blocker is the first of its conditions. */
export const BLOCKERS = ['worker_lost', 'no_worker', 'approval_needed', 'blocked'] as const;
export type Blocker = (typeof BLOCKERS)[number];

export const isBlocker = (value: string): value is Blocker => (BLOCKERS as readonly string[]).includes(value);

/** Alert thresholds in seconds, by blocker; zero means off (never alerts). */
export type Thresholds = Record<Blocker, number>;

/**
 * Defaults (spec part B 6.6, 8): a lost worker alerts when the lease sweep has not reclaimed its
 * run within two lease periods; `no_worker` and `blocked` after 15 minutes; a waiting approval
 * never (it is the gate working).
 */
export function defaultThresholds(leaseSeconds: number): Thresholds {
  return { worker_lost: 2 * leaseSeconds, no_worker: 900, approval_needed: 0, blocked: 900 };
}

/**
 * What `--attention-file` holds: install-wide thresholds, and overrides for an organization, a
 * queue or a template. The most specific wins, field by field: template, then queue, then
 * organization, then the install, then the defaults.
 */
export interface AttentionFile {
  thresholds: Partial<Thresholds>;
  orgs: Record<string, Partial<Thresholds>>;
  queues: Record<string, Partial<Thresholds>>;
  templates: Record<string, Partial<Thresholds>>;
}

export const EMPTY_ATTENTION_FILE: AttentionFile = { thresholds: {}, orgs: {}, queues: {}, templates: {} };

/** A fault in the attention file, naming the key at fault (`queues.gpu.blocked`). */
export class AttentionFileError extends Error {
  constructor(
    readonly key: string,
    message: string,
  ) {
    super(key ? `${key}: ${message}` : message);
  }
}

const SCOPES = ['orgs', 'queues', 'templates'] as const;

/** A threshold: whole seconds (0 = off) or a duration (`90s`, `15m`, `1h`). */
function thresholdValue(value: unknown, key: string): number {
  if (typeof value === 'number') {
    if (Number.isInteger(value) && value >= 0 && value <= 366 * 86400) return value;
  } else if (typeof value === 'string') {
    const seconds = parseDuration(value);
    if (seconds !== undefined && seconds <= 366 * 86400) return seconds;
  }
  throw new AttentionFileError(key, `${JSON.stringify(value)} is not a threshold: give whole seconds (0 turns the alert off) or a duration such as 90s, 15m or 1h`);
}

function thresholdSet(value: unknown, key: string): Partial<Thresholds> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new AttentionFileError(key, `expected an object of thresholds by blocker (${BLOCKERS.join(', ')})`);
  }
  const out: Partial<Thresholds> = {};
  for (const [name, v] of Object.entries(value)) {
    const at = `${key}.${name}`;
    if (!isBlocker(name)) throw new AttentionFileError(at, `not a blocker; blockers are ${BLOCKERS.join(', ')}`);
    out[name] = thresholdValue(v, at);
  }
  return out;
}

/**
 * Parses the attention file (JSON):
 * `{"thresholds": {...}, "orgs": {"org_…": {...}}, "queues": {"gpu": {...}}, "templates": {"tpl_…": {...}}}`,
 * each `{...}` mapping blockers to thresholds. Every fault names its key.
 */
export function parseAttentionFile(text: string): AttentionFile {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new AttentionFileError('', `not valid JSON: ${(err as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new AttentionFileError('', 'expected a JSON object');
  const file: AttentionFile = { thresholds: {}, orgs: {}, queues: {}, templates: {} };
  for (const [key, value] of Object.entries(doc)) {
    if (key === 'thresholds') {
      file.thresholds = thresholdSet(value, key);
    } else if ((SCOPES as readonly string[]).includes(key)) {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new AttentionFileError(key, 'expected an object keyed by name or id');
      const scope = key as (typeof SCOPES)[number];
      for (const [name, set] of Object.entries(value)) file[scope][name] = thresholdSet(set, `${key}.${name}`);
    } else {
      throw new AttentionFileError(key, `not a key of the attention file; it takes thresholds, ${SCOPES.join(', ')}`);
    }
  }
  return file;
}

/** The thresholds that apply to one item: template over queue over organization over the install. */
export function thresholdsFor(install: Thresholds, file: AttentionFile, scope: { orgId?: string | null; queue?: string | null; templateId?: string | null }): Thresholds {
  return {
    ...install,
    ...(scope.orgId ? file.orgs[scope.orgId] : undefined),
    ...(scope.queue !== undefined && scope.queue !== null ? file.queues[scope.queue] : undefined),
    ...(scope.templateId ? file.templates[scope.templateId] : undefined),
  };
}

/** The install-wide thresholds: the defaults with the file's `thresholds` over them. */
export function installThresholds(leaseSeconds: number, file: AttentionFile): Thresholds {
  return { ...defaultThresholds(leaseSeconds), ...file.thresholds };
}

/** The attention settings a server runs with (core/config.ts). */
export interface AttentionSettings {
  /** Install-wide thresholds (the answer's `thresholds`). */
  thresholds: Thresholds;
  file: AttentionFile;
}

// --- classification

/** One condition holding a piece of unfinished work, about one run (the item's run or one of its steps or shards). */
export interface Condition {
  blocker: Blocker;
  /** The run the condition is about: the item's own run, or its step or shard. */
  subject_id: string;
  /** When this blocker began (spec part A 3.3: since counts from the current blocker). */
  since: Date;
  /**
   * What makes the condition one condition, with the item's id: an alert is sent once per
   * identity (`approval_needed:run_…`, `worker_lost:run_…:2` for the second attempt).
   */
  identity: string;
  reason: string;
  who_can_act: string;
  next: string;
  /** The blocker's own fields (spec part A 2.12). */
  details: Record<string, unknown>;
}

/** Who acts on each blocker (spec part A 3.3). */
export const WHO_ACTS: Record<Blocker, string> = {
  worker_lost: 'nobody until the lease sweep reclaims the run; an admin when the reclaim is overdue',
  no_worker: 'an admin, by connecting a worker that serves the queue or moving the work',
  approval_needed: 'an admin, never an agent',
  blocked: 'an admin, or whoever can finish or stop the holding run',
};

/** Orders conditions: by blocker (3.3), then the longest-standing first, then by run id. */
export function compareConditions(a: Condition, b: Condition): number {
  return BLOCKERS.indexOf(a.blocker) - BLOCKERS.indexOf(b.blocker) || a.since.getTime() - b.since.getTime() || a.subject_id.localeCompare(b.subject_id);
}

/** The main condition of an item and its other blockers as badges; undefined when nothing holds it. */
export function mainCondition(conditions: readonly Condition[]): { main: Condition; badges: Blocker[] } | undefined {
  if (conditions.length === 0) return undefined;
  const sorted = [...conditions].sort(compareConditions);
  const main = sorted[0];
  const badges = [...new Set(sorted.slice(1).map((c) => c.blocker))].filter((b) => b !== main.blocker);
  return { main, badges };
}

/** One line on how the main blocker and the badges bear on each other. */
export function interactionOf(main: Blocker, badges: readonly Blocker[], sameBlockerElsewhere: number): string {
  const also = sameBlockerElsewhere > 0 ? ` (${sameBlockerElsewhere} more of its runs ${sameBlockerElsewhere === 1 ? 'is' : 'are'} held the same way)` : '';
  if (badges.length === 0) return `only ${main} holds it${also}`;
  return `${main} comes first${also}; ${badges.join(', ')} ${badges.length === 1 ? 'still holds' : 'still hold'} it after ${main} clears`;
}

/** Whole seconds from `since` to `now`, never negative. */
export const waitingSeconds = (since: Date, now: Date): number => Math.max(0, Math.floor((now.getTime() - since.getTime()) / 1000));

/** Whether an item has passed its alert threshold (zero: never). */
export const isAlerting = (waiting: number, threshold: number): boolean => threshold > 0 && waiting >= threshold;

// --- the facts a condition is read from

/** A run as attention reads it: the row's fields that matter, and when its current state began. */
export interface AttentionRun {
  id: string;
  kind: string;
  status: 'held' | 'pending' | 'running';
  queue: string;
  template_id: string | null;
  parent_run_id: string | null;
  step_name: string | null;
  requested_by: string;
  account_id: string | null;
  exec_host: string | null;
  attempts: number;
  hold: { policies?: string[]; agent_hold?: boolean; distinct_approver?: boolean; expires_at?: string | null; plan?: { digest: string; summary: string; not_made?: string }; proposal?: { request: string; reasoning: string; provider: string; model: string } } | null;
  state_digest: string | null;
  workflow_started_at: Date | null;
  created_at: Date;
  /** When its current state began: the latest of its created, held, approved, started or requeued events. */
  state_since: Date;
}

/** A worker row (store/workers.ts) with whether it is lost. */
export interface AttentionWorker {
  id: string;
  queue: string;
  host: string;
  renewed_at: Date;
  renew_seconds: number;
  lost: boolean;
}

/** Kinds that execute on a worker (and so can wait for one, or lose one). */
const EXECUTING_KINDS: ReadonlySet<string> = new Set(['run', 'step', 'shard']);

/**
 * A pending run with a worker serving its queue is taken at once when a slot is free; one still
 * pending after this long while other runs on its queue execute waits behind them.
 */
export const BLOCKED_GRACE_SECONDS = 5;

export interface ConditionFacts {
  now: Date;
  /** Workers by the queue they serve ("" is the default pool). */
  workersByQueue: Map<string, AttentionWorker[]>;
  /** The longest-running run executing on each queue, when one is. */
  holderByQueue: Map<string, { id: string; readable: boolean }>;
  /** The whole item's unfinished runs by id (for a step: its siblings). */
  siblingsOf: (run: AttentionRun) => AttentionRun[];
  /** A workflow step's branches: what approving and denying run next. */
  branchesOf: (run: AttentionRun) => { on_approve: string[]; on_deny: string[] };
}

const queueName = (queue: string) => (queue === '' ? 'the default queue' : `queue ${queue}`);
const what = (run: AttentionRun) => (run.parent_run_id ? `${run.kind === 'shard' ? 'shard' : 'step'} ${run.step_name ?? run.id} (${run.id})` : `run ${run.id}`);

/** A step or shard started and not waiting for a decision: queued or executing. */
const isUnderWay = (run: AttentionRun) => run.kind !== 'approval' && run.workflow_started_at !== null && (run.status === 'running' || run.status === 'pending');

/** The conditions holding one unfinished run (a plain run, or a step or shard of the item). */
export function conditionsOf(run: AttentionRun, facts: ConditionFacts): Condition[] {
  const out: Condition[] = [];
  const retried = run.attempts > 1 ? `; it is on attempt ${run.attempts}` : '';
  if (run.status === 'held') {
    const step = run.kind === 'approval';
    const hold = run.hold ?? {};
    const approvers = `an admin, never an agent${hold.distinct_approver ? `, and not ${run.requested_by}, its requester: a policy holding it requires a different approver` : ''}`;
    const why = hold.proposal
      ? 'an AI proposed it'
      : hold.agent_hold
        ? 'an agent asked for it'
        : hold.policies?.length
          ? `policies ${hold.policies.join(', ')} hold it`
          : hold.plan?.not_made
            ? 'the plan gate could judge no plan'
            : 'a policy holds it';
    const details: Record<string, unknown> = step
      ? {
          approval: 'workflow_step',
          other_branches_running: facts.siblingsOf(run).some((s) => s.id !== run.id && isUnderWay(s)),
          decision_id: run.id,
          step: run.step_name,
          who_may_approve: approvers,
          ...facts.branchesOf(run),
          expires_at: hold.expires_at ?? null,
          state_digest: run.state_digest,
        }
      : {
          approval: 'run',
          decision_id: run.id,
          who_may_approve: approvers,
          on_approve: hold.plan?.not_made
            ? `run ${run.id} applies nothing and ends failed: no plan was made`
            : hold.plan
              ? `run ${run.id} applies exactly its saved plan ${hold.plan.digest}`
              : `run ${run.id} is released to run`,
          on_deny: `run ${run.id} ends rejected`,
          state_digest: run.state_digest,
          // Held at the plan gate (terraform, opentofu): what the plan does, and the digest an approval binds to.
          ...(hold.plan ? { plan: hold.plan } : {}),
          // Proposed by the advisory AI (POST /v1/ai/propose-run): the request and the model's reasoning.
          ...(hold.proposal ? { proposal: hold.proposal } : {}),
        };
    if (step) {
      details.paused = !details.other_branches_running;
    }
    out.push({
      blocker: 'approval_needed',
      subject_id: run.id,
      since: run.state_since,
      identity: `approval_needed:${run.id}`,
      reason: step
        ? `workflow waits at approval step ${run.step_name}${details.other_branches_running ? ' while other branches run' : ', paused'}`
        : `held for approval: ${why}${hold.plan ? ` at the plan gate (${hold.plan.summary})` : ''}`,
      who_can_act: approvers,
      next: `POST /v1/runs/${run.id}/approve or POST /v1/runs/${run.id}/reject`,
      details,
    });
    return out;
  }
  if (!EXECUTING_KINDS.has(run.kind)) return out;
  // A step still waiting on the steps it depends on is not queued: the dependency is the reason on whatever holds those.
  if (run.parent_run_id !== null && run.workflow_started_at === null) return out;
  const workers = facts.workersByQueue.get(run.queue) ?? [];
  const live = workers.filter((w) => !w.lost);
  if (run.status === 'running') {
    if (run.exec_host === null || live.some((w) => w.host === run.exec_host)) return out;
    // Its host serves the queue with no live worker: the one executing it stopped renewing.
    const lost = workers.filter((w) => w.host === run.exec_host).sort((a, b) => b.renewed_at.getTime() - a.renewed_at.getTime())[0];
    const lostAt = lost ? new Date(lost.renewed_at.getTime() + lost.renew_seconds * 3000) : run.state_since;
    const since = lostAt > run.state_since ? lostAt : run.state_since;
    const leaseMs = lost ? lost.renew_seconds * 3000 : 0;
    out.push({
      blocker: 'worker_lost',
      subject_id: run.id,
      since,
      identity: `worker_lost:${run.id}:${run.attempts}`,
      reason: `the worker on ${run.exec_host} executing ${what(run)} stopped renewing its lease${retried}`,
      who_can_act: WHO_ACTS.worker_lost,
      next: 'the lease sweep requeues the run on another worker; if it has not by reclaim_at, an admin restarts a worker on the queue or cancels the run',
      details: {
        worker: lost?.id ?? null,
        last_seen: lost?.renewed_at.toISOString() ?? null,
        reclaim_at: lost ? new Date(lost.renewed_at.getTime() + leaseMs).toISOString() : null,
      },
    });
    return out;
  }
  // pending
  if (live.length === 0) {
    // Waiting for a worker since the later of its queueing and the last worker on the queue going.
    const gone = workers.map((w) => new Date(w.renewed_at.getTime() + w.renew_seconds * 3000)).sort((a, b) => b.getTime() - a.getTime())[0];
    const since = gone && gone > run.state_since ? gone : run.state_since;
    out.push({
      blocker: 'no_worker',
      subject_id: run.id,
      since,
      identity: `no_worker:${run.id}`,
      reason: `${what(run)} is queued on ${queueName(run.queue)} and no connected worker serves it${retried}`,
      who_can_act: WHO_ACTS.no_worker,
      next: run.queue === '' ? 'start a cairn serve or cairn worker for the default pool, or cancel the run' : `start cairn worker --queue ${run.queue}, or cancel the run and submit it to a served queue`,
      details: { queue: run.queue, eligible_workers: 0 },
    });
    return out;
  }
  const holder = facts.holderByQueue.get(run.queue);
  if (holder && holder.id !== run.id && waitingSeconds(run.state_since, facts.now) >= BLOCKED_GRACE_SECONDS) {
    out.push({
      blocker: 'blocked',
      subject_id: run.id,
      since: run.state_since,
      identity: `blocked:${run.id}`,
      reason: `${what(run)} waits for a slot: every worker serving ${queueName(run.queue)} is full${holder.readable ? `, run ${holder.id} holding one` : ''}${retried}`,
      who_can_act: WHO_ACTS.blocked,
      next: holder.readable ? `wait for run ${holder.id} to finish, or cancel it (POST /v1/runs/${holder.id}/cancel); or add a worker to the queue` : 'wait for the runs ahead of it, or add a worker to the queue',
      details: { queue: run.queue, holder_run_id: holder.readable ? holder.id : null, eligible_workers: live.length },
    });
  }
  return out;
}

/** The one-line summary an alert leads with. */
export function summaryOf(itemKind: string, itemId: string, blocker: Blocker, waiting: number): string {
  const noun = itemKind === 'run' ? 'Run' : itemKind.charAt(0).toUpperCase() + itemKind.slice(1);
  const minutes = waiting >= 120 ? `${Math.floor(waiting / 60)} minutes` : `${waiting} seconds`;
  return `${noun} ${itemId} needs attention: ${blocker} for ${minutes}`;
}
