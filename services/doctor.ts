import { liveTokenCount } from '../store/tokens';
import { boundOf, enforcementOf, RUN_BOUND_SETTINGS } from '../core/runs/run-bound-settings';
import { ANSIBLE_CORE_TESTED_RELEASES } from '../tools/ansible-inventory';
import { chainHead, verifiedPrefix } from '../store/audit';
import { lateEffects } from '../store/outbox';
import { databaseAnswers } from '../store/db';
import { failedDeliveries, orphanedAttachments, scheduledTemplatesWithRequiredQuestions, schedulesFiring } from '../store/doctor';
import { listWorkerPage, type ListedWorker } from '../store/workers';
import { listAttention } from './attention/attention';
import type { ServerContext } from './context';
import { signingKeyStorage } from './audit/install-identity';
import { unattendedGaps, UnattendedSurveyRefusal } from './runs/launch';

/**
 * The diagnostics check, `GET /v1/doctor` (spec part A 4.15; part A 2.6, 4.16; part B 6.3 rule 7,
 * 6.6, 9.5): the install's health facts and the findings other rules send here, each as one
 * check. A check that cannot be made (its store does not answer) fails, naming none of the cause
 * (the server log has it), and the others are still made. Nothing here writes, and the audit
 * chain is not read again: its verified prefix is reported as stored.
 */

export type Severity = 'info' | 'warning' | 'error';

export interface DoctorCheck {
  name: string;
  ok: boolean;
  /** How much a failed check matters: a failed `error` check makes the whole answer not ok. */
  severity: Severity;
  detail: string;
  /** Facts the check rests on, when it has some beyond its items. */
  facts?: Record<string, unknown>;
  /** The findings, the first ITEM_LIMIT of them, and how many there are in all. */
  count?: number;
  items?: unknown[];
}

export interface DoctorAnswer {
  ok: boolean;
  checked_at: string;
  checks: DoctorCheck[];
  ansible: { core_version: string | null; tested_releases: string[] };
}

/** Findings listed per check; `count` gives the whole number. */
export const ITEM_LIMIT = 100;
/** A delivery that failed this recently fails the check; older ones are still listed. */
const RECENT_FAILURE_DAYS = 7;
/** How long Temporal may take to answer before the check fails. */
const TEMPORAL_TIMEOUT_MS = 2000;

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** Every check, made at once; `ok` is false when any `error` check failed. */
export async function runDoctor(ctx: ServerContext): Promise<DoctorAnswer> {
  const checkedAt = new Date();
  const guarded = (name: string, severity: Severity, check: () => Promise<DoctorCheck>) =>
    check().catch((err: unknown): DoctorCheck => {
      ctx.logger.warn({ err, check: name }, 'a diagnostics check could not be made');
      return { name, ok: false, severity, detail: 'the check could not be made; the server log says why' };
    });
  // One probe of the ansible-core version (cached by the tool module), for the check and the answer.
  const coreVersion = ctx.execution.ansibleCore;
  const checks = await Promise.all([
    guarded('database', 'error', () => databaseCheck(ctx)),
    guarded('open_install', 'warning', () => openInstallCheck(ctx)),
    guarded('temporal', 'error', () => temporalCheck(ctx)),
    guarded('workers', 'error', () => workersCheck(ctx)),
    guarded('encryption_key', 'warning', async () => encryptionKeyCheck(ctx)),
    guarded('signing_key', 'warning', () => signingKeyCheck(ctx)),
    guarded('audit_chain', 'info', () => auditChainCheck(ctx)),
    guarded('ansible', 'warning', async () => ansibleCheck(coreVersion)),
    guarded('run_bounds', 'warning', () => runBoundsCheck(ctx)),
    guarded('attention_alerting', 'warning', () => attentionCheck(ctx)),
    guarded('notification_deliveries_failed', 'warning', () => failedDeliveriesCheck(ctx)),
    guarded('notification_attachments_orphaned', 'warning', () => orphanedAttachmentsCheck(ctx)),
    guarded('schedules_broken', 'warning', () => brokenSchedulesCheck(ctx)),
    guarded('owed_effects_late', 'warning', () => lateEffectsCheck(ctx)),
  ]);
  return {
    ok: checks.every((c) => c.ok || c.severity !== 'error'),
    checked_at: checkedAt.toISOString(),
    checks,
    ansible: { core_version: coreVersion, tested_releases: [...ANSIBLE_CORE_TESTED_RELEASES] },
  };
}

