import { templateSecretContext } from '../../core/credentials/seal-contexts';
import { canonicalJson } from '../../core/audit/canonical';
import { saveTemplateFactCache } from '../ansible/facts';
import { badRequest, conflict, notFound } from '../../core/errors';
import { newId } from '../../core/ids';
import { ENCRYPTION_SETTINGS, encryptionKeyRequired, sealedValueFault } from '../../core/runs/run-secrets';
import type { Sealer } from '../../core/credentials/seal';
import { mergeSecretDefaultEdit, parseSurvey, redactSurvey, type SurveyField } from '../../core/runs/survey';
import type { StepDefinition } from '../../core/runs/workflow-graph';
import { isUniqueViolation } from '../../store/db';
import { deleteGrantsOn } from '../../store/access';
import type { Db } from '../../store/db';
import {
  deleteTemplate,
  getTemplate,
  getTemplateForUpdate,
  insertTemplate,
  updateTemplate,
  type StoredSurveyField,
  type Template,
  type TemplateFields,
} from '../../store/templates';
import { deleteCallbackKey, setTemplateExtras } from '../../store/callbacks';
import { bindExternalJobTemplate } from '../../store/imports';
import type { Caller } from '../../store/tokens';
import { requireRunnableTool } from '../../tools/registry';
import { requireAccess } from '../access/access';
import { recordMutation, withholdFields, type AuditOrigin } from '../audit/audit';
import { entriesView, type StoredEntry } from '../../core/notifications/notification-kinds';
import { deleteWithAttachments, storedEntries, withholdEntrySecrets, type EntryInput } from '../notifications/notifications';
import type { ServerContext } from '../context';
import { saveTemplateCredentials } from '../credentials';
import { requireOrgPlacement } from '../access/groups';
import { requireInventoryUse } from '../ansible/inventories';
import { ansibleSpecOf, ansibleView } from '../../core/ansible/ansible-spec';
import { requireQueueAllowed } from '../access/licensing';

/**
 * Templates: saving them, their survey storage and views (spec part A 2.3, 2.4 rule 3; part B 8).
 * A secret field's default is sealed when saved, with context `template:<template id>:<var>`, and
 * kept as `default_sealed` beside the field with `default_sealed_by`, the id of the account that
 * set it; `default` is never stored for a secret field. Every read shows `[redacted]` in its
 * place, an admin's included. An edit that changes what a template runs clears the sealed
 * defaults the editor did not set, unless an admin edits (`storedSurvey`).
 */


/** The survey as core/survey.ts reads it: sealed defaults and their setters left out. */
export function surveyFieldsOf(stored: readonly StoredSurveyField[]): SurveyField[] {
  return stored.map(({ default_sealed: _sealed, default_sealed_by: _by, ...field }) => field as SurveyField);
}

/** The secret fields' sealed defaults, by var. */
export function sealedDefaultsOf(stored: readonly StoredSurveyField[]): Map<string, string> {
  return new Map(stored.filter((f) => f.type === 'secret' && f.default_sealed !== undefined).map((f) => [f.var, f.default_sealed!]));
}

export type SecretDefaultChange = 'set' | 'kept' | 'replaced' | 'cleared';

/**
 * Why a stored secret default was cleared:
 * - `edit`: the edit sent `""` for it, or no default;
 * - `question_removed`: the edit left out the question, or made it a question that is not secret;
 * - `run_changed`: the edit changed what the template runs, and the editor neither set this
 *   default nor is an admin (see `storedSurvey`).
 */
export type SecretDefaultClearReason = 'edit' | 'question_removed' | 'run_changed';

/** Who saves a template: the rule on other accounts' sealed defaults needs to know. */
export interface TemplateEditor {
  accountId: string;
  username: string;
  admin: boolean;
}

/** What an update starts from. */
export interface PreviousSurvey {
  survey: readonly StoredSurveyField[];
  /** The template's creator (a username): the setter of a stored default that names none. */
  createdBy: string;
  /** Whether the update changes what the template runs (`changesWhatRuns`). */
  runChanged: boolean;
}

