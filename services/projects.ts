import { promises as fs } from 'node:fs';
import path from 'node:path';
import { ApiError, badRequest, conflict, notFound } from '../core/errors';
import { newId } from '../core/ids';
import { browsePath, checkoutDir, isWithin, repositoryTarget } from '../core/project-paths';
import { fetchProject, GitError, readTree, UNREACHABLE, type FetchSource, type GitCredential, type TreeEntry } from '../activities/git';
import { checkedAddress } from './notification-egress';
import { deleteWithAttachments } from './notifications';
import { jobsOf } from './jobs';
import { getCredentialsWithTypes } from '../store/credentials';
import { CredentialOpenError, openCredential } from './credentials';
import { deleteGrantsOn } from '../store/access';
import { isUniqueViolation, type Db } from '../store/db';
import {
  claimProjectUpdate,
  deleteProject,
  findOwedProjectUpdates,
  getProject,
  getProjectForUpdate,
  insertProject,
  recordProjectUpdate,
  templatesUsingProject,
  updateProject,
  type Project,
  type ProjectFields,
} from '../store/projects';
import type { Caller } from '../store/tokens';
import { requireAccess } from './access';
import { recordMutation, serviceOrigin, unchanged, type AuditOrigin } from './audit';
import type { ServerContext } from './context';
import { requireOrgPlacement } from './groups';

/**
 * Git projects (spec part A 4.5). A project names a repository; Cairn keeps the commits it fetched
 * in `<data dir>/projects/<id>`, fetched by git as a sandboxed job (activities/git.ts), and a run
 * of a template that names the project works in its commit's tree, which the launch recorded on the
 * run (`project: {id, commit}` in its spec and view), unpacked into its work dir.
 *
 * A repository address is https, ssh or scp-like by default; a remote's host is resolved and
 * checked against the egress rule notification targets obey (private, loopback and link-local
 * addresses refused unless SERVICE_EGRESS_ALLOW exempts them) when the project is saved and again
 * at every fetch, which connects to exactly the address checked. A path on the server (or
 * `file://`) is accepted only within a directory of `--project-local-roots`, and never inside the
 * data dir, the project cache or the work root. Whatever the reason a remote cannot be reached, it reads the same (UNREACHABLE).
 *
 * An update is durable work owed in PostgreSQL: a create or a PUT records `update_requested_at`
 * and the server starts the update at once in this process; a server that dies before it ends
 * leaves the request owed, and any server's sweeper starts it again once its claim is older than
 * the git timeout allows an update to take (`sweepProjectUpdates`). Its outcome, `status`,
 * `commit` and `last_error`, is recorded with a chain entry (`PROJECT /projects/{id}/update`).
 *
 * Access is the template model's: the creator manages, grants give read, use or manage, an
 * organization's admins manage. Reading and browsing need read; naming the project on a template
 * needs use; editing and deleting need manage.
 */

/** A project write as parsed from its body. */
export interface ProjectDraft {
  name: string;
  url: string;
  branch?: string | null;
  org_id?: string | null;
  /** A source-control (`scm`) credential to clone with; needs `use` on it. */
  credential_id?: string | null;
  id?: unknown;
}

/** A project as every read shows it. */
export function projectView(project: Project) {
  return {
    id: project.id,
    name: project.name,
    url: project.url,
    branch: project.branch,
    credential_id: project.credential_id,
    status: project.status,
    commit: project.commit_sha,
    last_error: project.last_error,
    update_pending: project.update_requested_at !== null,
    last_updated_at: project.last_updated_at?.toISOString() ?? null,
    owner_id: project.owner_id,
    org_id: project.org_id,
    created_by: project.created_by,
    created_at: project.created_at.toISOString(),
    updated_at: project.updated_at.toISOString(),
  };
}

function audited(project: Project): Record<string, unknown> {
  return { name: project.name, url: project.url, branch: project.branch, org_id: project.org_id, credential_id: project.credential_id };
}

