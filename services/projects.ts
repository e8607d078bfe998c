import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DomainError, badRequest, conflict, notFound } from '../core/errors';
import { newId } from '../core/ids';
import { browsePath, GitError, isWithin, repositoryTarget, UNREACHABLE, type FetchSource, type GitCredential, type TreeEntry, type TreeRead } from '../core/project-paths';
import { perInstallDir } from '../embedded/system-accounts';
import type { Config } from '../core/config';
import type { Sealer } from '../core/credentials/seal';
import { oweEffects } from '../store/outbox';
import { PROJECT_UPDATE_WORKFLOW, projectUpdateRequested, projectWorkflowId, type ProjectUpdateWorkflowInput } from '../workflows/definitions';
import { carryOut } from './effects';
import { checkedAddress } from './notifications/notification-egress';
import { deleteWithAttachments } from './notifications/notifications';
import { JobRefused, runJob } from './jobs';
import { getCredentialsWithTypes } from '../store/credentials';
import { openCredential } from './credentials';
import { deleteGrantsOn } from '../store/access';
import { isUniqueViolation, type Db, type Sql } from '../store/db';
import {
  deleteProject,
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
import { requireAccess } from './access/access';
import { recordMutation, serviceOrigin, unchanged, type AuditOrigin } from './audit/audit';
import type { ServerContext } from './context';
import { requireOrgPlacement } from './access/groups';

/**
 * Git projects (spec part A 4.5). A project names a repository; Cairn keeps the commits it fetched
 * in `<data dir>/projects/<id>`, fetched by git as a sandboxed job (runtime/git.ts), and a run
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
 * An update is durable work on Temporal: a create or a PUT owes a `project.update` effect in the
 * same transaction (store/outbox.ts), carried out after the commit by signalling the project's
 * update workflow (workflows/project.ts), which runs git on a worker of the default pool; a server
 * that dies before the signal leaves the effect owed, and the outbox dispatcher sends it. Its
 * outcome, `status`, `commit` and `last_error`, is recorded with a chain entry
 * (`PROJECT /projects/{id}/update`).
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

/**
 * Where a fetch of `url` may go, checked now: a remote's host resolved and every address checked
 * against the egress rule (the first one is what git connects to), or a local path within
 * `--project-local-roots` (links resolved) and outside the data dir. A refusal is a GitError.
 */
/** What a fetch's checks read of the server's settings. */
export type ProjectFetchSettings = Pick<Config, 'delivery' | 'projectLocalRoots' | 'dataDir' | 'gitTimeout'>;

export async function fetchSourceOf(settings: ProjectFetchSettings, url: string): Promise<FetchSource> {
  const target = repositoryTarget(url);
  if ('fault' in target) throw new GitError(`the repository address ${target.fault}`);
  if (target.kind === 'remote') {
    let address: string;
    try {
      address = await checkedAddress(settings.delivery, target.host);
    } catch {
      throw new GitError(UNREACHABLE);
    }
    return { target, address };
  }
  const roots = settings.projectLocalRoots;
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
  const own = await Promise.all(
    [settings.dataDir, perInstallDir('projects', settings.dataDir), perInstallDir('runs', settings.dataDir)].map((dir) => fs.realpath(dir).catch(() => path.resolve(dir))),
  );
  if (!realRoots.some((root) => isWithin(root, real)) || own.some((dir) => isWithin(dir, real))) throw new GitError(refusal);
  return { target: { kind: 'local', path: real } };
}

/** The url of a project draft, checked as a fetch would check it: a 400 naming `url` when it could not be fetched from. */
export async function requireFetchableUrl(ctx: ServerContext, url: string): Promise<void> {
  try {
    await fetchSourceOf(ctx.config, url);
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
    return { ...created, effects: await oweUpdate(tx, id) };
  });
  return requestUpdate(ctx, project);
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
    return { ...updated, effects: await oweUpdate(tx, id) };
  });
  return requestUpdate(ctx, project);
}

/**
 * Deletes a project; 409 naming the templates while any uses it. Its update workflow runs once
 * more and, finding it gone, removes the repository from the project cache of the worker it runs on.
 */
export async function removeProject(ctx: ServerContext, caller: Caller, origin: AuditOrigin, id: string): Promise<void> {
  const effects = await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
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
    return oweUpdate(tx, id);
  });
  await carryOut(ctx, effects, "removing a deleted project's repository", () => startProjectUpdateWorkflow(ctx, id));
}

async function uniqueName<T>(name: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`a project named ${JSON.stringify(name)} exists already; project names are unique`, { field: 'name' });
    throw err;
  }
}


/** The update a project's save owes (`project.update`, store/outbox.ts), carried out by the saving server. */
const oweUpdate = (tx: Db, projectId: string) => oweEffects(tx, [{ effect: 'project.update', subject: projectId }], true);