/** Whether the install runs open (--open and no token at all): said loudly, as a failed check. */
async function openInstallCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const name = 'open_install';
  if (!ctx.config.open) return { name, ok: true, severity: 'warning', detail: 'every /v1 request needs a token' };
  const live = await liveTokenCount(ctx.sql);
  if (live > 0) {
    return { name, ok: true, severity: 'warning', detail: `started with --open, but the install now holds ${plural(live, 'token')}: every /v1 request needs one; start without --open`, facts: { open_flag: true, open: false } };
  }
  return {
    name,
    ok: false,
    severity: 'warning',
    detail: 'THIS INSTALL IS OPEN (--open, and no token at all): every /v1 request without a token acts as its admin; anyone who can reach it controls it. Mint a token (cairn token create) to end it.',
    facts: { open_flag: true, open: true },
  };
}

async function databaseCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const ok = await databaseAnswers(ctx.sql);
  return { name: 'database', ok, severity: 'error', detail: ok ? 'PostgreSQL answers' : 'PostgreSQL does not answer within 2 seconds' };
}

async function temporalCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const name = 'temporal';
  try {
    const info = await ctx.temporal.connection.withDeadline(Date.now() + TEMPORAL_TIMEOUT_MS, () => ctx.temporal.workflowService.getSystemInfo({}));
    const version = info.serverVersion || null;
    return { name, ok: true, severity: 'error', detail: `Temporal answers${version ? ` (server ${version})` : ''}`, facts: { server_version: version, namespace: ctx.temporal.options.namespace } };
  } catch (err) {
    ctx.logger.warn({ err }, 'the diagnostics check could not reach Temporal');
    return { name, ok: false, severity: 'error', detail: `Temporal does not answer within ${TEMPORAL_TIMEOUT_MS / 1000} seconds; runs, schedules and deliveries wait for it` };
  }
}

/** Workers per queue, with lease freshness judged as `GET /v1/workers` judges it. */
async function workersCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const all: ListedWorker[] = [];
  for (let offset = 0; ; offset += 1000) {
    const page = await listWorkerPage(ctx.sql, { limit: 1000, offset });
    all.push(...page.rows);
    if (page.rows.length < 1000 || all.length >= page.total) break;
  }
  const queues = new Map<string, { queue: string; fresh: number; lost: number; last_renewed_at: Date | null }>();
  for (const w of all) {
    const q = queues.get(w.queue) ?? { queue: w.queue, fresh: 0, lost: 0, last_renewed_at: null };
    if (w.lost) q.lost += 1;
    else q.fresh += 1;
    if (!q.last_renewed_at || w.renewed_at > q.last_renewed_at) q.last_renewed_at = w.renewed_at;
    queues.set(w.queue, q);
  }
  if (!queues.has('')) queues.set('', { queue: '', fresh: 0, lost: 0, last_renewed_at: null });
  const items = [...queues.values()].sort((a, b) => a.queue.localeCompare(b.queue));
  const defaultFresh = queues.get('')!.fresh;
  const without = items.filter((q) => q.queue !== '' && q.fresh === 0).map((q) => q.queue);
  const detail =
    (defaultFresh > 0 ? `${plural(defaultFresh, 'worker')} with a fresh lease on the default queue` : 'no worker with a fresh lease on the default queue: runs wait pending') +
    (without.length ? `; no fresh worker on ${without.join(', ')}` : '');
  return { name: 'workers', ok: defaultFresh > 0, severity: 'error', detail, count: items.length, items: items.slice(0, ITEM_LIMIT) };
}

function encryptionKeyCheck(ctx: ServerContext): DoctorCheck {
  const ok = ctx.sealer !== undefined;
  return {
    name: 'encryption_key',
    ok,
    severity: 'warning',
    detail: ok
      ? 'SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT are set: secrets are sealed at rest'
      : 'SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT are not set: whatever needs sealing (credentials, secret survey defaults, target secrets, callback keys) is refused',
  };
}

