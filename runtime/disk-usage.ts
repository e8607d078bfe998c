import { promises as fs, type Dirent } from 'node:fs';
import path from 'node:path';

/**
 * What a tree holds on disk, measured the bounded way a run's disk watcher needs: allocated
 * blocks (a sparse file counts what it uses), each file once however many hard links it has and
 * each directory once however many ways it is reached (a work dir is also bound inside the
 * sandbox's /tmp when the data dir is under /tmp), symlinks never followed, at most
 * DISK_WALK_ENTRIES entries per measure.
 *
 * The trees are a run's, which may change them while they are walked: an entry gone meanwhile
 * counts nothing, and a directory swapped for a link between its listing and its reading is
 * measured where it leads (bounded all the same; nothing measured reaches the run).
 */

/** Entries one measure walks at most; a tree with more counts as over any bound (DISK_ENTRIES_EXCEEDED). */
export const DISK_WALK_ENTRIES = 250_000;
export const DISK_ENTRIES_EXCEEDED = Number.POSITIVE_INFINITY;

/** Entries stat'ed at once: enough to keep the thread pool busy, few enough to leave it to others. */
const BATCH = 64;

/** Bytes the trees under `roots` hold; roots that do not exist count nothing. */
export async function diskUsage(roots: string[], maxEntries = DISK_WALK_ENTRIES): Promise<number> {
  const seen = new Set<string>();
  let bytes = 0;
  let entries = 0;
  const stack: string[] = [];
  const measure = async (file: string): Promise<boolean> => {
    const stat = await fs.lstat(file, { bigint: true }).catch(() => undefined);
    if (!stat) return false;
    if (stat.isDirectory() || stat.nlink > 1n) {
      const key = `${stat.dev}:${stat.ino}`;
      if (seen.has(key)) return false;
      seen.add(key);
    }
    bytes += Number(stat.blocks) * 512;
    return stat.isDirectory();
  };
  for (const root of roots) if (await measure(root)) stack.push(root);
  while (stack.length) {
    const dir = stack.pop()!;
    const listed: Dirent[] = await fs.readdir(dir, { withFileTypes: true }).catch(() => []);
    entries += listed.length;
    if (entries > maxEntries) return DISK_ENTRIES_EXCEEDED;
    for (let i = 0; i < listed.length; i += BATCH) {
      const batch = listed.slice(i, i + BATCH).map((entry) => path.join(dir, entry.name));
      const isDir = await Promise.all(batch.map(measure));
      batch.forEach((file, j) => isDir[j] && stack.push(file));
    }
  }
  return bytes;
}
