import type { Sql } from '../store/db';
import { activateRotatedKey, removeRetiredKey } from '../services/federation/keys';

/**
 * A normal key rotation's steps (workflows/key-rotation.ts), each recorded at the time the
 * workflow gives (its own clock, so a rotation's times are the timers', not the activity's start).
 * Each is safe to run twice: a step already taken, or overtaken by an emergency rotation, does nothing.
 */
export function createFederationActivities(deps: { sql: Sql }) {
  return {
    async activateRotatedKey(newKeyId: string, oldKeyId: string, atMs: number): Promise<void> {
      await activateRotatedKey(deps.sql, newKeyId, oldKeyId, new Date(atMs));
    },
    async removeRetiredKey(oldKeyId: string, atMs: number): Promise<void> {
      await removeRetiredKey(deps.sql, oldKeyId, new Date(atMs));
    },
  };
}

export type FederationActivities = ReturnType<typeof createFederationActivities>;
