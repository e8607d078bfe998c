import { execFile } from 'node:child_process';
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/**
 * A run's work dir, as the server touches it. The dir is the run's own: once its tool (or a
 * project's tree, unpacked in the sandbox) has been in it, every name in it may be a link, a
 * FIFO or anything else the run made. So the server writes only into a dir it has just created
 * and not yet handed over, with exclusive creates that follow no link, and reads back only
 * top-level files it opens without following a link, without blocking on a FIFO, and only when
 * they are regular files.
 */

/** The account the files belong to once handed over: the run account when the server is root. */
export interface WorkDirOwner {
  uid: number;
  gid: number;
}

/** Why a name cannot be written into a work dir (a tool file name Cairn itself chose). */
export class WorkDirError extends Error {}

/** A fresh, empty work dir only the server can enter (0700); anything at that path before is removed. */
export async function createWorkDir(workDir: string): Promise<void> {
  await removeWorkDir(workDir);
  await fs.mkdir(workDir, { recursive: true, mode: 0o700 });
  await fs.chmod(workDir, 0o700);
}

/** The relative segments of a file name written into a work dir; a name that could leave it is refused. */
function segmentsOf(name: string): string[] {
  const segments = name.split('/');
  if (path.isAbsolute(name) || segments.some((s) => s === '' || s === '.' || s === '..' || s.includes('\u0000'))) {
    throw new WorkDirError(`${JSON.stringify(name)} is not a file name within the work dir`);
  }
  return segments;
}

/**
 * Writes the tool's files into a work dir made by createWorkDir and not yet handed over: each
 * created exclusively (a name that exists already is an error, never overwritten) and never
 * through a link, 0600, owned by `owner`; directories on the way are made 0700 likewise.
 */
export async function writeWorkFiles(workDir: string, files: Record<string, string | Buffer>, owner: WorkDirOwner | undefined): Promise<void> {
  const made = new Set<string>();
  for (const [name, content] of Object.entries(files)) {
    const segments = segmentsOf(name);
    let dir = workDir;
    for (const segment of segments.slice(0, -1)) {
      dir = path.join(dir, segment);
      if (made.has(dir)) continue;
      await fs.mkdir(dir, { mode: 0o700 });
      if (owner) await fs.lchown(dir, owner.uid, owner.gid);
      made.add(dir);
    }
    const handle = await fs.open(path.join(workDir, name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      await handle.writeFile(content);
      if (owner) await handle.chown(owner.uid, owner.gid);
    } finally {
      await handle.close();
    }
  }
}

/** Hands the work dir to the account its tool runs as; from now on the server writes nothing in it. */
export async function handOverWorkDir(workDir: string, owner: WorkDirOwner | undefined): Promise<void> {
  if (owner) await fs.lchown(workDir, owner.uid, owner.gid);
}

/** A top-level file of a work dir read back: its bytes (at most `maxBytes`) and its whole size. */
export interface WorkFile {
  size: number;
  bytes: Buffer;
}

/**
 * Reads a top-level file the run may have replaced: no link followed, a FIFO never waited on,
 * anything but a regular file taken as absent. Undefined when there is no such regular file.
 */
export async function readWorkFile(workDir: string, name: string, maxBytes: number): Promise<WorkFile | undefined> {
  if (name.includes('/') || name === '.' || name === '..') throw new WorkDirError(`${JSON.stringify(name)} is not a top-level name`);
  let handle;
  try {
    handle = await fs.open(path.join(workDir, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return undefined;
    const bytes = Buffer.alloc(Math.min(stat.size, maxBytes));
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
    return { size: stat.size, bytes: bytes.subarray(0, bytesRead) };
  } finally {
    await handle.close();
  }
}

/** Top-level names of a work dir starting with `prefix`, at most `max` of them (a run may make millions). */
export async function workDirNames(workDir: string, prefix: string, max: number): Promise<string[]> {
  const names: string[] = [];
  let dir;
  try {
    dir = await fs.opendir(workDir);
  } catch {
    return names;
  }
  try {
    for await (const entry of dir) {
      if (entry.name.startsWith(prefix)) names.push(entry.name);
      if (names.length >= max) break;
    }
  } catch {
    /* gone meanwhile */
  }
  return names;
}

/** Removes a work dir (links in it are removed, never followed), even one whose tool left directories it may not read. */
export async function removeWorkDir(workDir: string): Promise<void> {
  try {
    await fs.rm(workDir, { recursive: true, force: true });
  } catch {
    // `chmod -R` changes no link's target: it skips links met while walking.
    await execFileAsync('chmod', ['-R', 'u+rwx', '--', workDir]).catch(() => undefined);
    await fs.rm(workDir, { recursive: true, force: true }).catch(() => undefined);
  }
}
