import { newId } from '../core/ids';
import type { Db } from './db';

/** Job inputs and answers too large for a Temporal payload (schema/024_job_payloads.sql). */

export async function putPayload(db: Db, body: string): Promise<string> {
  const id = newId('jpl');
  await db`INSERT INTO job_payloads (id, body) VALUES (${id}, ${body})`;
  return id;
}

export async function readPayload(db: Db, id: string): Promise<string | undefined> {
  const [row] = await db<{ body: string }[]>`SELECT body FROM job_payloads WHERE id = ${id}`;
  return row?.body;
}

export async function deletePayloads(db: Db, ids: string[]): Promise<void> {
  if (ids.length) await db`DELETE FROM job_payloads WHERE id IN ${db(ids)}`;
}

/** Payloads a lost server left behind. */
export async function deleteStalePayloads(db: Db, olderThanSeconds: number): Promise<number> {
  const rows = await db`DELETE FROM job_payloads WHERE created_at < now() - make_interval(secs => ${olderThanSeconds}) RETURNING 1`;
  return rows.length;
}
