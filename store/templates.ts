import type { AnsibleSpec } from '../core/runs/run';
import type { SurveyField } from '../core/runs/survey';
import type { StepDefinition } from '../core/runs/workflow-graph';
import { readableBy } from './access';
import { type Db, type Page, type PageRequest, readPage } from './db';

/**
 * A survey field as stored: a secret field never keeps `default` in clear; its default, when it
 * has one, is `default_sealed` (sealed with context `template:<template id>:<var>`), with
 * `default_sealed_by`, the id of the account that set it (absent on defaults stored before it
 * was recorded: those count as set by the template's creator). Reads strip both and show
 * `[redacted]` instead (services/templates.ts).
 */
export type StoredSurveyField = SurveyField & { default_sealed?: string; default_sealed_by?: string };

/** A stored template (spec part A 2.3). */
export interface Template {
  id: string;
  name: string;
  /** `job` launches one run (or a split); `workflow` runs its steps as a graph. */
  kind: 'job' | 'workflow';
  tool: string | null;
  command: string | null;
  extra_vars: Record<string, unknown>;
  inventory_id: string | null;
  /** A job template's ansible playbook and controls (core/ansible-spec.ts), as its runs carry them; `{}` for none. */
  ansible: AnsibleSpec;
  queue: string;
  /** Zero leaves the server default (`--run-timeout`) at each launch. */
  timeout_seconds: number;
  /** Two or more make each launch a split. */
  shards: number | null;
  survey: StoredSurveyField[];
  /** A workflow template's checked graph. */
  steps: StepDefinition[] | null;
  notifications: unknown[];
  /** The git project its runs work in a copy of (spec part A 4.5); written by store/callbacks.ts setTemplateExtras. */
  project_id: string | null;
  /** Provisioning callbacks (spec part A 2.3); written by store/callbacks.ts setTemplateExtras. */
  allow_callbacks: boolean;
  callback_limit: 'intersect' | 'replace';
  /** Set by an import that bound the template; the external-compatible callback address answers while `external_callback` is on. */
  external_job_template_id: string | null;
  external_callback: boolean;
  external_callback_called_at: Date | null;
  /** The fact cache (spec part A 2.3); written by store/facts.ts setTemplateFactCache. */
  use_fact_cache: boolean;
  fact_cache_timeout: number;
  /** Credentials every launch uses, and those a launch may add (spec part A 4.6); written by store/credentials.ts setTemplateCredentials. */
  credentials: string[];
  selectable_credentials: string[];
  /** The account that made it, which manages it; null once that account is deleted. */
  owner_id: string | null;
  /** The organization that owns it, whose admins manage it; null for none. */
  org_id: string | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

/** The fields a create or update writes; the rest are the store's. */
export type TemplateFields = Omit<Template, 'id' | 'owner_id' | 'created_by' | 'created_at' | 'updated_at' | keyof TemplateExtras | ReadOnlyTemplateFields | 'credentials' | 'selectable_credentials' | 'use_fact_cache' | 'fact_cache_timeout'>;

/** The project and callback settings, written beside the rest by store/callbacks.ts setTemplateExtras. */
export type TemplateExtras = Pick<Template, 'project_id' | 'allow_callbacks' | 'callback_limit' | 'external_callback'>;
type ReadOnlyTemplateFields = 'external_job_template_id' | 'external_callback_called_at';

const json = (db: Db, value: unknown) => (value === null || value === undefined ? null : db.json(value as never));

/** A new template, owned by the account that creates it (`owner.id`, its username kept as `created_by`). */
export async function insertTemplate(db: Db, id: string, fields: TemplateFields, owner: { id: string; username: string }): Promise<Template> {
  const [row] = await db<Template[]>`
    INSERT INTO templates (id, name, kind, tool, command, extra_vars, inventory_id, ansible, queue, timeout_seconds, shards,
                           survey, steps, notifications, org_id, owner_id, created_by)
    VALUES (${id}, ${fields.name}, ${fields.kind}, ${fields.tool}, ${fields.command}, ${json(db, fields.extra_vars)},
            ${fields.inventory_id}, ${json(db, fields.ansible)}, ${fields.queue}, ${fields.timeout_seconds}, ${fields.shards}, ${json(db, fields.survey)},
            ${json(db, fields.steps)}, ${json(db, fields.notifications)}, ${fields.org_id}, ${owner.id}, ${owner.username})
    RETURNING *`;
  return row;
}

export async function updateTemplate(db: Db, id: string, fields: TemplateFields): Promise<Template | undefined> {
  const [row] = await db<Template[]>`
    UPDATE templates SET
      name = ${fields.name}, kind = ${fields.kind}, tool = ${fields.tool}, command = ${fields.command},
      extra_vars = ${json(db, fields.extra_vars)}, inventory_id = ${fields.inventory_id}, ansible = ${json(db, fields.ansible)}, queue = ${fields.queue},
      timeout_seconds = ${fields.timeout_seconds}, shards = ${fields.shards}, survey = ${json(db, fields.survey)},
      steps = ${json(db, fields.steps)}, notifications = ${json(db, fields.notifications)}, org_id = ${fields.org_id},
      updated_at = now()
    WHERE id = ${id}
    RETURNING *`;
  return row;
}

export async function deleteTemplate(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM templates WHERE id = ${id} RETURNING id`).length > 0;
}

export async function getTemplate(db: Db, id: string): Promise<Template | undefined> {
  const [row] = await db<Template[]>`SELECT * FROM templates WHERE id = ${id}`;
  return row;
}

/** Locks the template for an update, so two edits of its sealed defaults cannot interleave. */
export async function getTemplateForUpdate(db: Db, id: string): Promise<Template | undefined> {
  const [row] = await db<Template[]>`SELECT * FROM templates WHERE id = ${id} FOR UPDATE`;
  return row;
}

/**
 * A page of templates for `GET /v1/templates`, oldest first, with the total: every template, or
 * with `readerId` only those that account may read (store/access.ts), `total` counting only them.
 */
export async function listTemplatePage(
  db: Db,
  page: PageRequest,
  readerId?: string,
): Promise<Page<Template>> {
  const readable = readerId !== undefined ? readableBy(db, readerId, 'templates') : null;
  return readPage(db, { from: db`templates`, order: db`created_at, id`, where: [readable] }, page);
}
