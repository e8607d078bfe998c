import type { InventoryFormat } from '../core/inventory';
import { readableBy } from './access';
import { whereAll, type Db } from './db';

/** A stored inventory (spec part A 4.12). */
export interface Inventory {
  id: string;
  name: string;
  /** `static`: content stored as written. */
  kind: 'static';
  format: InventoryFormat;
  content: string;
  size_bytes: number;
  /** The host names it names, ranges expanded (tools/ansible-inventory.ts). */
  hosts: string[];
  host_count: number;
  owner_id: string | null;
  org_id: string | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

/** An inventory without its content or host list: what a list shows. */
export type InventorySummary = Omit<Inventory, 'content' | 'hosts'>;

export interface InventoryFields {
  name: string;
  format: InventoryFormat;
  content: string;
  hosts: string[];
  org_id: string | null;
}

const SUMMARY_COLUMNS = ['id', 'name', 'kind', 'format', 'size_bytes', 'host_count', 'owner_id', 'org_id', 'created_by', 'created_at', 'updated_at'];

export async function insertInventory(db: Db, id: string, fields: InventoryFields, owner: { id: string; username: string }): Promise<Inventory> {
  const [row] = await db<Inventory[]>`
    INSERT INTO inventories (id, name, format, content, size_bytes, hosts, host_count, org_id, owner_id, created_by)
    VALUES (${id}, ${fields.name}, ${fields.format}, ${fields.content}, ${Buffer.byteLength(fields.content)},
            ${db.json(fields.hosts)}, ${fields.hosts.length}, ${fields.org_id}, ${owner.id}, ${owner.username})
    RETURNING *`;
  return row;
}

export async function updateInventory(db: Db, id: string, fields: InventoryFields): Promise<Inventory | undefined> {
  const [row] = await db<Inventory[]>`
    UPDATE inventories SET name = ${fields.name}, format = ${fields.format}, content = ${fields.content},
      size_bytes = ${Buffer.byteLength(fields.content)}, hosts = ${db.json(fields.hosts)}, host_count = ${fields.hosts.length},
      org_id = ${fields.org_id}, updated_at = now()
    WHERE id = ${id}
    RETURNING *`;
  return row;
}

export async function deleteInventory(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM inventories WHERE id = ${id} RETURNING id`).length > 0;
}

/** One inventory with its content and hosts. */
export async function getInventory(db: Db, id: string): Promise<Inventory | undefined> {
  const [row] = await db<Inventory[]>`SELECT * FROM inventories WHERE id = ${id}`;
  return row;
}

export async function getInventoryForUpdate(db: Db, id: string): Promise<Inventory | undefined> {
  const [row] = await db<Inventory[]>`SELECT * FROM inventories WHERE id = ${id} FOR UPDATE`;
  return row;
}

/** One inventory without its content (its host list kept), for a caller that needs only its hosts. */
export async function getInventoryHosts(db: Db, id: string): Promise<Pick<Inventory, 'id' | 'name' | 'hosts'> | undefined> {
  const [row] = await db<Pick<Inventory, 'id' | 'name' | 'hosts'>[]>`SELECT id, name, hosts FROM inventories WHERE id = ${id}`;
  return row;
}

/**
 * A page of inventory summaries (never content), oldest first, with the total: every inventory,
 * or with `readerId` only those that account may read (store/access.ts).
 */
export async function listInventoryPage(
  db: Db,
  page: { limit: number; offset: number; ids?: string[] },
  readerId?: string,
): Promise<{ rows: InventorySummary[]; total: number }> {
  const filter = whereAll(db, [
    page.ids?.length ? db`id IN ${db(page.ids)}` : null,
    readerId !== undefined ? readableBy(db, readerId, 'inventories') : null,
  ]);
  const [rows, [{ n }]] = await Promise.all([
    db<InventorySummary[]>`SELECT ${db(SUMMARY_COLUMNS)} FROM inventories ${filter} ORDER BY created_at, id LIMIT ${page.limit} OFFSET ${page.offset}`,
    db<{ n: number }[]>`SELECT count(*)::int AS n FROM inventories ${filter}`,
  ]);
  return { rows, total: n };
}
