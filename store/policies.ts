import type { RegoDescription } from '../core/runs/policy-file';
import type { GatePolicy } from '../core/runs/policy-gate';
import { type Db, type Page, type PageRequest, readPage } from './db';
import { LOCKS, takeLock } from './locks';

/** A stored approval policy (spec part A 2.10). */
export interface Policy extends GatePolicy {
  name: string;
  /** A policy-file policy's description (null: written through the API). */
  rego: RegoDescription | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

/** The fields a create or update writes; the rest are the store's. */
export type PolicyFields = Omit<Policy, 'id' | 'created_by' | 'created_at' | 'updated_at' | 'rego'>;

export async function insertPolicy(db: Db, id: string, fields: PolicyFields, createdBy: string): Promise<Policy> {
  const [row] = await db<Policy[]>`
    INSERT INTO policies ${db({ id, ...fields, created_by: createdBy } as Record<string, unknown>)} RETURNING *`;
  return row;
}

export async function updatePolicy(db: Db, id: string, fields: PolicyFields): Promise<Policy | undefined> {
  const [row] = await db<Policy[]>`
    UPDATE policies SET ${db(fields as unknown as Record<string, unknown>)}, updated_at = now() WHERE id = ${id} RETURNING *`;
  return row;
}

export async function deletePolicy(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM policies WHERE id = ${id} RETURNING id`).length > 0;
}

export async function getPolicy(db: Db, id: string): Promise<Policy | undefined> {
  const [row] = await db<Policy[]>`SELECT * FROM policies WHERE id = ${id}`;
  return row;
}

/** Every policy, oldest first: the gate reads them all for each submission. */
export async function listPolicies(db: Db): Promise<Policy[]> {
  return db<Policy[]>`SELECT * FROM policies ORDER BY created_at, id`;
}

/**
 * Locks the policy set for a create or update that checks a tier limit, so two servers adding
 * the last allowed policy at once cannot both succeed. Held until the transaction ends.
 */
export async function lockPolicySet(db: Db): Promise<void> {
  await takeLock(db, LOCKS.policies);
}

/** A page of policies for `GET /v1/policies`, oldest first (the order the gate reads them), with the total. */
export async function listPolicyPage(
  db: Db,
  page: PageRequest,
): Promise<Page<Policy>> {
  return readPage(db, { from: db`policies`, order: db`created_at, id` }, page);
}

/**
 * Stored policies that count toward the tier's policy limit: require-approval and exempt ones.
 * Call after {@link lockPolicySet} so the count holds until the write commits.
 */
export async function countLimitedPolicies(db: Db): Promise<number> {
  const [{ n }] = await db<{ n: number }[]>`
    SELECT count(*)::int AS n FROM policies WHERE effect IN ('require_approval', 'exempt')`;
  return n;
}

/** A policy-file policy as the start writes it (services/runs/policy-file.ts). */
export interface FilePolicy {
  name: string;
  require_reason: boolean;
  require_distinct_approver: boolean;
  rego: RegoDescription;
}

/**
 * Makes the policy-file rows exactly `wanted`, by name: a name already there keeps its id (runs
 * held by it still name it), a new one takes `newId()`, one no longer in the file is deleted.
 * Returns the rows, in `wanted`'s order, and what changed.
 */
export async function replaceFilePolicies(
  db: Db,
  wanted: FilePolicy[],
  newId: () => string,
): Promise<{ rows: Policy[]; added: string[]; changed: string[]; removed: string[] }> {
  const before = await db<Policy[]>`SELECT * FROM policies WHERE rego IS NOT NULL`;
  const names = wanted.map((w) => w.name);
  const removed = before.filter((p) => !names.includes(p.name)).map((p) => p.name);
  if (removed.length) await db`DELETE FROM policies WHERE rego IS NOT NULL AND name IN ${db(removed)}`;
  const rows: Policy[] = [];
  const added: string[] = [];
  const changed: string[] = [];
  for (const w of wanted) {
    const old = before.find((p) => p.name === w.name);
    const fields = {
      name: w.name,
      effect: 'require_approval',
      require_reason: w.require_reason,
      require_distinct_approver: w.require_distinct_approver,
      rego: db.json(w.rego as never),
    };
    if (old) {
      const same = JSON.stringify(old.rego) === JSON.stringify(w.rego) && old.require_reason === w.require_reason && old.require_distinct_approver === w.require_distinct_approver;
      if (same) {
        rows.push(old);
        continue;
      }
      const [row] = await db<Policy[]>`UPDATE policies SET ${db(fields as Record<string, unknown>)}, updated_at = now() WHERE id = ${old.id} RETURNING *`;
      rows.push(row);
      changed.push(w.name);
    } else {
      const [row] = await db<Policy[]>`INSERT INTO policies ${db({ id: newId(), ...fields, created_by: 'cairn' } as Record<string, unknown>)} RETURNING *`;
      rows.push(row);
      added.push(w.name);
    }
  }
  return { rows, added, changed, removed };
}
