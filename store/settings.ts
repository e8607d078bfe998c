import type { Db } from './db';

export async function getSetting<T>(db: Db, key: string): Promise<T | undefined> {
  const [row] = await db<{ value: T }[]>`SELECT value FROM settings WHERE key = ${key}`;
  return row?.value;
}

/** Inserts the setting unless it exists; true when this call wrote it. */
export async function insertSettingOnce(db: Db, key: string, value: unknown): Promise<boolean> {
  const rows = await db`
    INSERT INTO settings (key, value) VALUES (${key}, ${db.json(value as never)})
    ON CONFLICT (key) DO NOTHING RETURNING key`;
  return rows.length > 0;
}

/** Writes the setting whole, whether or not it existed. */
export async function replaceSetting(db: Db, key: string, value: unknown): Promise<void> {
  await db`
    INSERT INTO settings (key, value) VALUES (${key}, ${db.json(value as never)})
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`;
}
