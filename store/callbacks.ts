import type { Db } from './db';
import type { Template, TemplateExtras } from './templates';

/**
 * Provisioning callbacks' records (spec part A 2.3, 4.6; part B 7.5): a template's project and
 * callback settings, its sealed host config key, the one-at-a-time claim per host, and the
 * external ids of deleted templates.
 */

/** Writes a template's project and callback settings (after its insert or update, in the same transaction). */
export async function setTemplateExtras(db: Db, id: string, extras: TemplateExtras): Promise<Template | undefined> {
  const [row] = await db<Template[]>`
    UPDATE templates SET project_id = ${extras.project_id}, allow_callbacks = ${extras.allow_callbacks},
      callback_limit = ${extras.callback_limit}, external_callback = ${extras.external_callback}
    WHERE id = ${id} RETURNING *`;
  return row;
}

export interface CallbackKey {
  template_id: string;
  key_sealed: string;
  owner_account_id: string;
  owner_actor_kind: 'user' | 'agent';
  created_by: string;
  created_at: Date;
}

/** Sets (or replaces) the template's key. */
export async function putCallbackKey(db: Db, key: Omit<CallbackKey, 'created_at'>): Promise<CallbackKey> {
  const [row] = await db<CallbackKey[]>`
    INSERT INTO callback_keys ${db(key)}
    ON CONFLICT (template_id) DO UPDATE SET key_sealed = EXCLUDED.key_sealed, owner_account_id = EXCLUDED.owner_account_id,
      owner_actor_kind = EXCLUDED.owner_actor_kind, created_by = EXCLUDED.created_by, created_at = now()
    RETURNING *`;
  return row;
}

export async function getCallbackKey(db: Db, templateId: string): Promise<CallbackKey | undefined> {
  const [row] = await db<CallbackKey[]>`SELECT * FROM callback_keys WHERE template_id = ${templateId}`;
  return row;
}

/** Revokes the template's key; true when there was one. */
export async function deleteCallbackKey(db: Db, templateId: string): Promise<boolean> {
  return (await db`DELETE FROM callback_keys WHERE template_id = ${templateId} RETURNING template_id`).length > 0;
}

/** The template bound to an external id, and whether a template once bound to it was deleted. */
export async function findExternalTemplate(db: Db, externalId: string): Promise<{ templateId: string } | { deleted: true } | undefined> {
  const [live] = await db<{ id: string }[]>`SELECT id FROM templates WHERE external_job_template_id = ${externalId}`;
  if (live) return { templateId: live.id };
  const [gone] = await db`SELECT 1 FROM deleted_external_templates WHERE external_id = ${externalId}`;
  return gone ? { deleted: true } : undefined;
}

export async function noteExternalCallback(db: Db, templateId: string): Promise<void> {
  await db`UPDATE templates SET external_callback_called_at = now() WHERE id = ${templateId}`;
}

/**
 * Takes the claim for a callback launch for this template and host, unless a claim stands: one
 * whose run has not finished, or one still launching (no run yet) younger than `launchSeconds`.
 * Answers the standing run's id (or null while it launches) when refused.
 */
export async function claimCallback(
  db: Db,
  templateId: string,
  host: string,
  launchSeconds: number,
): Promise<{ claimed: true; claimedAt: Date } | { claimed: false; runId: string | null }> {
  const [row] = await db<{ claimed_at: Date }[]>`
    INSERT INTO callback_claims AS c (template_id, host, run_id, claimed_at)
    VALUES (${templateId}, ${host}, NULL, date_trunc('milliseconds', clock_timestamp()))
    ON CONFLICT (template_id, host) DO UPDATE SET run_id = NULL, claimed_at = EXCLUDED.claimed_at
    WHERE (c.run_id IS NULL AND c.claimed_at < now() - make_interval(secs => ${launchSeconds}))
       OR (c.run_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = c.run_id AND r.finished_at IS NULL))
    RETURNING claimed_at`;
  if (row) return { claimed: true, claimedAt: row.claimed_at };
  const [standing] = await db<{ run_id: string | null }[]>`SELECT run_id FROM callback_claims WHERE template_id = ${templateId} AND host = ${host}`;
  return { claimed: false, runId: standing?.run_id ?? null };
}

/** Names the run a claim launched. */
export async function settleCallbackClaim(db: Db, templateId: string, host: string, claimedAt: Date, runId: string): Promise<void> {
  await db`UPDATE callback_claims SET run_id = ${runId} WHERE template_id = ${templateId} AND host = ${host} AND claimed_at = ${claimedAt}`;
}

/** Gives back a claim whose launch started no run. */
export async function releaseCallbackClaim(db: Db, templateId: string, host: string, claimedAt: Date): Promise<void> {
  await db`DELETE FROM callback_claims WHERE template_id = ${templateId} AND host = ${host} AND claimed_at = ${claimedAt} AND run_id IS NULL`;
}