const fieldsOf = (draft: ProjectDraft): ProjectFields => ({
  name: draft.name,
  url: draft.url,
  branch: draft.branch ?? null,
  credential_id: draft.credential_id ?? null,
  org_id: draft.org_id ?? null,
});

/** A project's credential: one the caller may use, of the `scm` kind (400 naming `credential_id` otherwise). */
async function requireScmCredential(db: Db, caller: Caller, credentialId: string): Promise<void> {
  if (!credentialId.startsWith('cred_')) throw badRequest(`credential_id: ${JSON.stringify(credentialId)} is not a credential id`, { field: 'credential_id' });
  await requireAccess(db, caller, credentialId, 'use', { action: `cloning with credential ${credentialId}`, field: 'credential_id' });
  const [row] = await getCredentialsWithTypes(db, [credentialId]);
  if (!row) throw badRequest(`credential_id: credential ${credentialId} not found`, { field: 'credential_id' });
  if (row.credential.kind !== 'scm') {
    throw badRequest(`credential_id: credential ${credentialId} is of kind ${row.credential.kind}; a project clones with a source control (scm) credential`, { field: 'credential_id' });
  }
}

/** The project's credential opened for one update, as git takes it (activities/git.ts). */
async function gitCredentialOf(ctx: ServerContext, credentialId: string | null): Promise<GitCredential | undefined> {
  if (!credentialId) return undefined;
  const { values } = await openCredential(ctx.sql, ctx.sealer, credentialId);
  return { username: values.username, password: values.password, sshKey: values.ssh_key_data, sshKeyPassphrase: values.ssh_key_unlock };
}

/**
 * Where a fetch of `url` may go, checked now: a remote's host resolved and every address checked
 * against the egress rule (the first one is what git connects to), or a local path within
 * `--project-local-roots` (links resolved) and outside the data dir. A refusal is a GitError.
 */
export async function fetchSourceOf(ctx: Pick<ServerContext, 'config' | 'logger'>, url: string): Promise<FetchSource> {
  const target = repositoryTarget(url);
  if ('fault' in target) throw new GitError(`the repository address ${target.fault}`);
  if (target.kind === 'remote') {
    let address: string;
    try {
      address = await checkedAddress(ctx.config.delivery, target.host);
    } catch {
      throw new GitError(UNREACHABLE);
    }
    return { target, address };
  }
  const roots = ctx.config.projectLocalRoots;
  const refusal = `the repository address is a path on this server, which a project may name only within a directory of --project-local-roots${roots.length ? ` (${roots.join(', ')})` : ' (none is set)'}`;
  if (roots.length === 0) throw new GitError(refusal);
  let real: string;
  try {
    real = await fs.realpath(target.path);
  } catch {
    throw new GitError('the repository address names a path that does not exist on this server');
  }
  const realRoots = await Promise.all(roots.map((root) => fs.realpath(root).catch(() => root)));
  // Never the install's own files: another project's repository, a run's work dir, the database.
  const site = await jobsOf(ctx);
  const own = await Promise.all([ctx.config.dataDir, site.projectsDir, site.workRoot].map((dir) => fs.realpath(dir).catch(() => path.resolve(dir))));
  if (!realRoots.some((root) => isWithin(root, real)) || own.some((dir) => isWithin(dir, real))) throw new GitError(refusal);
  return { target: { kind: 'local', path: real } };
}

/** The url of a project draft, checked as a fetch would check it: a 400 naming `url` when it could not be fetched from. */
async function requireFetchableUrl(ctx: ServerContext, url: string): Promise<void> {
  try {
    await fetchSourceOf(ctx, url);
  } catch (err) {
    if (err instanceof GitError) throw badRequest(`url: ${err.message}`, { field: 'url' });
    throw err;
  }
}

/** The project, when the caller may read it; 404 alike for one that does not exist and one it may not read. */
export async function readableProject(db: Db, caller: Caller, id: string): Promise<Project> {
  const project = await getProject(db, id);
  if (!project) throw notFound(`project ${id}`);
  await requireAccess(db, caller, project.id, 'read', { action: `reading project ${project.id}` });
  return project;
}