/**
 * Whether an update changes what the template runs: its kind, tool, command, shards or steps.
 * Name, queue, timeout, extra vars and the survey itself do not count.
 */
export function changesWhatRuns(current: Template, next: Pick<TemplateFields, 'kind' | 'tool' | 'command' | 'shards' | 'steps'>): boolean {
  return (
    current.kind !== next.kind ||
    current.tool !== next.tool ||
    current.command !== next.command ||
    current.shards !== next.shards ||
    !sameJson(current.steps, next.steps)
  );
}

function sameJson(a: unknown, b: unknown): boolean {
  try {
    return canonicalJson(a ?? null) === canonicalJson(b ?? null);
  } catch {
    // A value canonical JSON refuses counts as changed: the safe side for the rule above.
    return false;
  }
}

/**
 * The survey to store for a create (`previous` undefined) or an update: each secret field's
 * default sealed, kept, replaced or cleared by the edit rule (`[redacted]` keeps, a new value
 * replaces, "" or omitted clears). Also says, by var, what happened to each secret default and
 * why each cleared one was, for the answer and the audit entry (names and reasons only). Sealing
 * without a sealer is a 409 naming the vars and the settings.
 *
 * A sealed default opens into the run of whatever the template runs. So an update that changes
 * what it runs clears every sealed default the editor did not set (reason `run_changed`), even
 * one sent back as `[redacted]`, unless the editor is an admin: otherwise an operator could point
 * another account's secret at a command that prints it. A default with no recorded setter (stored
 * before setters were) counts as set by the template's creator.
 */
export function storedSurvey(
  sealer: Sealer | undefined,
  templateId: string,
  fields: readonly SurveyField[],
  editor: TemplateEditor,
  previous?: PreviousSurvey,
): { survey: StoredSurveyField[]; changes: Record<string, SecretDefaultChange>; cleared: Record<string, SecretDefaultClearReason> } {
  const before = new Map((previous?.survey ?? []).filter((f) => f.type === 'secret' && f.default_sealed !== undefined).map((f) => [f.var, f]));
  const setByEditor = (stored: StoredSurveyField) =>
    stored.default_sealed_by !== undefined ? stored.default_sealed_by === editor.accountId : previous?.createdBy === editor.username;
  const mayKeep = (stored: StoredSurveyField) => !previous?.runChanged || editor.admin || setByEditor(stored);

  const edits = fields.map((field, i) =>
    field.type === 'secret' ? mergeSecretDefaultEdit(before.get(field.var)?.default_sealed, field.default, `survey[${i}].default`) : undefined,
  );
  const toSeal = fields.filter((_, i) => edits[i]?.action === 'replace').map((f) => f.var);
  if (toSeal.length && !sealer) throw encryptionKeyRequired('the secret default', toSeal);

  const changes: Record<string, SecretDefaultChange> = {};
  const cleared: Record<string, SecretDefaultClearReason> = {};
  const survey = fields.map((field, i): StoredSurveyField => {
    const edit = edits[i];
    if (!edit) return { ...field };
    const { default: _clear, ...rest } = field;
    const stored = before.get(field.var);
    switch (edit.action) {
      case 'keep':
        if (!mayKeep(stored!)) {
          changes[field.var] = 'cleared';
          cleared[field.var] = 'run_changed';
          return rest;
        }
        changes[field.var] = 'kept';
        return { ...rest, default_sealed: edit.sealed, ...(stored!.default_sealed_by !== undefined ? { default_sealed_by: stored!.default_sealed_by } : {}) };
      case 'replace':
        changes[field.var] = stored ? 'replaced' : 'set';
        return {
          ...rest,
          default_sealed: sealer!.seal(edit.plaintext, templateSecretContext(templateId, field.var)),
          default_sealed_by: editor.accountId,
        };
      case 'clear':
        if (stored) {
          changes[field.var] = 'cleared';
          cleared[field.var] = 'edit';
        }
        return rest;
    }
  });
  const stillSecret = new Set(fields.filter((f) => f.type === 'secret').map((f) => f.var));
  for (const name of before.keys()) {
    if (!stillSecret.has(name)) {
      changes[name] = 'cleared';
      cleared[name] = 'question_removed';
    }
  }
  return { survey, changes, cleared };
}

