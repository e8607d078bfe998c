import type postgres from 'postgres';
import type { Db } from './db';

/**
 * The outbox of after-commit effects (schema/023_outbox.sql; services/outbox.ts dispatches them).
 * A write adds the effects it owes in its own transaction, so they commit with it or not at all.
 */

/** What a write may owe after it commits; `subject` is the record it is owed for. */
export type Effect =
  | { effect: 'run.start'; subject: string }
  | { effect: 'run.cancel'; subject: string }
  | { effect: 'run.end_children'; subject: string; payload: { message: string } }
  | { effect: 'step.decided'; subject: string }
  | { effect: 'plan.decided'; subject: string }
  | { effect: 'schedule.hand_off'; subject: string }
  | { effect: 'event.record'; subject: string; payload: { seq: number } }
  | { effect: 'delivery.hand_off'; subject: string; payload: { subject_id: string } }
  | { effect: 'project.update'; subject: string }
  // A recorded webhook push's launch: `subject` is its trigger's id (store/hook-deliveries.ts).
  | { effect: 'hook.launch'; subject: string; payload: { delivery_id: string } }
  | { effect: 'federation.rotate'; subject: string; payload: { newKeyId: string; oldKeyId: string; publishedAt: number; overlapSeconds: number } }
  // A pull request review's report or notice: `subject` is its workflow's id, the payload its input.
  | { effect: 'pull_request.report'; subject: string; payload: Record<string, unknown> };

export type EffectKind = Effect['effect'];

export interface OwedEffect {
  id: string;
  effect: EffectKind;
  subject: string;
  payload: Record<string, unknown>;
  created_at: Date;
  attempts: number;
}

/** Where dispatchers are woken when an effect is owed now. */
export const OUTBOX_CHANNEL = 'cairn_outbox';

/**
 * How long the server that wrote an effect has to carry it out itself, just after its commit,
 * before any dispatcher may take it (a server that dies in between leaves it late, not lost).
 */
export const OWN_GRACE_SECONDS = 3;

/**
 * Who carries out effects first. `true`: the writing server itself, after the commit (completing
 * them), so dispatchers wait out its grace of OWN_GRACE_SECONDS. A number: the same, for that many
 * seconds, when the writer puts the work off on purpose (a schedule fire's run start waits for the
 * fires after it). `false`: any dispatcher, now; every dispatcher is woken at commit.
 */
export type EffectOwner = boolean | number;

/** Effects as the outbox's rows take them (an effect without a payload has an empty one). */
const outboxRows = (effects: Effect[]) => effects.map((e) => ({ effect: e.effect, subject: e.subject, payload: 'payload' in e ? e.payload : {} }));

/** When effects owed by `own` are due to dispatchers. */
function dueAt(db: Db, own: EffectOwner) {
  return own === false ? db`now()` : db`now() + make_interval(secs => ${own === true ? OWN_GRACE_SECONDS : own})`;
}

/** Adds effects owed from `db`'s transaction, carried out first by `own`. Answers the effects' ids in order. */
export async function oweEffects(db: Db, effects: Effect[], own: EffectOwner = false): Promise<string[]> {
  if (effects.length === 0) return [];
  const rows = outboxRows(effects);
  const due = dueAt(db, own);
  const inserted = await db<{ id: string }[]>`
    INSERT INTO outbox (effect, subject, payload, due_at)
    SELECT e.effect, e.subject, e.payload, ${due} FROM jsonb_to_recordset(${db.json(rows as never)}) AS e(effect text, subject text, payload jsonb)
    RETURNING id`;
  if (own === false) await db`SELECT pg_notify(${OUTBOX_CHANNEL}, '')`;
  return inserted.map((r) => String(r.id));
}

/**
 * The same as a step of a larger statement (a CTE named `owed_effects`), for writes made in one
 * statement; `own` as for oweEffects. Its ids are `SELECT id FROM owed_effects`. `onlyIf`: owed
 * only when it holds (a condition on the statement's other steps, such as whether a row was written).
 */
