import { badRequest, conflict } from '../core/errors';
import { ENCRYPTION_SETTINGS, encryptionKeyRequired, sealedValueFault } from '../core/run-secrets';
import type { Sealer } from '../core/seal';
import { mergeSecretDefaultEdit, parseSurvey, redactSurvey, type SurveyField } from '../core/survey';
import type { StepDefinition } from '../core/workflow-graph';
import type { StoredSurveyField, Template } from '../store/templates';
import { requireRunnableTool } from '../tools/registry';

/**
 * Templates' survey storage and views (spec part A 2.3, 2.4 rule 3). A secret field's default is
 * sealed when saved, with context `template:<template id>:<var>`, and kept as `default_sealed`
 * beside the field; `default` is never stored for a secret field. Every read shows `[redacted]`
 * in its place, an admin's included.
 */

export function templateSecretContext(templateId: string, name: string): string {
  return `template:${templateId}:${name}`;
}

/** The survey as core/survey.ts reads it: sealed defaults left out. */
export function surveyFieldsOf(stored: readonly StoredSurveyField[]): SurveyField[] {
  return stored.map(({ default_sealed: _sealed, ...field }) => field as SurveyField);
}

/** The secret fields' sealed defaults, by var. */
export function sealedDefaultsOf(stored: readonly StoredSurveyField[]): Map<string, string> {
  return new Map(stored.filter((f) => f.type === 'secret' && f.default_sealed !== undefined).map((f) => [f.var, f.default_sealed!]));
}

export type SecretDefaultChange = 'set' | 'kept' | 'replaced' | 'cleared';

/**
 * The survey to store for a create (`previous` undefined) or an update: each secret field's
 * default sealed, kept, replaced or cleared by the edit rule (`[redacted]` keeps, a new value
 * replaces, "" or omitted clears). Also says, by var, what happened to each secret default, for
 * the audit entry (names and actions only). Sealing without a sealer is a 409 naming the vars and
 * the settings.
 */
export function storedSurvey(
  sealer: Sealer | undefined,
  templateId: string,
  fields: readonly SurveyField[],
  previous: readonly StoredSurveyField[] | undefined,
): { survey: StoredSurveyField[]; changes: Record<string, SecretDefaultChange> } {
  const before = sealedDefaultsOf(previous ?? []);
  const edits = fields.map((field, i) => (field.type === 'secret' ? mergeSecretDefaultEdit(before.get(field.var), field.default, `survey[${i}].default`) : undefined));
  const toSeal = fields.filter((_, i) => edits[i]?.action === 'replace').map((f) => f.var);
  if (toSeal.length && !sealer) throw encryptionKeyRequired('the secret default', toSeal);

  const changes: Record<string, SecretDefaultChange> = {};
  const survey = fields.map((field, i): StoredSurveyField => {
    const edit = edits[i];
    if (!edit) return { ...field };
    const { default: _clear, ...rest } = field;
    switch (edit.action) {
      case 'keep':
        changes[field.var] = 'kept';
        return { ...rest, default_sealed: edit.sealed };
      case 'replace':
        changes[field.var] = before.has(field.var) ? 'replaced' : 'set';
        return { ...rest, default_sealed: sealer!.seal(edit.plaintext, templateSecretContext(templateId, field.var)) };
      case 'clear':
        if (before.has(field.var)) changes[field.var] = 'cleared';
        return rest;
    }
  });
  return { survey, changes };
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

/** Parses a body's survey; absent or null is none. */
export function parseTemplateSurvey(input: unknown): SurveyField[] {
  return input === undefined || input === null ? [] : parseSurvey(input);
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
    survey: redactSurvey(fields, { secretDefaults: sealedDefaultsOf(template.survey).keys() }),
    steps: template.steps,
    notifications: template.notifications,
    created_by: template.created_by,
    created_at: template.created_at.toISOString(),
    updated_at: template.updated_at.toISOString(),
  };
}

export type TemplateView = ReturnType<typeof templateView>;