/** Opens a template's sealed default for a launch; 409 naming the var and the fix when it does not open. */
export function openTemplateDefault(sealer: Sealer | undefined, template: Pick<Template, 'id'>, name: string, sealed: string): string {
  const what = `the sealed default of the secret question ${name} of template ${template.id}`;
  if (!sealer) throw encryptionKeyRequired('the secret default', [name]);
  try {
    return sealer.open(sealed, templateSecretContext(template.id, name));
  } catch (err) {
    throw conflict(sealedValueFault(what, sealer, err), { variable: name, settings: [...ENCRYPTION_SETTINGS] });
  }
}

/**
 * Parses a request's survey (absent or null is none) and withholds each secret field's default
 * (`survey[i].default`, the type read after its alias) from the request's fingerprint: only the
 * parsed survey knows which defaults are secret, so the parse that learns it withholds them.
 */
export function parseTemplateSurvey(input: unknown, origin: AuditOrigin): SurveyField[] {
  const fields = input === undefined || input === null ? [] : parseSurvey(input);
  withholdFields(origin, secretDefaultPaths(fields));
  return fields;
}

/** The body paths of the secret fields' defaults, by position in the survey as sent. */
export function secretDefaultPaths(fields: readonly SurveyField[]): string[] {
  return fields.flatMap((field, i) => (field.type === 'secret' ? [`survey[${i}].default`] : []));
}

/** Every tool a template names must be one this server runs; the 400 names the field. */
export async function requireTemplateTools(tool: string | null, steps: readonly StepDefinition[] | null): Promise<void> {
  const check = async (name: string, field: string) => {
    try {
      await requireRunnableTool(name);
    } catch (err) {
      const message = (err as Error).message;
      throw badRequest(field === 'tool' ? message : `${field}: ${message}`, { field });
    }
  };
  if (tool !== null) await check(tool, 'tool');
  for (const [i, step] of (steps ?? []).entries()) {
    if (step.type !== 'approval' && step.tool !== undefined) await check(step.tool, `steps[${i}].tool`);
  }
}

/** A template as every read shows it: secret defaults as `[redacted]`, RFC 3339 times. */
export function templateView(template: Template) {
  const fields = surveyFieldsOf(template.survey);
  return {
    id: template.id,
    name: template.name,
    kind: template.kind,
    tool: template.tool,
    command: template.command,
    extra_vars: template.extra_vars,
    queue: template.queue,
    timeout: template.timeout_seconds,
    shards: template.shards,
    // Its stored inventory, and an ansible template's playbook and controls (spec part A 2.2, 2.3).
    ...(({ inventory: _path, ...fields }) => fields)(
      ansibleView({ ...(template.ansible ?? {}), ...(template.inventory_id ? { inventory_id: template.inventory_id } : {}) }),
    ),
    survey: redactSurvey(fields, { secretDefaults: sealedDefaultsOf(template.survey).keys() }),
    steps: template.steps,
    // A template's own channels, URLs and keys masked (spec part A 2.11 rule 3).
    notifications: entriesView(template.notifications as StoredEntry[]),
    // The git project its runs work in (spec part A 4.5) and provisioning callbacks (2.3, 4.6).
    project_id: template.project_id,
    allow_callbacks: template.allow_callbacks,
    callback_limit: template.callback_limit,
    // The fact cache (spec part A 2.3; services/facts.ts).
    use_fact_cache: template.use_fact_cache ?? false,
    fact_cache_timeout: template.fact_cache_timeout ?? 0,
    external_job_template_id: template.external_job_template_id,
    external_callback: template.external_callback,
    external_callback_called_at: template.external_callback_called_at?.toISOString() ?? null,
    // Credential ids only (spec part A 4.6): every launch uses `credentials`, a launch may add `selectable_credentials`.
    credentials: template.credentials ?? [],
    selectable_credentials: template.selectable_credentials ?? [],
    owner_id: template.owner_id,
    org_id: template.org_id,
    created_by: template.created_by,
    created_at: template.created_at.toISOString(),
    updated_at: template.updated_at.toISOString(),
  };
}