export function oweEffectsStep(db: Db, effects: Effect[], own: EffectOwner, onlyIf?: postgres.Fragment) {
  const rows = outboxRows(effects);
  const due = dueAt(db, own);
  return db`owed_effects AS (
    INSERT INTO outbox (effect, subject, payload, due_at)
    SELECT e.effect, e.subject, e.payload, ${due} FROM jsonb_to_recordset(${db.json(rows as never)}) AS e(effect text, subject text, payload jsonb)
    ${onlyIf ? db`WHERE ${onlyIf}` : db``}
    RETURNING id
  )`;
}

/**
 * Takes up to `limit` effects due now for this dispatcher: each is leased for `leaseSeconds` (its
 * due time moved past the lease, its attempts counted), so no other dispatcher takes it meanwhile,
 * and one whose dispatcher died is due again once the lease runs out.
 */
export async function claimDueEffects(db: Db, limit: number, leaseSeconds: number): Promise<OwedEffect[]> {
  const rows = await db<OwedEffect[]>`
    UPDATE outbox SET due_at = now() + make_interval(secs => ${leaseSeconds}), attempts = attempts + 1
    WHERE id IN (SELECT id FROM outbox WHERE due_at <= now() ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED)
    RETURNING id, effect, subject, payload, created_at, attempts`;
  return rows.map((r) => ({ ...r, id: String(r.id) })).sort((a, b) => Number(a.id) - Number(b.id));
}

/**
 * Holds effects the writing server owes itself for `seconds` more, so no dispatcher takes them
 * while it carries them out late (past its grace); one a dispatcher has taken already (its claim
 * counted an attempt) is not held. Answers the ids held.
 */
export async function holdOwnEffects(db: Db, ids: string[], seconds: number): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await db<{ id: string }[]>`
    UPDATE outbox SET due_at = now() + make_interval(secs => ${seconds}) WHERE id IN ${db(ids)} AND attempts = 0 RETURNING id`;
  return rows.map((r) => String(r.id));
}

/** An effect carried out: gone from the outbox. */
export async function completeEffects(db: Db, ids: string[]): Promise<void> {
  if (ids.length) await db`DELETE FROM outbox WHERE id IN ${db(ids)}`;
}

/**
 * The same as a step of a larger statement (a CTE named `completed_effects`), for work whose last
 * write also completes the effects it carried out: one round trip for both. Empty when `ids` is.
 */
export function completeEffectsStep(db: Db, ids: string[]) {
  return ids.length ? db`completed_effects AS (DELETE FROM outbox WHERE id IN ${db(ids)})` : undefined;
}

/** An effect that failed: due again after `retryInSeconds`, with why. */
export async function retryEffectLater(db: Db, id: string, retryInSeconds: number, error: string): Promise<void> {
  await db`UPDATE outbox SET due_at = now() + make_interval(secs => ${retryInSeconds}), last_error = ${error.slice(0, 2000)} WHERE id = ${id}`;
}

/** Effects owed for longer than `olderThanSeconds`, for the diagnostics check: how many, and the oldest few with their last error. */
export async function lateEffects(
  db: Db,
  olderThanSeconds: number,
): Promise<{ count: number; oldest: (Pick<OwedEffect, 'effect' | 'subject' | 'created_at' | 'attempts'> & { last_error: string | null })[] }> {
  const [{ n }] = await db<{ n: number }[]>`SELECT count(*)::int AS n FROM outbox WHERE created_at < now() - make_interval(secs => ${olderThanSeconds})`;
  const oldest = await db<(Pick<OwedEffect, 'effect' | 'subject' | 'created_at' | 'attempts'> & { last_error: string | null })[]>`
    SELECT effect, subject, created_at, attempts, last_error FROM outbox
    WHERE created_at < now() - make_interval(secs => ${olderThanSeconds}) ORDER BY id LIMIT 10`;
  return { count: n, oldest };
}
