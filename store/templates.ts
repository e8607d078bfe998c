import type { SurveyField } from '../core/survey';
import type { StepDefinition } from '../core/workflow-graph';
import type { Db } from './db';

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
  queue: string;
  /** Zero leaves the server default (`--run-timeout`) at each launch. */
  timeout_seconds: number;
  /** Two or more make each launch a split. */
  shards: number | null;
  survey: StoredSurveyField[];
  /** A workflow template's checked graph. */
  steps: StepDefinition[] | null;
  notifications: unknown[];
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

/** The fields a create or update writes; the rest are the store's. */
export type TemplateFields = Omit<Template, 'id' | 'created_by' | 'created_at' | 'updated_at'>;

const json = (db: Db, value: unknown) => (value === null || value === undefined ? null : db.json(value as never));

export async function insertTemplate(db: Db, id: string, fields: TemplateFields, createdBy: string): Promise<Template> {
  const [row] = await db<Template[]>`
    INSERT INTO templates (id, name, kind, tool, command, extra_vars, inventory_id, queue, timeout_seconds, shards,
                           survey, steps, notifications, created_by)
    VALUES (${id}, ${fields.name}, ${fields.kind}, ${fields.tool}, ${fields.command}, ${json(db, fields.extra_vars)},
            ${fields.inventory_id}, ${fields.queue}, ${fields.timeout_seconds}, ${fields.shards}, ${json(db, fields.survey)},
            ${json(db, fields.steps)}, ${json(db, fields.notifications)}, ${createdBy})
    RETURNING *`;
  return row;
}

export async function updateTemplate(db: Db, id: string, fields: TemplateFields): Promise<Template | undefined> {
  const [row] = await db<Template[]>`
    UPDATE templates SET
      name = ${fields.name}, kind = ${fields.kind}, tool = ${fields.tool}, command = ${fields.command},
      extra_vars = ${json(db, fields.extra_vars)}, inventory_id = ${fields.inventory_id}, queue = ${fields.queue},
      timeout_seconds = ${fields.timeout_seconds}, shards = ${fields.shards}, survey = ${json(db, fields.survey)},
      steps = ${json(db, fields.steps)}, notifications = ${json(db, fields.notifications)}, updated_at = now()
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

/** A page of templates for `GET /v1/templates`, oldest first, with the total. */
export async function listTemplatePage(
  db: Db,
  page: { limit: number; offset: number; ids?: string[] },
): Promise<{ rows: Template[]; total: number }> {
  const filter = page.ids?.length ? db`WHERE id IN ${db(page.ids)}` : db``;
  const rows = await db<Template[]>`
    SELECT * FROM templates ${filter} ORDER BY created_at, id LIMIT ${page.limit} OFFSET ${page.offset}`;
  const [{ n }] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM templates ${filter}`;
  return { rows, total: n };
}
