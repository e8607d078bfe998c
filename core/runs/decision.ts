/** Decision records of held runs and approval steps (spec part A 2.7): approvals, rejections, corrections. */
export type DecisionKind = 'approve' | 'reject' | 'correction';
export type RedactionCategory = 'personal_data' | 'secret' | 'other';

/**
 * An approval, a rejection or a correction of one (spec part A 2.7). `id` is its chain entry's id.
 * `reason` (the masked text) and `random` open `commitment`; a redaction removes both and keeps
 * the commitment, which can then never be opened again.
 */
export interface DecisionRecord {
  id: string;
  run_id: string;
  kind: DecisionKind;
  /** For a correction: the decision it corrects. */
  decision_id: string | null;
  actor: string;
  actor_kind: string;
  reason: string | null;
  random: string | null;
  commitment: string | null;
  at: Date;
  redacted_at: Date | null;
  redacted_by: string | null;
  redaction_category: RedactionCategory | null;
  redaction_entry_id: string | null;
}
