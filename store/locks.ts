import type { Db } from './db';

/**
 * Every PostgreSQL advisory lock Cairn takes, in one registry so that no two jobs share a key by
 * accident. All are transaction-scoped: held until the transaction that took them ends. A key is
 * one bigint, or two int4s (a separate key space in PostgreSQL).
 */
export const LOCKS = {
  /** Applying schema migrations: servers starting at once apply them one after the other. */
  migrations: 7_201_771,
  /** The first-admin bootstrap: one admin token however many servers start at once. */
  bootstrap: 7_201_772,
  /** Account changes that must agree on the set of accounts: the last-admin rule, the username-key back-fill. */
  accounts: 7_201_773,
  /** Policy writes that check a tier limit: two servers cannot both add the last allowed policy. */
  policies: 7_201_774,
  /** The audit anchorer ("cair" in ASCII, then 1): one server anchors at a time, the others skip a round. */
  auditAnchor: [0x63616972, 1],
  /** Folding run count deltas into run_counts (store/run-counts.ts): one server at a time. */
  runCounts: [0x63616972, 17],
  /** Federation key changes (the first key, rotations, a rotation's steps): one at a time across servers. */
  federationKeys: [0x63616972, 31],
  /**
   * A terraform or opentofu state Cairn keeps ("tfst" in ASCII; the second key is hashtext of the
   * state's key): session-scoped, held by a worker while a run's tool plans or applies (store/iac.ts).
   */
  iacState: [0x74667374, 0],
} as const satisfies Record<string, LockKey>;

export type LockKey = number | readonly [number, number];

/** Waits for the lock and holds it until the transaction ends. Call inside a transaction. */
export async function takeLock(db: Db, key: LockKey): Promise<void> {
  if (typeof key === 'number') await db`SELECT pg_advisory_xact_lock(${key}::bigint)`;
  else await db`SELECT pg_advisory_xact_lock(${key[0]}::int, ${key[1]}::int)`;
}

/** Takes the lock when it is free, holding it until the transaction ends; false when another holds it. */
export async function tryTakeLock(db: Db, key: LockKey): Promise<boolean> {
  const [{ locked }] =
    typeof key === 'number'
      ? await db<{ locked: boolean }[]>`SELECT pg_try_advisory_xact_lock(${key}::bigint) AS locked`
      : await db<{ locked: boolean }[]>`SELECT pg_try_advisory_xact_lock(${key[0]}::int, ${key[1]}::int) AS locked`;
  return locked;
}
