import type { Db } from './db';

/** Which object an imported external object became (schema/030_imports.sql). */
export interface ImportBinding {
  format: string;
  kind: string;
  external_id: string;
  object_id: string;
}

/** The bindings of one format, for the external ids given, keyed `<kind>:<external id>`. */
export async function importBindings(db: Db, format: string): Promise<Map<string, string>> {
  const rows = await db<ImportBinding[]>`SELECT format, kind, external_id, object_id FROM import_bindings WHERE format = ${format}`;
  return new Map(rows.map((row) => [`${row.kind}:${row.external_id}`, row.object_id]));
}

export async function insertImportBinding(db: Db, binding: ImportBinding, username: string): Promise<void> {
  await db`
    INSERT INTO import_bindings (format, kind, external_id, object_id, created_by)
    VALUES (${binding.format}, ${binding.kind}, ${binding.external_id}, ${binding.object_id}, ${username})`;
}

/** Binds a template to the external job template it was imported from (spec part A 2.3). */
export async function bindExternalJobTemplate(db: Db, templateId: string, externalId: string): Promise<void> {
  await db`UPDATE templates SET external_job_template_id = ${externalId} WHERE id = ${templateId}`;
}

/** The names taken among objects of one kind, so a plan can say which of its names collide. */
export async function takenNames(db: Db, table: 'templates' | 'projects' | 'inventories' | 'credentials' | 'notification_targets' | 'schedules'): Promise<Set<string>> {
  const rows = await db<{ name: string }[]>`SELECT name FROM ${db(table)}`;
  return new Set(rows.map((row) => row.name));
}

/** Whether a template is bound to this external job template id already. */
export async function externalJobTemplateTaken(db: Db, externalId: string): Promise<boolean> {
  const [row] = await db`SELECT 1 FROM templates WHERE external_job_template_id = ${externalId}`;
  return !!row;
}
