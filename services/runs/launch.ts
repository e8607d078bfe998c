import { DomainError, badRequest, conflict } from '../../core/errors';
import { encryptionKeyRequired } from '../../core/runs/run-secrets';
import { checkAnswers, requireStoredPatterns, secretFieldVars, unansweredRequired } from '../../core/runs/survey';
import { splitGraph } from '../../core/runs/workflow-graph';
import type { Template } from '../../store/templates';
import type { Caller } from '../../store/tokens';
import { requireAccess } from '../access/access';
import { withholdFields, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { projectForLaunch } from '../projects';
import { submitRun, type RunRequest, type StartLater } from './runs';
import { requireCredentialsUsable } from '../credentials';
import { openTemplateDefault, sealedDefaultsOf, surveyFieldsOf } from './templates';
import type { Run, RunSourceKind } from '../../core/runs/run';
import { ansibleSpecOf, type AnsibleInput } from '../../core/ansible/ansible-spec';
import { getAccountById, type Account } from '../../store/accounts';
import type { Db } from '../../store/db';
import { launchFactCache } from '../ansible/facts';
import type { Hold } from '../../core/runs/policy-gate';

/** A job as asked for: one tool and command, run once or split into shards. */
export interface Job {
  tool: string;
  command: string;
  extraVars: Record<string, unknown>;
  dryRun?: boolean;
  queue: string;
  timeout?: number;
  shards?: number | null;
  templateId?: string;
  /** The ansible tool's fields (spec part A 2.1, 2.2); kept for the ansible tool only. */
  ansible?: AnsibleInput;
}

/**
 * The run a job makes (spec part A 2.1): one run, or with two or more shards a split, one parent
 * and one shard run per index. Submitting a run and launching a job template both make it here.
 */
export function jobRequest(job: Job): RunRequest {
  const spec = {
    command: job.command,
    extra_vars: job.extraVars,
    ...(job.dryRun ? { dry_run: true as const } : {}),
    ...ansibleSpecOf(job.tool, job.ansible),
  };
  const split = job.shards != null && job.shards >= 2;
  return {
    tool: job.tool,
    spec,
    queue: job.queue,
    timeout: job.timeout,
    ...(job.templateId ? { templateId: job.templateId } : {}),
    ...(split ? { kind: 'split' as const, steps: splitGraph(job.tool, job.command, job.shards!) } : {}),
  };
}

export interface LaunchOptions {
  /** The survey answers, keyed by var (spec part A 2.4 rule 1); absent is none. */
  answers?: unknown;
  /** Extra vars the firing brings (a push's branch and commit), over the template's, under the answers. */
  extraVars?: Record<string, unknown>;
  /** What fires the template, when not a person or agent through the API. */
  source?: { kind: RunSourceKind; id: string };
  /** Seconds; may lower the template's timeout, never raise it. Zero or absent keeps the template's. */
  timeout?: number;
  idempotencyKey?: string;
  /** The hosts the run is kept to (spec part A 2.2 `limit`); a provisioning callback sets the calling host. */
  limit?: string;
  /** Credentials a launch adds, each one of the template's `selectable_credentials`; the caller needs use on each. */
  credentials?: string[];
  /** The change label the run carries (spec part A 2.1, 2.13); absent is none. */
  change?: string;
  /**
   * The commit of the template's project the run works at, in place of the one its checkout holds
   * now: a pull request's head, or the commit a saved plan was made at. Ignored without a project.
   */
  projectCommit?: string;
  /** A dry run of a job template (a terraform plan, an ansible check): the tool's dry run. */
  dryRun?: boolean;
  /** Held for approval whatever the policies say, with this hold (a drift reconcile's proposal). */
  hold?: Hold;
  /** The run's workflow started later, off the launcher's path (a schedule fire's). */
  startLater?: StartLater;
}

/**
 * The one way a template fires (spec part A 2.3, 2.4, 2.5): the launch route calls it, and
 * schedules and triggers are to call it too rather than copy it.
 *
 * 0. The caller must hold use on the template (services/access.ts): an admin, its owner, an
 *    admin of its organization, or a use or manage grant to the caller or a team of its. An
 *    unattended launch is checked as its owner, so a schedule or trigger never launches what its
 *    owner may not. (A run on a named queue needs use on the queue too, checked in submitRun.)
 * 1. The answers are checked against the survey before anything is submitted: a violation is a
 *    400 naming `answers.<var>` and no run exists. A survey saved with a pattern that is not RE2
 *    syntax (before patterns had to be) is refused first, 409 naming `survey[i].pattern`. Every
 *    secret answer (`answers.<var>` of a secret question) is withheld from the request's
 *    fingerprint here, where the survey is known, so every way a template fires withholds it.
 * 2. Extra vars are the template's `extra_vars` with the non-secret answers (and non-secret
 *    defaults) merged over them.
 * 3. Secret answers, and for an unanswered secret question the template's sealed default, never
 *    become plain extra vars: they go to submitRun as `secrets`, which seals them to the run and
 *    to each step or shard that runs a tool; the tool gets them as extra vars at execution and
 *    its output masker hides them. A template extra var of the same name is left off the run, so
 *    no read shows a value the tool will not see.
 * 4. The run's timeout is the template's (zero: the server's `--run-timeout`); a launch may ask for
 *    less, never more (400 naming `timeout`).
 * 5. A job template becomes a run, or a split when it has two or more shards; a workflow template
 *    becomes a workflow run of its steps, every step receiving the extra vars and secrets.
 */
export async function launchTemplate(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  template: Template,
  options: LaunchOptions = {},
): Promise<{ run: Run; created: boolean }> {
  await requireAccess(ctx.sql, caller, template.id, 'use', { action: `launching template ${template.id}` });
  const credentials = await launchCredentials(ctx, caller, template, options.credentials ?? []);
  const fields = surveyFieldsOf(template.survey);
  withholdFields(origin, secretFieldVars(fields).map((name) => `answers.${name}`));
  requireStoredPatterns(fields, template.id);
  const sealedDefaults = sealedDefaultsOf(template.survey);
  const checked = checkAnswers(fields, options.answers, { secretDefaults: sealedDefaults.keys() });

  const timeout = launchTimeout(ctx, template, options.timeout);

  const secretVars = new Set(secretFieldVars(fields));
  const answered: Record<string, unknown> = {};
  const secrets: Record<string, string> = {};
  for (const [name, value] of Object.entries(checked.extraVars)) {
    if (secretVars.has(name)) secrets[name] = value as string;
    else answered[name] = value;
  }
  const needed = [...Object.keys(secrets), ...checked.secretVars];
  if (needed.length && !ctx.sealer) throw encryptionKeyRequired('the secret answer', needed);
  for (const name of checked.secretVars) secrets[name] = openTemplateDefault(ctx.sealer, template, name, sealedDefaults.get(name)!);

  const base = Object.fromEntries(Object.entries({ ...template.extra_vars, ...options.extraVars }).filter(([name]) => !(name in secrets)));
  const extraVars = { ...base, ...answered };

  const request: RunRequest =
    template.kind === 'workflow'
      ? {
          kind: 'workflow',
          tool: 'workflow',
          spec: { command: '', extra_vars: extraVars },
          steps: template.steps ?? [],
          queue: template.queue,
          timeout,
          templateId: template.id,
        }
      : jobRequest({
          tool: template.tool!,
          // An ansible template may name only its playbook.
          command: template.command ?? '',
          extraVars,
          queue: template.queue,
          timeout,
          shards: template.shards,
          templateId: template.id,
          dryRun: options.dryRun,
          ansible: { ...(template.ansible ?? {}), inventory_id: template.inventory_id },
        });
  if (Object.keys(secrets).length) request.secrets = secrets;
  if (options.source) request.source = options.source;
  if (credentials.length) request.credentials = credentials;
  // The run works in a copy of the template's git project at the commit its checkout holds now (spec part A 4.5).
  if (template.project_id && template.kind === 'job') request.spec = { ...request.spec, project: await projectForLaunch(ctx.sql, template.project_id, options.projectCommit) };
  if (options.limit !== undefined) request.spec = { ...request.spec, limit: options.limit };
  // The template's fact cache (services/facts.ts) and the launch's change label (services/changes.ts).
  if (template.kind === 'job') request.spec = { ...request.spec, ...launchFactCache(template) };
  if (options.change !== undefined) request.spec = { ...request.spec, change: options.change };
  if (options.hold) request.hold = options.hold;
  return submitRun(ctx, caller, origin, request, options.idempotencyKey, options.startLater);
}

/** What fires a template with nobody to answer it: a schedule, a webhook trigger, a provisioning callback. */
export interface UnattendedFire {
  kind: 'schedule' | 'trigger' | 'callback';
  id: string;
  /** A word for the run's requester to show, such as the schedule's name. */
  name: string;
  /** The account it fires as: the schedule's or trigger's owner, bounded by that account's rights. */
  owner: Account;
  /** Whether the owner made it through an agent token: its runs are then held like the agent's own. */
  actorKind: 'user' | 'agent';
}

/**
 * The account an unattended fire acts as (a schedule's saver, a trigger's creator, a callback key's
 * minter), while it may still submit runs: one that is gone, or is now a viewer, makes the fire a
 * configuration error someone must fix (409, spec part B 7.3), said alike for every kind of fire.
 * `who` names the account's part (`the account that saved this schedule`), `fix` what makes it fire again.
 */
export async function firingOwner(db: Db, ownerId: string, who: string, fix: string): Promise<Account> {
  const owner = await getAccountById(db, ownerId);
  if (!owner) throw conflict(`${who} no longer exists; ${fix}`);
  if (owner.role === 'viewer') throw conflict(`${who}, ${owner.username}, is now a viewer and may not submit runs; ${fix}`);
  return owner;
}

/**
 * A survey nobody can answer unattended (spec part A 2.4 rules 5, 6): a required question with no
 * default. Each caller records the refusal where 2.4 rule 6 says, naming `questions`.
 */
export class UnattendedSurveyRefusal extends DomainError {
  constructor(readonly questions: string[]) {
    super('conflict', `this template cannot launch unattended: the required question${questions.length > 1 ? 's' : ''} ${questions.join(', ')} ${questions.length > 1 ? 'have' : 'has'} no default`, {
      questions,
    });
  }
}

/**
 * The required questions of a template's survey that an unattended fill leaves unanswered (no
 * default; for a secret question, no sealed default): what refuses an unattended launch, and what
 * the diagnostics check reports on an enabled schedule before it fires. Empty when it can fire.
 */
export function unattendedGaps(template: Pick<Template, 'survey'>): string[] {
  return unansweredRequired(surveyFieldsOf(template.survey), { secretDefaults: sealedDefaultsOf(template.survey).keys() });
}

/**
 * Fires a template unattended, through the one launch function and the approval gate like any
 * launch: the survey is filled from its defaults (a required question with no default refuses
 * the fire with UnattendedSurveyRefusal, and no run exists), the run records what fired it.
 */
export async function launchUnattended(
  ctx: ServerContext,
  origin: AuditOrigin,
  template: Template,
  fire: UnattendedFire,
  options: Pick<LaunchOptions, 'extraVars' | 'idempotencyKey' | 'limit' | 'dryRun' | 'projectCommit' | 'startLater'> = {},
): Promise<{ run: Run; created: boolean }> {
  const missing = unattendedGaps(template);
  if (missing.length) throw new UnattendedSurveyRefusal(missing);
  return launchTemplate(ctx, unattendedCaller(fire), origin, template, { ...options, answers: {}, source: { kind: fire.kind, id: fire.id } });
}

/**
 * Who an unattended fire submits as: its owner's account, through a token standing for the
 * schedule, trigger or callback (its id, named after it), of the kind the owner made it with, so
 * the approval gate judges the fire as it would the owner's own run. A schedule that fires a run,
 * split or pipeline submits it with this caller too.
 */
export function unattendedCaller(fire: UnattendedFire): Caller {
  return {
    account: fire.owner,
    token: {
      id: fire.id,
      account_id: fire.owner.id,
      name: `${fire.kind} ${fire.name}`,
      kind: fire.actorKind,
      created_by: fire.owner.username,
      created_by_type: fire.actorKind,
      created_at: new Date(0),
      expires_at: null,
      last_used_at: null,
    },
  };
}

/**
 * The timeout a launch runs with, in seconds (zero: the server default). A launch may lower the
 * template's timeout, never raise it; with neither the template nor the server setting a limit,
 * any launch timeout lowers it.
 */
function launchTimeout(ctx: ServerContext, template: Template, asked: number | undefined): number {
  if (asked === undefined || asked === 0) return template.timeout_seconds;
  const ceiling = template.timeout_seconds > 0 ? template.timeout_seconds : ctx.config.runTimeout;
  if (ceiling > 0 && asked > ceiling) {
    const whose = template.timeout_seconds > 0 ? "the template's timeout" : "the server's --run-timeout, which this template uses";
    throw badRequest(`timeout: a launch may lower the run's timeout but not raise it; ${asked} s is above ${whose} (${ceiling} s)`, { field: 'timeout' });
  }
  return asked;
}

/**
 * The credentials a launch gives its run (spec part A 4.6): the template's `credentials`, then
 * those the launch picks, each one of the template's `selectable_credentials` (400 naming
 * `credentials[i]` otherwise) and used by the caller's own `use` grant. Whether each is ready (its
 * secret set and opening here) is checked in submitRun, as for every run.
 */
async function launchCredentials(ctx: ServerContext, caller: Caller, template: Template, picked: string[]): Promise<string[]> {
  for (const [i, id] of picked.entries()) {
    if (!(template.selectable_credentials ?? []).includes(id)) {
      const offered = template.selectable_credentials?.length ? `: it offers ${template.selectable_credentials.join(', ')}` : '; it offers none';
      throw badRequest(`credentials[${i}]: credential ${id} is not one template ${template.id} lets a launch pick${offered}`, { field: `credentials[${i}]` });
    }
  }
  await requireCredentialsUsable(ctx.sql, caller, picked, 'credentials');
  return [...(template.credentials ?? []), ...picked];
}
