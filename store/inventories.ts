import type { InventoryFormat } from '../core/ansible/inventory';
import { readableBy } from './access';
import { type Db, type Page, type PageRequest, readPage } from './db';

/** A stored inventory (spec part A 4.12). */
export interface Inventory {
  id: string;
  name: string;
  /**
   * `static`: content stored as written; `smart` and `constructed`: composed over `inputs` (static
   * inventories, in order) with no content of their own, resolved again at each run start
   * (services/composed-inventories.ts).
   */
  kind: InventoryKind;
  inputs: string[];
  /** A smart inventory's Ansible host pattern; null otherwise. */
  host_filter: string | null;
  /** A constructed inventory's constructed-plugin options; null otherwise. */
  source_vars: Record<string, unknown> | null;
  format: InventoryFormat;
  content: string;
  size_bytes: number;
  /** The host names it names, ranges expanded (tools/ansible-inventory.ts). */
  hosts: string[];
  host_count: number;
  owner_id: string | null;
  org_id: string | null;
  /** The worker queue its runs execute on when they name none of their own (Team tier); `""` is the default queue. */
  queue: string;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export type InventoryKind = 'static' | 'smart' | 'constructed';

/** An inventory without its content or host list: what a list shows. */
export type InventorySummary = Omit<Inventory, 'content' | 'hosts' | 'host_filter' | 'source_vars'>;

export interface InventoryFields {
  name: string;
  format: InventoryFormat;
  content: string;
  hosts: string[];
  org_id: string | null;
  /** Absent: `""` on insert; an update leaves it as it is (a source's refresh writes content only). */
  queue?: string;
  /** Absent: `static` (and an update leaves the composed fields as they are). */
  kind?: InventoryKind;
  inputs?: string[];
  host_filter?: string | null;
  source_vars?: Record<string, unknown> | null;
}

const SUMMARY_COLUMNS = ['id', 'name', 'kind', 'inputs', 'format', 'size_bytes', 'host_count', 'owner_id', 'org_id', 'queue', 'created_by', 'created_at', 'updated_at'];

export async function insertInventory(db: Db, id: string, fields: InventoryFields, owner: { id: string; username: string }): Promise<Inventory> {
  const [row] = await db<Inventory[]>`
    INSERT INTO inventories (id, name, kind, inputs, host_filter, source_vars, format, content, size_bytes, hosts, host_count, org_id, queue, owner_id, created_by)
    VALUES (${id}, ${fields.name}, ${fields.kind ?? 'static'}, ${fields.inputs ?? []}::text[], ${fields.host_filter ?? null},
            ${fields.source_vars ? db.json(fields.source_vars as never) : null}, ${fields.format}, ${fields.content}, ${Buffer.byteLength(fields.content)},
            ${db.json(fields.hosts)}, ${fields.hosts.length}, ${fields.org_id}, ${fields.queue ?? ''}, ${owner.id}, ${owner.username})
    RETURNING *`;
  return row;
}

export async function updateInventory(db: Db, id: string, fields: InventoryFields): Promise<Inventory | undefined> {
  const [row] = await db<Inventory[]>`
    UPDATE inventories SET name = ${fields.name}, format = ${fields.format}, content = ${fields.content},
      size_bytes = ${Buffer.byteLength(fields.content)}, hosts = ${db.json(fields.hosts)}, host_count = ${fields.hosts.length},
      ${fields.kind === undefined ? db`` : db`inputs = ${fields.inputs ?? []}::text[], host_filter = ${fields.host_filter ?? null},
      source_vars = ${fields.source_vars ? db.json(fields.source_vars as never) : null},`}
      ${fields.queue === undefined ? db`` : db`queue = ${fields.queue},`}
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

/** One inventory without its content (its host list kept), for a caller that needs only its hosts (and the queue its runs inherit). */
export async function getInventoryHosts(db: Db, id: string): Promise<Pick<Inventory, 'id' | 'name' | 'hosts' | 'kind' | 'inputs' | 'queue'> | undefined> {
  const [row] = await db<Pick<Inventory, 'id' | 'name' | 'hosts' | 'kind' | 'inputs' | 'queue'>[]>`
    SELECT id, name, hosts, kind, inputs, queue FROM inventories WHERE id = ${id}`;
  return row;
}

/** The smart and constructed inventories naming `inputId` among their inputs, oldest first. */
export async function composedUsing(db: Db, inputId: string): Promise<{ id: string; name: string; kind: InventoryKind }[]> {
  return db<{ id: string; name: string; kind: InventoryKind }[]>`
    SELECT id, name, kind FROM inventories WHERE kind <> 'static' AND inputs @> ARRAY[${inputId}]::text[] ORDER BY created_at, id`;
}

/** Which of `ids` name no inventory. */
export async function missingInventories(db: Db, ids: string[]): Promise<string[]> {
  if (!ids.length) return [];
  const found = await db<{ id: string }[]>`SELECT id FROM inventories WHERE id IN ${db(ids)}`;
  const present = new Set(found.map((r) => r.id));
  return ids.filter((id) => !present.has(id));
}

/**
 * A page of inventory summaries (never content), oldest first, with the total: every inventory,
 * or with `readerId` only those that account may read (store/access.ts).
 */
export async function listInventoryPage(
  db: Db,
  page: PageRequest,
  readerId?: string,
): Promise<Page<InventorySummary>> {
  const readable = readerId !== undefined ? readableBy(db, readerId, 'inventories') : null;
  return readPage(db, { columns: db(SUMMARY_COLUMNS), from: db`inventories`, order: db`created_at, id`, where: [readable] }, page);
}
