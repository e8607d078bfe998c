import { readableBy } from './access';
import { type Db, type Page, type PageRequest, readPage } from './db';

/** A git project (spec part A 4.5) as stored. */
export interface Project {
  id: string;
  name: string;
  url: string;
  branch: string | null;
  credential_id: string | null;
  status: 'pending' | 'updating' | 'successful' | 'failed';
  commit_sha: string | null;
  last_error: string | null;
  update_requested_at: Date | null;
  last_updated_at: Date | null;
  owner_id: string | null;
  org_id: string | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export type ProjectFields = Pick<Project, 'name' | 'url' | 'branch' | 'credential_id' | 'org_id'>;

/** A new project, its first update owed from now. */
export async function insertProject(db: Db, id: string, fields: ProjectFields, owner: { id: string; username: string }): Promise<Project> {
  const [row] = await db<Project[]>`
    INSERT INTO projects (id, name, url, branch, credential_id, org_id, owner_id, created_by, update_requested_at)
    VALUES (${id}, ${fields.name}, ${fields.url}, ${fields.branch}, ${fields.credential_id}, ${fields.org_id}, ${owner.id}, ${owner.username}, now())
    RETURNING *`;
  return row;
}

/** Replaces a project's settings and owes it an update (every PUT fetches again). */
export async function updateProject(db: Db, id: string, fields: ProjectFields): Promise<Project | undefined> {
  const [row] = await db<Project[]>`
    UPDATE projects SET name = ${fields.name}, url = ${fields.url}, branch = ${fields.branch}, credential_id = ${fields.credential_id},
      org_id = ${fields.org_id}, update_requested_at = now(), updated_at = now()
    WHERE id = ${id} RETURNING *`;
  return row;
}

export async function getProject(db: Db, id: string): Promise<Project | undefined> {
  const [row] = await db<Project[]>`SELECT * FROM projects WHERE id = ${id}`;
  return row;
}

export async function getProjectForUpdate(db: Db, id: string): Promise<Project | undefined> {
  const [row] = await db<Project[]>`SELECT * FROM projects WHERE id = ${id} FOR UPDATE`;
  return row;
}

/** Deletes a project: true, false when there was none, or the table whose row still names it (a foreign key refused it). */
export async function deleteProject(db: Db, id: string): Promise<boolean | { inUseBy: string }> {
  try {
    return (await db`DELETE FROM projects WHERE id = ${id} RETURNING id`).length > 0;
  } catch (err) {
    const fault = err as { code?: string; table_name?: string };
    if (fault.code === '23503') return { inUseBy: fault.table_name ?? 'another record' };
    throw err;
  }
}

/** The templates that name the project, at most `limit` of them, for the 409 of a delete. */
export async function templatesUsingProject(db: Db, id: string, limit = 20): Promise<string[]> {
  const rows = await db<{ id: string }[]>`SELECT id FROM templates WHERE project_id = ${id} ORDER BY id LIMIT ${limit}`;
  return rows.map((r) => r.id);
}

/** A page of projects, oldest first, with the total: every project, or only those `readerId` may read. */
export async function listProjectPage(
  db: Db,
  page: PageRequest,
  readerId?: string,
): Promise<Page<Project>> {
  const readable = readerId !== undefined ? readableBy(db, readerId, 'projects') : null;
  return readPage(db, { from: db`projects`, order: db`created_at, id`, where: [readable] }, page);
}

/**
 * An update starting: the project reads `updating`, and the request it answers is the one made
 * at or before now. Returns the project, or undefined when it is gone.
 */
export async function startProjectUpdate(db: Db, id: string): Promise<(Project & { answering: Date }) | undefined> {
  const [row] = await db<(Project & { answering: Date })[]>`
    UPDATE projects SET status = 'updating' WHERE id = ${id}
    RETURNING *, clock_timestamp() AS answering`;
  return row;
}

/**
 * Records an update's outcome. The owed request is cleared only when none came after the update
 * started (`answering`); a later request stays owed, and its own signal runs the update again.
 */
export async function recordProjectUpdate(
  db: Db,
  id: string,
  answering: Date,
  outcome: { commit: string } | { error: string },
): Promise<Project | undefined> {
  const ok = 'commit' in outcome;
  const [row] = await db<Project[]>`
    UPDATE projects SET
      status = ${ok ? 'successful' : 'failed'},
      commit_sha = ${ok ? outcome.commit : db`commit_sha`},
      last_error = ${ok ? null : outcome.error},
      last_updated_at = now(),
      update_requested_at = CASE WHEN update_requested_at <= ${answering} THEN NULL ELSE update_requested_at END
    WHERE id = ${id}
    RETURNING *`;
  return row;
}