/** A new project, managed by its creator; its first update starts at once. 409 when the name is taken. */
export async function createProject(ctx: ServerContext, caller: Caller, origin: AuditOrigin, draft: ProjectDraft): Promise<Project> {
  await requireFetchableUrl(ctx, draft.url);
  const id = newId('prj');
  const project = await recordMutation(ctx.sql, origin, 201, async (tx, entry) => {
    const fields = fieldsOf(draft);
    if (fields.org_id !== null) await requireOrgPlacement(tx, caller, fields.org_id, 'org_id');
    if (fields.credential_id !== null) await requireScmCredential(tx, caller, fields.credential_id);
    const created = await uniqueName(draft.name, () => insertProject(tx, id, fields, caller.account));
    entry.body = { kind: 'project.created', project_id: id, project: audited(created) };
    return created;
  });
  startProjectUpdate(ctx, project.id);
  return project;
}

/** Replaces a project's settings for a caller who manages it; every PUT fetches the repository again. */
export async function replaceProject(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string, draft: ProjectDraft): Promise<Project> {
  if (draft.id !== undefined && draft.id !== null && draft.id !== id) {
    throw badRequest(`id: the body names project ${String(draft.id)} but the path names ${id}; the id cannot change`, { field: 'id' });
  }
  await requireFetchableUrl(ctx, draft.url);
  const project = await recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const current = await getProjectForUpdate(tx, id);
    if (!current) throw notFound(`project ${id}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `editing project ${current.id}` });
    const fields = fieldsOf(draft);
    if (fields.credential_id !== null && fields.credential_id !== current.credential_id) await requireScmCredential(tx, caller, fields.credential_id);
    if (fields.org_id !== null && fields.org_id !== current.org_id) await requireOrgPlacement(tx, caller, fields.org_id, 'org_id');
    const updated = (await uniqueName(draft.name, () => updateProject(tx, id, fields)))!;
    entry.body = { kind: 'project.updated', project_id: id, project: audited(updated), previous: audited(current) };
    return updated;
  });
  startProjectUpdate(ctx, project.id);
  return project;
}

/** Deletes a project and its checkout; 409 naming the templates while any uses it. */
export async function removeProject(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getProjectForUpdate(tx, id);
    if (!current) throw notFound(`project ${id}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `deleting project ${current.id}` });
    const users = await templatesUsingProject(tx, id);
    if (users.length) {
      throw conflict(`project ${id} is in use by template${users.length > 1 ? 's' : ''} ${users.join(', ')}; point them elsewhere or delete them first`, {
        templates: users,
      });
    }
    // Its notification attachments go with it, as its chain entry's path states (spec part A 4.16).
    const { removed: grantsRemoved, attachments } = await deleteWithAttachments(tx, origin, 'project', id, async () => {
      const grants = await deleteGrantsOn(tx, id);
      const deleted = await deleteProject(tx, id);
      // Anything else naming the project by foreign key (an inventory source reading a file of it) keeps it too.
      if (typeof deleted === 'object') throw conflict(`project ${id} is in use (${deleted.inUseBy} names it); remove that use first`, { in_use_by: deleted.inUseBy });
      if (!deleted) throw notFound(`project ${id}`);
      return grants;
    });
    entry.body = { kind: 'project.deleted', project_id: id, project: audited(current), grants_removed: grantsRemoved, notification_attachments: attachments };
  });
  await fs.rm(checkoutDir((await jobsOf(ctx)).projectsDir, id), { recursive: true, force: true }).catch((err) => {
    ctx.logger.warn({ projectId: id, err: (err as Error).message }, "removing a deleted project's checkout failed");
  });
}

async function uniqueName<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`a project named ${JSON.stringify(name)} exists already; project names are unique`, { field: 'name' });
    throw err;
  }
}


/**
 * How long an update's claim is honoured before another server may take the update over: a
 * generous bound on the git commands one update runs, each within --git-timeout.
 */
