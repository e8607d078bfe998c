import type { Db } from './db';
import type { DecisionRecord, RedactionCategory } from '../core/runs/decision';

export type NewDecisionRecord = Pick<DecisionRecord, 'id' | 'run_id' | 'kind' | 'decision_id' | 'actor' | 'actor_kind' | 'reason' | 'random' | 'commitment'> & { comment?: DecisionRecord['comment'] };

export async function insertDecisionRecord(db: Db, record: NewDecisionRecord): Promise<DecisionRecord> {
  const { comment, ...rest } = record;
  const row_ = comment ? { ...rest, comment: db.json(comment as never) } : rest;
  const [row] = await db<DecisionRecord[]>`INSERT INTO decision_records ${db(row_ as unknown as Record<string, unknown>)} RETURNING *`;
  return row;
}

/** A run's records in the order they were made. */
export async function listDecisionRecords(db: Db, runId: string): Promise<DecisionRecord[]> {
  return db<DecisionRecord[]>`SELECT * FROM decision_records WHERE run_id = ${runId} ORDER BY at, id`;
}

export async function getDecisionRecordForUpdate(db: Db, runId: string, id: string): Promise<DecisionRecord | undefined> {
  const [row] = await db<DecisionRecord[]>`SELECT * FROM decision_records WHERE run_id = ${runId} AND id = ${id} FOR UPDATE`;
  return row;
}

/** Removes a record's text and random value together; the commitment stays. */
export async function redactDecisionRecord(
  db: Db,
  id: string,
  redaction: { by: string; category: RedactionCategory; entryId: string },
): Promise<DecisionRecord> {
  const [row] = await db<DecisionRecord[]>`
    UPDATE decision_records
    SET reason = NULL, random = NULL, redacted_at = now(), redacted_by = ${redaction.by},
        redaction_category = ${redaction.category}, redaction_entry_id = ${redaction.entryId}
    WHERE id = ${id} RETURNING *`;
  return row;
}
