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
  /** A decision made from a pull request comment (spec part A 2.7 rule 4); null otherwise. */
  comment?: DecisionComment | null;
}

/** The pull request comment a decision was made from: never its text, only the SHA-256 of its body. */
export interface DecisionComment {
  forge: string;
  repository: string;
  pull_request: number;
  comment_id: string;
  author: { id: string; login: string };
  /** `sha256:` and the hex SHA-256 of the comment's body as the forge sent it. */
  body_sha256: string;
  /** The digest of the saved plan the comment approved. */
  plan_digest: string;
}
