import type { Sql } from 'postgres';

/**
 * Holds the audit chain's head locked, as a very busy database would: every audited write waits
 * until the returned function releases it (and resolves once the holding transaction has ended).
 */
export async function holdAuditHead(sql: Sql): Promise<() => Promise<void>> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const isLocked = new Promise<void>((resolve) => (locked = resolve));
  const holder = sql.begin(async (tx) => {
    await tx`SELECT * FROM audit_head FOR UPDATE`;
    locked();
    await released;
  });
  await isLocked;
  return async () => {
    release();
    await holder;
  };
}