/** Asks the project's update workflow for an update just after the save's commit; a failure is left to the outbox dispatcher. */
async function requestUpdate(ctx: ServerContext, saved: Project & { effects: string[] }): Promise<Project> {
  const { effects, ...project } = saved;
  await carryOut(ctx, effects, "starting the project's update", () => startProjectUpdateWorkflow(ctx, project.id));
  return project;
}

/**
 * Starts the project's update workflow (workflow id = project id), or tells the one running that
 * another update is asked for: it runs one more after the one under way. Safe to repeat.
 */
export async function startProjectUpdateWorkflow(ctx: ServerContext, projectId: string): Promise<void> {
  await ctx.temporal.workflow.signalWithStart<(input: ProjectUpdateWorkflowInput) => Promise<void>, []>(PROJECT_UPDATE_WORKFLOW, {
    workflowId: projectWorkflowId(projectId),
    taskQueue: ctx.config.poolQueue,
    args: [{ projectId, fetchTimeoutSeconds: ctx.config.gitTimeout }],
    signal: projectUpdateRequested,
    signalArgs: [],
    // A project's workflow ends once no update is owed; a later save starts a new one.
    workflowIdReusePolicy: 'ALLOW_DUPLICATE',
  });
}

/** The outcome of one update, recorded with its chain entry (`PROJECT /projects/{id}/update`); undefined when the project is gone. */
export async function recordUpdateOutcome(sql: Sql, projectId: string, answering: Date, outcome: { commit: string } | { error: string }): Promise<Project | undefined> {
  const origin = serviceOrigin('PROJECT', `/projects/${projectId}/update`);
  return recordMutation(sql, origin, 'commit' in outcome ? 'successful' : 'failed', async (tx, entry) => {
    const row = await recordProjectUpdate(tx, projectId, answering, outcome);
    // Deleted meanwhile: nothing of this update is kept.
    if (!row) return unchanged(undefined);
    entry.body = { kind: 'project.update', project_id: projectId, ...('commit' in outcome ? { commit: outcome.commit } : { error: outcome.error }) };
    return row;
  });
}

/** The project's credential opened for one update, as git takes it (runtime/git.ts); a CredentialOpenError when it cannot be. */
export async function gitCredentialOf(sql: Sql, sealer: Sealer | undefined, credentialId: string | null): Promise<GitCredential | undefined> {
  if (!credentialId) return undefined;
  const { values } = await openCredential(sql, sealer, credentialId);
  return { username: values.username, password: values.password, sshKey: values.ssh_key_data, sshKeyPassphrase: values.ssh_key_unlock };
}

/**
 * What a launch records of the template's project: its id and the commit its checkout holds (or
 * the commit the launch names). A
 * project that is gone, or has no checkout yet, is a configuration error (spec part B 7.3): 400
 * naming it, which an unattended launch answers as 409.
 */
export async function projectForLaunch(db: Db, projectId: string, commit?: string): Promise<{ id: string; commit: string }> {
  const project = await getProject(db, projectId);
  if (!project) throw badRequest(`project ${projectId} no longer exists`, { field: 'project_id' });
  // A commit the launch names (a pull request's head, the commit a saved plan was made at) is
  // fetched by each worker as it runs; it reaches git as an argument, so only a hex object name passes.
  if (commit !== undefined) {
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) throw badRequest(`${JSON.stringify(commit)} is not a git commit id (40 or 64 lowercase hex digits)`, { field: 'project.commit' });
    return { id: project.id, commit };
  }
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

/**
 * What a browse path names in the project's commit, read from git's objects in the sandbox
 * (runtime/git.ts readTree): the path checked as text first (core/project-paths.ts browsePath:
 * relative, no `..`, not .git), links followed only within the tree, a link leading out of it
 * refused.
 */
async function readInTree(ctx: ServerContext, project: Project, asked: string) {
  const checked = browsePath(asked);
  if ('fault' in checked) throw badRequest(`path ${checked.fault}`, { field: 'path' });
  if (!project.commit_sha) throw conflict(`project ${project.id} has no checkout yet (status ${project.status})`);
  let read: TreeRead;
  try {
    const answer = await runJob(ctx, 'projectTreeJob', { projectId: project.id, commit: project.commit_sha, path: checked.path, maxEntries: MAX_LISTED_FILES, maxFileBytes: MAX_FILE_BYTES });
    read = JSON.parse(answer);
    if (read.kind === 'file' && read.bytes !== undefined) read = { ...read, bytes: Buffer.from(read.bytes as unknown as string, 'base64') };
  } catch (err) {
    if (err instanceof JobRefused && err.type === 'GitError') {
      ctx.logger.warn({ projectId: project.id, err: err.message }, "a project's tree could not be read");
      throw conflict(`project ${project.id}: its commit ${project.commit_sha} could not be read on a worker; update the project to fetch it again`);
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
  if (!read.bytes) throw new DomainError('too_large', `path ${relative} is ${read.size} bytes; files over ${MAX_FILE_BYTES} bytes are not shown`, { limit_bytes: MAX_FILE_BYTES });
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
