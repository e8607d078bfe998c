import type { ReviewSettings } from '../core/schedules/review';
import { followerReadableBy } from './access';
import { type Db, type Page, type PageRequest, readPage } from './db';

/**
 * A stored webhook trigger (spec part A 4.7). The hook's path token is stored only as its SHA-256
 * (`hook_token_hash`, which no read selects) and the signing secret only sealed.
 */
export interface Trigger {
  id: string;
  name: string;
  kind: 'push' | 'review';
  template_id: string;
  /** A review trigger's settings (core/schedules/review.ts); null on a push trigger. */
  review: ReviewSettings | null;
  /** A review trigger's forge API token, sealed (context `trigger:<id>:forge-token`). */
  forge_token_sealed: string | null;
  /** The account a delivery fires as. */
  owner_account_id: string;
  /** Whether the owner made the trigger through an agent token: its runs are then held like the agent's own. */
  owner_actor_kind: 'user' | 'agent';
  created_by: string;
  /** The signing secret, sealed (context `trigger:<id>:signing-secret`). */
  secret_sealed: string;
  enforce_signature: boolean;
  secret_rotated_at: Date | null;
  last_error: string | null;
  last_error_at: Date | null;
  last_delivery_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = [
  'id', 'name', 'kind', 'template_id', 'review', 'forge_token_sealed', 'owner_account_id', 'owner_actor_kind', 'created_by', 'secret_sealed', 'enforce_signature',
  'secret_rotated_at', 'last_error', 'last_error_at', 'last_delivery_at', 'created_at', 'updated_at',
];

export type NewTrigger = Pick<
  Trigger,
  'id' | 'name' | 'kind' | 'review' | 'forge_token_sealed' | 'template_id' | 'owner_account_id' | 'owner_actor_kind' | 'created_by' | 'secret_sealed' | 'enforce_signature'
> & { hook_token_hash: Buffer };

export async function insertTrigger(db: Db, trigger: NewTrigger): Promise<Trigger> {
  const [row] = await db<Trigger[]>`
    INSERT INTO triggers ${db({ ...trigger, review: trigger.review === null ? null : db.json(trigger.review as never) } as unknown as Record<string, unknown>)} RETURNING ${db(COLUMNS)}`;
  return row;
}

export async function getTrigger(db: Db, id: string): Promise<Trigger | undefined> {
  const [row] = await db<Trigger[]>`SELECT ${db(COLUMNS)} FROM triggers WHERE id = ${id}`;
  return row;
}

export async function getTriggerForUpdate(db: Db, id: string): Promise<Trigger | undefined> {
  const [row] = await db<Trigger[]>`SELECT ${db(COLUMNS)} FROM triggers WHERE id = ${id} FOR UPDATE`;
  return row;
}

/** The trigger whose hook token has this hash; a deleted trigger's token finds nothing. */
export async function findTriggerByTokenHash(db: Db, tokenHash: Buffer): Promise<Trigger | undefined> {
  const [row] = await db<Trigger[]>`SELECT ${db(COLUMNS)} FROM triggers WHERE hook_token_hash = ${tokenHash}`;
  return row;
}

export async function updateTriggerSettings(
  db: Db,
  id: string,
  settings: Pick<Trigger, 'name' | 'enforce_signature' | 'review' | 'forge_token_sealed'>,
): Promise<Trigger | undefined> {
  const [row] = await db<Trigger[]>`
    UPDATE triggers SET name = ${settings.name}, enforce_signature = ${settings.enforce_signature},
      review = ${settings.review === null ? null : db.json(settings.review as never)}, forge_token_sealed = ${settings.forge_token_sealed}, updated_at = now()
    WHERE id = ${id} RETURNING ${db(COLUMNS)}`;
  return row;
}

/** Replaces the sealed signing secret: from the commit on, only the new one is accepted. */
export async function replaceTriggerSecret(db: Db, id: string, secretSealed: string): Promise<Trigger | undefined> {
  const [row] = await db<Trigger[]>`
    UPDATE triggers SET secret_sealed = ${secretSealed}, secret_rotated_at = now(), updated_at = now()
    WHERE id = ${id} RETURNING ${db(COLUMNS)}`;
  return row;
}

export async function deleteTrigger(db: Db, id: string): Promise<boolean> {
  return (await db`DELETE FROM triggers WHERE id = ${id} RETURNING id`).length > 0;
}

/** A page of triggers for `GET /v1/triggers`, oldest first, with the total. */
export async function listTriggerPage(
  db: Db,
  page: PageRequest,
  readerId?: string,
): Promise<Page<Trigger>> {
  const readable = readerId !== undefined ? followerReadableBy(db, readerId, 'owner_account_id') : null;
  return readPage(db, { columns: db(COLUMNS), from: db`triggers`, order: db`id`, where: [readable] }, page);
}

/**
 * Records how a delivery that arrived at `receivedAt` ended: `error` says why it started no run,
 * null clears the last error because it started one. A delivery older than the one recorded
 * changes nothing, so a slow launch finishing late never hides a newer delivery's outcome.
 */
export async function recordDeliveryOutcome(db: Db, id: string, receivedAt: Date, error: string | null): Promise<void> {
  await db`
    UPDATE triggers SET last_error = ${error}, last_error_at = CASE WHEN ${error}::text IS NULL THEN NULL ELSE now() END, last_delivery_at = ${receivedAt}
    WHERE id = ${id} AND (last_delivery_at IS NULL OR last_delivery_at <= ${receivedAt})`;
}