async function signingKeyCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const storage = await signingKeyStorage(ctx.sql);
  const detail = {
    sealed: "the install's signing key is sealed under the encryption key",
    clear: "the install's signing key is kept in clear in the database: whoever reads the settings table can sign as the install; start with SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT to seal it",
    missing: "the install's signing key has not been made yet",
  }[storage];
  return { name: 'signing_key', ok: storage === 'sealed', severity: 'warning', detail, facts: { storage, key_id: ctx.identity.keyId } };
}

/** The stored verified prefix against the chain's length; the chain is not hashed here. */
async function auditChainCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const [prefix, head] = await Promise.all([verifiedPrefix(ctx.sql), chainHead(ctx.sql)]);
  const length = Number(head?.seq ?? 0);
  const verified = Number(prefix.size);
  return {
    name: 'audit_chain',
    ok: true,
    severity: 'info',
    detail: `${plural(verified, 'entry', 'entries')} of ${length} known to verify; GET /v1/audit/verify checks the rest`,
    facts: { length, verified_size: verified, unverified: Math.max(0, length - verified), verified_at: prefix.verified_at },
  };
}

function ansibleCheck(version: string | null): DoctorCheck {
  const tested = version !== null && ANSIBLE_CORE_TESTED_RELEASES.some((r) => version === r || version.startsWith(`${r}.`));
  const detail =
    version === null
      ? "ansible-inventory is not on this server: an ansible run submitted here is refused, and inventory previews use Cairn's own reading"
      : tested
        ? `ansible-core ${version}, a tested release`
        : `ansible-core ${version} is not among the tested releases (${ANSIBLE_CORE_TESTED_RELEASES.join(', ')})`;
  return { name: 'ansible', ok: tested, severity: 'warning', detail };
}

/**
 * The bounds every run's sandbox holds on this server (--run-memory, --run-pids, --run-cpu,
 * --run-disk) and how each is enforced here: by a cgroup (v2 or v1), or only by the rlimits
 * below them (runtime/run-bounds.ts), which is a finding.
 */
async function runBoundsCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const { config, execution } = ctx;
  const values = { memoryBytes: config.runMemory, pids: config.runPids, diskBytes: config.runDisk, cpu: config.runCpu };
  const unbounded = 'none (--run-isolation none)';
  const by = execution.sandboxed ? enforcementOf(execution.cgroups) : { memory: unbounded, process: unbounded, cpu: unbounded, disk: unbounded };
  const bounds = [
    { ...boundOf('memory', values), value: config.runMemory, enforced_by: by.memory },
    { ...boundOf('process', values), value: config.runPids, enforced_by: by.process },
    { bound: 'cpu', flag: RUN_BOUND_SETTINGS.runCpu.flag, limit: plural(config.runCpu, 'core'), value: config.runCpu, enforced_by: by.cpu },
    { ...boundOf('disk', values), value: config.runDisk, enforced_by: by.disk },
  ];
  const enforcement = !execution.sandboxed ? 'none' : execution.cgroups ? `cgroup ${execution.cgroups.version}` : 'rlimits only';
  const listed = bounds.map((b) => `${b.bound} ${b.limit} (${b.flag}): ${b.enforced_by}`).join('; ');
  const ok = execution.sandboxed && Boolean(execution.cgroups?.controllers.memory && execution.cgroups.controllers.pids);
  const reason = execution.cgroupsReason;
  const detail = !execution.sandboxed
    ? 'runs are not sandboxed (--run-isolation none), and no bound holds them'
    : ok
      ? `runs are bounded by ${enforcement}: ${listed}`
      : `only rlimits hold some bounds of runs here (${listed}): a memory bound is then an address-space limit and a process bound counts every process of the run account` +
        (reason ? `; no cgroup could be made: ${reason}` : '');
  return { name: 'run_bounds', ok, severity: 'warning', detail, facts: { enforcement, bounds, ...(reason ? { reason } : {}) } };
}

/** Attention items past `alert_after_seconds` (spec part B 6.6), as `GET /v1/attention` finds them. */
async function attentionCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const answer = await listAttention(ctx, { limit: Number.MAX_SAFE_INTEGER, offset: 0 });
  const alerting = answer.items.filter((i) => i.alerting);
  return {
    name: 'attention_alerting',
    ok: alerting.length === 0,
    severity: 'warning',
    detail: alerting.length ? `${plural(alerting.length, 'item')} waited past the threshold` : 'no item waits past its threshold',
    facts: { counts: answer.counts, thresholds: answer.thresholds },
    count: alerting.length,
    items: alerting.slice(0, ITEM_LIMIT).map((i) => ({
      id: i.id,
      kind: i.kind,
      blocker: i.blocker,
      since: i.since,
      waiting_seconds: i.waiting_seconds,
      alert_after_seconds: i.alert_after_seconds,
      alert_id: i.alert_id,
      reason: i.reason,
      who_can_act: i.who_can_act,
      path: i.path,
    })),
  };
}