export type TemplateView = ReturnType<typeof templateView>;

/** A template write as parsed from its body: every field as sent (absent or null is the default). */
export interface TemplateDraft {
  name: string;
  tool?: string | null;
  command?: string | null;
  extra_vars?: Record<string, unknown> | null;
  queue?: string | null;
  timeout?: number | null;
  shards?: number | null;
  /** Read by `parseTemplateSurvey`, which withholds its secret defaults from the fingerprint. */
  survey: SurveyField[];
  /** A workflow template's checked graph; null for a job template. */
  steps: StepDefinition[] | null;
  /** The template's own notification entries, secrets in clear as sent (sealed when stored). */
  notifications?: EntryInput[] | null;
  /** The organization that owns it, whose admins then manage it. */
  org_id?: string | null;
  /** A stored inventory its runs use (needs use on it); absent or null is none. */
  inventory_id?: string | null;
  /** The ansible tool's playbook and controls (spec part A 2.2); kept for the ansible tool only. */
  playbook?: string | null;
  limit?: string | null;
  tags?: string[] | null;
  skip_tags?: string[] | null;
  forks?: number | null;
  verbosity?: number | null;
  diff_mode?: boolean | null;
  /** A git project (needs use on it); absent or null is none. */
  project_id?: string | null;
  /** Provisioning callbacks; on update, omitted means unchanged (spec part A 2.3). */
  allow_callbacks?: boolean | null;
  callback_limit?: 'intersect' | 'replace' | null;
  external_callback?: boolean | null;
  /** The fact cache (services/facts.ts); on update, omitted means unchanged (spec part A 2.3). */
  use_fact_cache?: boolean | null;
  fact_cache_timeout?: number | null;
  /** Credential ids every launch uses, and those a launch may add; absent or null is none. */
  credentials?: string[] | null;
  selectable_credentials?: string[] | null;
  /** The `id` a body names (a read sent back carries it); an update refuses another template's. */
  id?: unknown;
}

/**
 * Saving a template needs use of each stored inventory it names: its own (a job template's) and
 * each ansible step's (a workflow's), refused naming the field (`steps[1].inventory_id`) as a run
 * naming it would be. On an edit, an inventory the template already named is not asked again.
 */
async function requireTemplateInventories(db: Db, caller: Caller, fields: Pick<TemplateFields, 'inventory_id' | 'steps'>, current?: Template): Promise<void> {
  const named = [
    { id: fields.inventory_id, field: 'inventory_id' },
    ...(fields.steps ?? []).map((step, i) => ({ id: step.inventory_id ?? null, field: `steps[${i}].inventory_id` })),
  ];
  const kept = new Set([current?.inventory_id, ...(current?.steps ?? []).map((step) => step.inventory_id)]);
  for (const { id, field } of named) {
    if (id && !kept.has(id)) await requireInventoryUse(db, caller, id, field);
  }
}

/** The template, when the caller may read it; 404 alike for one that does not exist and one it may not read. */
export async function readableTemplate(db: Db, caller: Caller, templateId: string): Promise<Template> {
  const template = await getTemplate(db, templateId);
  if (!template) throw notFound(`template ${templateId}`);
  await requireAccess(db, caller, template.id, 'read', { action: `reading template ${template.id}` });
  return template;
}

/**
 * Writes a template's project and callback settings in the transaction that saved the rest
 * (`services/templates.ts` create and replace). On update an omitted `allow_callbacks`,
 * `callback_limit` or `external_callback` keeps the stored value (spec part A 2.3); turning
 * `allow_callbacks` off revokes the key. Naming a project needs use on it; `external_callback`
 * may be turned on only for a template an import bound to an external id.
 */
