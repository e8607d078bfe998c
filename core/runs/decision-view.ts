import type { DecisionComment, DecisionKind, DecisionRecord, RedactionCategory } from './decision';

export interface RedactionView {
  at: string;
  by: string;
  category: RedactionCategory;
  /** The chain entry that records the redaction. */
  entry_id: string | null;
}

/**
 * A decision record as every reader sees it: the decisions endpoint, a full receipt and the
 * evidence dossier. With `disclosed` false (a reader who is neither an admin nor the requester)
 * the reason and random value are withheld and only the commitment shows.
 */
export interface DecisionView {
  id: string;
  kind: DecisionKind;
  /** For a correction: the decision it corrects. */
  decision_id: string | null;
  actor: string;
  actor_kind: string;
  at: string;
  reason: string | null;
  random: string | null;
  commitment: string | null;
  redaction: RedactionView | null;
  withheld: boolean;
  /** Present on a decision made from a pull request comment (spec part A 2.7 rule 4). */
  comment?: DecisionComment;
}

export function decisionView(record: DecisionRecord, disclosed = true): DecisionView {
  return {
    id: record.id,
    kind: record.kind,
    decision_id: record.decision_id,
    actor: record.actor,
    actor_kind: record.actor_kind,
    at: record.at.toISOString(),
    reason: disclosed ? record.reason : null,
    random: disclosed ? record.random : null,
    commitment: record.commitment,
    redaction:
      record.redacted_at && record.redacted_by && record.redaction_category
        ? { at: record.redacted_at.toISOString(), by: record.redacted_by, category: record.redaction_category, entry_id: record.redaction_entry_id }
        : null,
    withheld: !disclosed,
    ...(record.comment ? { comment: record.comment } : {}),
  };
}
