import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Sql } from './db';
import { LOCKS, takeLock } from './locks';
import { installRoot } from '../core/install-root';

const SCHEMA_DIR = path.join(installRoot(__dirname, 1), 'schema');

/** Applies the numbered SQL files in schema/ that this database has not seen, each once, in order. */
export async function migrate(sql: Sql): Promise<string[]> {
  const files = (await fs.readdir(SCHEMA_DIR)).filter((f) => /^\d+_.*\.sql$/.test(f)).sort();
  return sql.begin(async (tx) => {
    // Two servers starting at once apply the schema one after the other.
    await takeLock(tx, LOCKS.migrations);
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (
      version text PRIMARY KEY,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`;
    const done = new Set((await tx`SELECT version FROM schema_migrations`).map((r) => r.version as string));
    const applied: string[] = [];
    for (const file of files) {
      if (done.has(file)) continue;
      await tx.unsafe(await fs.readFile(path.join(SCHEMA_DIR, file), 'utf8'));
      await tx`INSERT INTO schema_migrations (version) VALUES (${file})`;
      applied.push(file);
    }
    return applied;
  });
}