const claimSeconds = (ctx: ServerContext) => ctx.config.gitTimeout * 5 + 30;

/** Starts the project's owed update in this process; the sweeper takes it over if this server stops. */
export function startProjectUpdate(ctx: ServerContext, id: string): void {
  void runProjectUpdate(ctx, id).catch((err) => ctx.logger.warn({ projectId: id, err: (err as Error).message }, 'a project update could not be recorded'));
}

/** Updates in flight in this process, so tests and the sweeper can wait on them. */
const inFlight = new Map<string, Promise<void>>();

/**
 * Runs one owed update, if this server wins its claim: fetches the repository into the checkout
 * and records the commit, or the error. An update asked for while this one ran stays owed and
 * runs next.
 */
export async function runProjectUpdate(ctx: ServerContext, id: string): Promise<void> {
  const running = inFlight.get(id);
  if (running) return running;
  const work = (async () => {
    for (;;) {
      const claimed = await claimProjectUpdate(ctx.sql, id, claimSeconds(ctx));
      if (!claimed) return;
      const claimedAt = claimed.update_claimed_at!;
      let outcome: { commit: string } | { error: string };
      try {
        const credential = await gitCredentialOf(ctx, claimed.credential_id);
        const source = await fetchSourceOf(ctx, claimed.url);
        const site = await jobsOf(ctx);
        const commit = await fetchProject(
          site,
          checkoutDir(site.projectsDir, id),
          claimed.url,
          claimed.branch,
          source,
          { timeoutMs: ctx.config.gitTimeout * 1000, credential, proxy: ctx.config.delivery.proxy },
          (detail) => ctx.logger.info({ projectId: id, detail }, 'a project fetch failed'),
        );
        outcome = { commit };
      } catch (err) {
        const known = err instanceof GitError || err instanceof CredentialOpenError;
        if (!known) ctx.logger.error({ projectId: id, err }, 'a project update failed');
        outcome = { error: known ? (err as Error).message : 'the update failed; the server log has the detail' };
      }
      const origin = serviceOrigin('PROJECT', `/projects/${id}/update`);
      const recorded = await recordMutation(ctx.sql, origin, 'commit' in outcome ? 'successful' : 'failed', async (tx, entry) => {
        const row = await recordProjectUpdate(tx, id, claimedAt, outcome);
        // Deleted, or its claim taken over, meanwhile: nothing of this update is kept.
        if (!row) return unchanged(undefined);
        entry.body = { kind: 'project.update', project_id: id, ...('commit' in outcome ? { commit: outcome.commit } : { error: outcome.error }) };
        return row;
      });
      // Owed again (a PUT came while it ran): go round; else done.
      if (!recorded || recorded.update_requested_at === null) return;
    }
  })().finally(() => inFlight.delete(id));
  inFlight.set(id, work);
  return work;
}

/** The sweeper's part: starts every owed update whose claim is missing or stale. */
export async function sweepProjectUpdates(ctx: ServerContext, stopped: () => boolean): Promise<void> {
  for (const id of await findOwedProjectUpdates(ctx.sql, 3, claimSeconds(ctx), 20)) {
    if (stopped()) return;
    if (!inFlight.has(id)) startProjectUpdate(ctx, id);
  }
}

/**
 * What a launch records of the template's project: its id and the commit its checkout holds. A
 * project that is gone, or has no checkout yet, is a configuration error (spec part B 7.3): 400
 * naming it, which an unattended launch answers as 409.
 */
export async function projectForLaunch(db: Db, projectId: string): Promise<{ id: string; commit: string }> {
  const project = await getProject(db, projectId);
  if (!project) throw badRequest(`project ${projectId} no longer exists`, { field: 'project_id' });
  if (!project.commit_sha) {
    throw badRequest(`project ${projectId} has no checkout yet (status ${project.status}${project.last_error ? `: ${project.last_error}` : ''})`, {
      field: 'project_id',
    });
  }
  return { id: project.id, commit: project.commit_sha };
}

