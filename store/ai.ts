import type { Db } from './db';

/** A run's stored explanation (schema/036_ai.sql). */
export interface RunExplanation {
  run_id: string;
  provider: string;
  model: string;
  answer: string;
  explained_by: string;
  explained_at: Date;
}

export async function getRunExplanation(db: Db, runId: string): Promise<RunExplanation | undefined> {
  const [row] = await db<RunExplanation[]>`SELECT * FROM run_explanations WHERE run_id = ${runId}`;
  return row;
}

/** Keeps the explanation unless one is there already; answers the one kept. */
export async function saveRunExplanation(db: Db, explanation: Omit<RunExplanation, 'explained_at'>): Promise<{ explanation: RunExplanation; created: boolean }> {
  const [row] = await db<RunExplanation[]>`
    INSERT INTO run_explanations (run_id, provider, model, answer, explained_by)
    VALUES (${explanation.run_id}, ${explanation.provider}, ${explanation.model}, ${explanation.answer}, ${explanation.explained_by})
    ON CONFLICT (run_id) DO NOTHING RETURNING *`;
  if (row) return { explanation: row, created: true };
  return { explanation: (await getRunExplanation(db, explanation.run_id))!, created: false };
}