export async function saveTemplateExtras(tx: Db, caller: Caller, template: Template, draft: TemplateDraft, current?: Template): Promise<Template> {
  const projectId = draft.project_id ?? null;
  if (projectId !== null && projectId !== current?.project_id) {
    if (template.kind !== 'job') throw badRequest('project_id: a workflow template sets no project_id; it applies to a job template', { field: 'project_id' });
    await requireAccess(tx, caller, projectId, 'use', { action: `running template ${template.id} in project ${projectId}`, field: 'project_id' });
  }
  const allow = draft.allow_callbacks ?? current?.allow_callbacks ?? false;
  const external = draft.external_callback ?? current?.external_callback ?? false;
  if (external && !template.external_job_template_id) {
    throw badRequest('external_callback: the external-compatible callback address may be turned on only for a template an import bound to an external job template', {
      field: 'external_callback',
    });
  }
  const saved = await setTemplateExtras(tx, template.id, {
    project_id: projectId,
    allow_callbacks: allow,
    callback_limit: draft.callback_limit ?? current?.callback_limit ?? 'intersect',
    external_callback: external,
  });
  if (!allow) await deleteCallbackKey(tx, template.id);
  return saved!;
}

/** A new template, owned (and so managed) by the account that creates it; 409 when its name is taken. */
export async function createTemplate(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  draft: TemplateDraft,
  options: { externalJobTemplateId?: string } = {},
): Promise<Template> {
  await requireSavable(ctx, draft);
  const id = newId('tpl');
  withholdEntrySecrets(origin, draft.notifications?.length ?? 0);
  const notifications = await storedEntries(ctx, id, draft.notifications ?? []);
  return recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const fields = runFieldsOf(draft);
    if (fields.org_id !== null) await requireOrgPlacement(tx, caller, fields.org_id, 'org_id');
    await requireTemplateInventories(tx, caller, fields);
    const { survey, changes } = storedSurvey(ctx.sealer, id, draft.survey, editorOf(caller));
    let inserted = await uniqueName(draft.name, () => insertTemplate(tx, id, { ...fields, survey, notifications }, caller.account));
    // An import binds the template to the other system's job template (spec part A 2.3) before its callback settings are saved.
    if (options.externalJobTemplateId) {
      await bindExternalJobTemplate(tx, id, options.externalJobTemplateId);
      inserted = { ...inserted, external_job_template_id: options.externalJobTemplateId };
    }
    const created = await saveTemplateFactCache(tx, await saveTemplateCredentials(tx, caller, await saveTemplateExtras(tx, caller, inserted, draft), draft), draft);
    entry.body = { kind: 'template.created', template_id: created.id, template: audited(created), ...secretDefaultsNote(changes, {}) };
    return created;
  });
}

/**
 * Replaces a template whole, for a caller who manages it; also says which stored secret defaults
 * the edit cleared, and why. Moving it into an organization needs the caller to belong to that one.
 */