/** An entry of `GET /v1/projects/{id}/files`. */
export type FileEntry = TreeEntry;

/** The most entries one listing carries; `truncated` says when there were more. */
export const MAX_LISTED_FILES = 10_000;
/** The largest file `GET /v1/projects/{id}/file` returns. */
export const MAX_FILE_BYTES = 1024 * 1024;
/** How long reading a project's tree may take. */
const TREE_READ_TIMEOUT_MS = 60_000;

/**
 * What a browse path names in the project's commit, read from git's objects in the sandbox
 * (activities/git.ts readTree): the path checked as text first (core/project-paths.ts browsePath:
 * relative, no `..`, not .git), links followed only within the tree, a link leading out of it
 * refused.
 */
async function readInTree(ctx: ServerContext, project: Project, asked: string) {
  const checked = browsePath(asked);
  if ('fault' in checked) throw badRequest(`path ${checked.fault}`, { field: 'path' });
  if (!project.commit_sha) throw conflict(`project ${project.id} has no checkout yet (status ${project.status})`);
  let read;
  try {
    const site = await jobsOf(ctx);
    read = await readTree(site, checkoutDir(site.projectsDir, project.id), project.commit_sha, checked.path, {
      maxEntries: MAX_LISTED_FILES,
      maxFileBytes: MAX_FILE_BYTES,
      timeoutMs: TREE_READ_TIMEOUT_MS,
    });
  } catch (err) {
    if (err instanceof GitError) {
      ctx.logger.warn({ projectId: project.id, err: err.message }, "a project's tree could not be read");
      throw conflict(`project ${project.id}: its checkout on this server could not be read; update the project to fetch it again`);
    }
    throw err;
  }
  switch (read.kind) {
    case 'missing':
      throw notFound(`path ${checked.path} in project ${project.id}`);
    case 'outside':
      throw badRequest(`path ${checked.path} leads outside the checkout (through a symlink); only files within it can be read`, { field: 'path' });
    case 'unresolvable':
      throw badRequest(`path ${checked.path} cannot be resolved within the checkout`, { field: 'path' });
    default:
      return { relative: checked.path, read };
  }
}

/** The checkout's tree under `asked` ("" the root), depth first; symlinks listed, not followed. */
export async function listProjectFiles(ctx: ServerContext, project: Project, asked: string): Promise<{ path: string; files: FileEntry[]; truncated: boolean }> {
  const { relative, read } = await readInTree(ctx, project, asked);
  if (read.kind !== 'dir') throw badRequest(`path ${relative} is a file; read it with GET /v1/projects/${project.id}/file?path=`, { field: 'path' });
  const prefix = relative === '' ? '' : `${relative}/`;
  return { path: relative, files: read.entries.map((entry) => ({ ...entry, path: prefix + entry.path })), truncated: read.truncated };
}

/** One file of the checkout: UTF-8 text as `content`, other bytes as `content_base64`; at most MAX_FILE_BYTES. */
export async function readProjectFile(ctx: ServerContext, project: Project, asked: string) {
  if (asked === '') throw badRequest('path is required: the file to read, relative to the checkout', { field: 'path' });
  const { relative, read } = await readInTree(ctx, project, asked);
  if (read.kind === 'dir') throw badRequest(`path ${relative} is a directory; list it with GET /v1/projects/${project.id}/files?path=`, { field: 'path' });
  if (!read.bytes) throw new ApiError(413, `path ${relative} is ${read.size} bytes; files over ${MAX_FILE_BYTES} bytes are not shown`, { limit_bytes: MAX_FILE_BYTES });
  const bytes = read.bytes;
  let content: string | undefined;
  try {
    content = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    content = undefined;
  }
  return {
    project_id: project.id,
    commit: project.commit_sha,
    path: relative,
    size: bytes.length,
    ...(content !== undefined && !content.includes('\u0000') ? { content } : { content_base64: bytes.toString('base64') }),
  };
}
