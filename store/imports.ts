import type { Db } from './db';

/** Which object an imported external object became (schema/030_imports.sql). */
export interface ImportBinding {
  format: string;
  kind: string;
  external_id: string;
  object_id: string;
}

/** The bindings of one format, keyed `<kind>:<external id>`. */
export async function importBindings(db: Db, format: string): Promise<Map<string, string>> {
  const rows = await db<ImportBinding[]>`SELECT format, kind, external_id, object_id FROM import_bindings WHERE format = ${format}`;
  return new Map(rows.map((row) => [`${row.kind}:${row.external_id}`, row.object_id]));
}

/** Records (or, for an object recreated after its first was deleted, moves) a binding. */
export async function saveImportBinding(db: Db, binding: ImportBinding, username: string): Promise<void> {
  await db`
    INSERT INTO import_bindings (format, kind, external_id, object_id, created_by)
    VALUES (${binding.format}, ${binding.kind}, ${binding.external_id}, ${binding.object_id}, ${username})
    ON CONFLICT (format, kind, external_id) DO UPDATE SET object_id = EXCLUDED.object_id, created_by = EXCLUDED.created_by, created_at = now()`;
}

/** The table of each kind an import creates. */
export type ImportTable = 'templates' | 'projects' | 'inventories' | 'credentials' | 'notification_targets' | 'schedules';

/** Whether the object with this id still exists. */
export async function importedObjectExists(db: Db, table: ImportTable, id: string): Promise<boolean> {
  const [row] = await db`SELECT 1 FROM ${db(table)} WHERE id = ${id}`;
  return !!row;
}

/** Binds a template to the external job template it was imported from (spec part A 2.3). */
export async function bindExternalJobTemplate(db: Db, templateId: string, externalId: string): Promise<void> {
  await db`UPDATE templates SET external_job_template_id = ${externalId} WHERE id = ${templateId}`;
}

/** The names taken among objects of one kind, so a plan can say which of its names collide. */
export async function takenNames(db: Db, table: ImportTable): Promise<Set<string>> {
  const rows = await db<{ name: string }[]>`SELECT name FROM ${db(table)}`;
  return new Set(rows.map((row) => row.name));
}

/** Whether a template is bound to this external job template id already. */
export async function externalJobTemplateTaken(db: Db, externalId: string): Promise<boolean> {
  const [row] = await db`SELECT 1 FROM templates WHERE external_job_template_id = ${externalId}`;
  return !!row;
}