/** Deliveries kept as failed once their attempts ran out, or refused for good (spec part B 6.3 rule 7). */
async function failedDeliveriesCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const found = await failedDeliveries(ctx.sql, ITEM_LIMIT, RECENT_FAILURE_DAYS);
  return {
    name: 'notification_deliveries_failed',
    ok: found.recent === 0,
    severity: 'warning',
    detail: found.total
      ? `${plural(found.total, 'delivery', 'deliveries')} kept as failed, ${found.recent} in the last ${RECENT_FAILURE_DAYS} days`
      : 'no delivery kept as failed',
    facts: { failed_last_7_days: found.recent },
    count: found.total,
    items: found.rows,
  };
}

/** Attachments whose object or target is gone (spec part A 4.16). */
async function orphanedAttachmentsCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const found = await orphanedAttachments(ctx.sql, ITEM_LIMIT);
  return {
    name: 'notification_attachments_orphaned',
    ok: found.total === 0,
    severity: 'warning',
    detail: found.total ? `${plural(found.total, 'attachment')} whose object or target is gone` : 'every attachment names an object and a target that exist',
    count: found.total,
    items: found.rows.map((a) => ({
      id: a.id,
      target_id: a.target_id,
      object_kind: a.object_kind,
      object_id: a.object_id,
      event: a.event,
      gone: [...(a.object_gone ? ['object'] : []), ...(a.target_gone ? ['target'] : [])],
      created_at: a.created_at,
    })),
  };
}

/**
 * Enabled schedules whose next fire cannot launch (spec part A 2.6): the template's survey has a
 * required question an unattended fill leaves unanswered (the launch's own rule), or the template
 * is gone.
 */
async function brokenSchedulesCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const gaps = new Map<string, string[]>();
  for (const template of await scheduledTemplatesWithRequiredQuestions(ctx.sql)) {
    const missing = unattendedGaps(template);
    if (missing.length) gaps.set(template.id, missing);
  }
  const found = await schedulesFiring(ctx.sql, [...gaps.keys()], ITEM_LIMIT);
  return {
    name: 'schedules_broken',
    ok: found.total === 0,
    severity: 'warning',
    detail: found.total ? `${plural(found.total, 'enabled schedule')} whose next fire cannot launch its template` : 'every enabled schedule can launch its template unattended',
    count: found.total,
    items: found.rows.map((s) => {
      const questions = gaps.get(s.template_id) ?? [];
      return {
        schedule_id: s.id,
        schedule_name: s.name,
        template_id: s.template_id,
        next_fire_at: s.next_fire_at,
        reason: s.template_gone ? `template ${s.template_id}, which this schedule fires, no longer exists` : new UnattendedSurveyRefusal(questions).message,
        questions,
        path: `/v1/schedules/${s.id}`,
      };
    }),
  };
}

/** What counts as late for an owed effect: the writer's grace, a lease and several backoffs past. */
const LATE_EFFECT_SECONDS = 300;

/**
 * Effects owed for long (services/outbox.ts): a workflow start, cancel, signal, hand-off or event
 * recording the dispatchers keep failing to carry out, each with its last error.
 */
async function lateEffectsCheck(ctx: ServerContext): Promise<DoctorCheck> {
  const found = await lateEffects(ctx.sql, LATE_EFFECT_SECONDS);
  return {
    name: 'owed_effects_late',
    ok: found.count === 0,
    severity: 'warning',
    detail: found.count
      ? `${plural(found.count, 'owed effect')} not carried out within ${LATE_EFFECT_SECONDS / 60} minutes; Temporal or the store may be failing (the server log has each attempt)`
      : 'every owed effect was carried out in time',
    count: found.count,
    items: found.oldest.map((e) => ({ effect: e.effect, subject: e.subject, owed_since: e.created_at.toISOString(), attempts: e.attempts, last_error: e.last_error })),
  };
}
