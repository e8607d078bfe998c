import type { GatePolicy } from '../core/runs/policy-gate';
import { type Db, type Page, type PageRequest, readPage } from './db';
import { LOCKS, takeLock } from './locks';

/** A stored approval policy (spec part A 2.10). */
export interface Policy extends GatePolicy {
  name: string;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

/** The fields a create or update writes; the rest are the store's. */
export type PolicyFields = Omit<Policy, 'id' | 'created_by' | 'created_at' | 'updated_at'>;

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