export async function replaceTemplate(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  templateId: string,
  draft: TemplateDraft,
): Promise<{ template: Template; cleared: Record<string, SecretDefaultClearReason> }> {
  await requireSavable(ctx, draft);
  if (draft.id !== undefined && draft.id !== null && draft.id !== templateId) {
    throw badRequest(`id: the body names template ${String(draft.id)} but the path names ${templateId}; the id cannot change`, { field: 'id' });
  }
  withholdEntrySecrets(origin, draft.notifications?.length ?? 0);
  return recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const current = await getTemplateForUpdate(tx, templateId);
    if (!current) throw notFound(`template ${templateId}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `editing template ${current.id}` });
    const fields = runFieldsOf(draft);
    if (fields.org_id !== null && fields.org_id !== current.org_id) await requireOrgPlacement(tx, caller, fields.org_id, 'org_id');
    await requireTemplateInventories(tx, caller, fields, current);
    const { survey, changes, cleared } = storedSurvey(ctx.sealer, current.id, draft.survey, editorOf(caller), {
      survey: current.survey,
      createdBy: current.created_by,
      runChanged: changesWhatRuns(current, fields),
    });
    // A masked or blank secret sent back keeps the stored entry's.
    const notifications = await storedEntries(ctx, current.id, draft.notifications ?? [], current.notifications as StoredEntry[]);
    const written = await uniqueName(draft.name, () => updateTemplate(tx, current.id, { ...fields, survey, notifications }));
    if (!written) throw notFound(`template ${templateId}`);
    const updated = await saveTemplateFactCache(tx, await saveTemplateCredentials(tx, caller, await saveTemplateExtras(tx, caller, written, draft, current), draft, current), draft, current);
    entry.body = {
      kind: 'template.updated',
      template_id: updated.id,
      template: audited(updated),
      previous: audited(current),
      ...secretDefaultsNote(changes, cleared),
    };
    return { template: updated, cleared };
  });
}

/**
 * Deletes a template, for a caller who manages it, with the grants on it; runs launched from it
 * keep their `template_id` (and are then read by their requesters and admins).
 */
export async function removeTemplate(ctx: ServerContext, caller: Caller, origin: AuditOrigin, templateId: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getTemplateForUpdate(tx, templateId);
    if (!current) throw notFound(`template ${templateId}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `deleting template ${current.id}` });
    // Its notification attachments go with it, as its chain entry's path states (spec part A 4.16).
    const { removed: grantsRemoved, attachments } = await deleteWithAttachments(tx, origin, 'template', current.id, async () => {
      const grants = await deleteGrantsOn(tx, current.id);
      if (!(await deleteTemplate(tx, current.id))) throw notFound(`template ${templateId}`);
      return grants;
    });
    entry.body = {
      kind: 'template.deleted',
      template_id: current.id,
      template: audited(current),
      grants_removed: grantsRemoved,
      notification_attachments: attachments,
    };
  });
}

/**
 * What a write needs no transaction for: every tool it names runs here, and a named queue is
 * allowed by the tier, as at submission (refused when saved, not only at each launch).
 */
async function requireSavable(ctx: ServerContext, draft: TemplateDraft): Promise<void> {
  await requireTemplateTools(draft.steps ? null : (draft.tool ?? null), draft.steps);
  requireQueueAllowed(draft.queue ?? '', ctx.licensing.tier);
}

/** The stored fields but the survey, whose secret defaults `storedSurvey` seals. */
function runFieldsOf(draft: TemplateDraft): Omit<TemplateFields, 'survey'> {
  const workflow = draft.steps !== null;
  return {
    name: draft.name,
    kind: workflow ? 'workflow' : 'job',
    tool: workflow ? null : (draft.tool ?? null),
    command: workflow ? null : (draft.command ?? null),
    extra_vars: draft.extra_vars ?? {},
    // A job template's stored inventory, and for the ansible tool its playbook and controls (core/ansible-spec.ts).
    inventory_id: workflow ? null : (draft.inventory_id ?? null),
    ansible: workflow ? {} : (({ inventory_id: _i, ...rest }) => rest)(ansibleSpecOf(draft.tool ?? null, draft)),
    queue: draft.queue ?? '',
    timeout_seconds: draft.timeout ?? 0,
    shards: workflow ? null : (draft.shards ?? null),
    steps: draft.steps,
    notifications: [],
    org_id: draft.org_id ?? null,
  };
}

const editorOf = (caller: Caller): TemplateEditor => ({
  accountId: caller.account.id,
  username: caller.account.username,
  admin: caller.account.role === 'admin',
});

/** A template name is unique: a second one is a 409 naming it. */
async function uniqueName<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`a template named ${JSON.stringify(name)} exists already; template names are unique`, { field: 'name' });
    throw err;
  }
}

/** What a template's chain entries record of it: its read view (secret defaults redacted) without times. */
function audited(template: Template): Record<string, unknown> {
  const { created_at: _c, updated_at: _u, id: _id, ...rest } = templateView(template);
  return rest;
}

/** What happened to each secret default, by var, and why each cleared one was: names, actions and reasons, never values. */
function secretDefaultsNote(changes: Record<string, SecretDefaultChange>, cleared: Record<string, SecretDefaultClearReason>): Record<string, unknown> {
  return {
    ...(Object.keys(changes).length ? { secret_defaults: changes } : {}),
    ...(Object.keys(cleared).length ? { secret_defaults_cleared: cleared } : {}),
  };
}
