import { readableIds } from './access';
import { type Db, type Page, type PageRequest, readPage } from './db';

/** A dynamic inventory source (spec part A 4.12): refreshed, it writes its inventory's content. */
export interface InventorySource {
  id: string;
  inventory_id: string;
  name: string;
  kind: 'script' | 'project_file';
  script: string | null;
  project_id: string | null;
  path: string | null;
  timeout_seconds: number;
  status: 'never' | 'successful' | 'failed';
  last_error: string | null;
  last_refreshed_at: Date | null;
  host_count: number | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export interface InventorySourceFields {
  inventory_id: string;
  name: string;
  kind: 'script' | 'project_file';
  script: string | null;
  project_id: string | null;
  path: string | null;
  timeout_seconds: number;
}

export async function insertInventorySource(db: Db, id: string, fields: InventorySourceFields, createdBy: string): Promise<InventorySource> {
  const [row] = await db<InventorySource[]>`
    INSERT INTO inventory_sources (id, inventory_id, name, kind, script, project_id, path, timeout_seconds, created_by)
    VALUES (${id}, ${fields.inventory_id}, ${fields.name}, ${fields.kind}, ${fields.script}, ${fields.project_id}, ${fields.path},
            ${fields.timeout_seconds}, ${createdBy})
    RETURNING *`;
  return row;
}

/** Replaces a source's definition; a changed definition has not been refreshed yet. */
export async function updateInventorySource(db: Db, id: string, fields: InventorySourceFields): Promise<InventorySource | undefined> {
  const [row] = await db<InventorySource[]>`
    UPDATE inventory_sources SET inventory_id = ${fields.inventory_id}, name = ${fields.name}, kind = ${fields.kind}, script = ${fields.script},
      project_id = ${fields.project_id}, path = ${fields.path}, timeout_seconds = ${fields.timeout_seconds}, updated_at = now()
    WHERE id = ${id}
    RETURNING *`;
  return row;
}

export async function deleteInventorySource(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM inventory_sources WHERE id = ${id} RETURNING id`).length > 0;
}

export async function getInventorySource(db: Db, id: string): Promise<InventorySource | undefined> {
  const [row] = await db<InventorySource[]>`SELECT * FROM inventory_sources WHERE id = ${id}`;
  return row;
}

export async function getInventorySourceForUpdate(db: Db, id: string): Promise<InventorySource | undefined> {
  const [row] = await db<InventorySource[]>`SELECT * FROM inventory_sources WHERE id = ${id} FOR UPDATE`;
  return row;
}

/** Records how a refresh ended. */
export async function recordInventorySourceRefresh(
  db: Db,
  id: string,
  outcome: { status: 'successful'; host_count: number } | { status: 'failed'; error: string },
): Promise<InventorySource | undefined> {
  const [row] =
    outcome.status === 'successful'
      ? await db<InventorySource[]>`
          UPDATE inventory_sources SET status = 'successful', last_error = NULL, host_count = ${outcome.host_count}, last_refreshed_at = now()
          WHERE id = ${id} RETURNING *`
      : await db<InventorySource[]>`
          UPDATE inventory_sources SET status = 'failed', last_error = ${outcome.error}, last_refreshed_at = now()
          WHERE id = ${id} RETURNING *`;
  return row;
}

/**
 * A page of sources, oldest first, with the total: every source, or with `readerId` only those
 * whose inventory that account may read (store/access.ts); optionally only the ids given.
 */
export async function listInventorySourcePage(
  db: Db,
  page: PageRequest,
  readerId?: string,
): Promise<Page<InventorySource>> {
  const readable = readerId !== undefined ? db`inventory_id IN (${readableIds(db, 'inventory', readerId)})` : null;
  return readPage(db, { from: db`inventory_sources`, order: db`created_at, id`, where: [readable] }, page);
}
