import type postgres from 'postgres';
import { badRequest, DomainError } from '../core/errors';
import { refKey, requireCleanText, type ImportPlan, type ImportRef, type PlannedObject, type PlannedProject, type PlannedTemplate } from '../core/imports/plan';
import { JENKINS_JOB_FILE, readCiserver } from '../core/imports/ciserver';
import { readCookbook } from '../core/imports/cookbook';
import type { ExportFiles } from '../core/imports/export-files';
import { readJobsched, RUNDECK_JOB_FILE } from '../core/imports/jobsched';
import { readManifest } from '../core/imports/manifest';
import { readProjrunner } from '../core/imports/projrunner';
import { readTmplauto } from '../core/imports/tmplauto';
import { checkGraph, WorkflowGraphError } from '../core/runs/workflow-graph';
import type { Sql } from '../store/db';
import { getInventory } from '../store/inventories';
import { externalJobTemplateTaken, importBindings, importedObjectExists, saveImportBinding, takenNames, type ImportTable } from '../store/imports';
import type { Caller } from '../store/tokens';
import type { AuditOrigin } from './audit/audit';
import { createInventory } from './ansible/inventories';
import type { ServerContext } from './context';
import { createCredential } from './credentials';
import { attachTarget, createTarget } from './notifications/notifications';
import { createProject, requireFetchableUrl } from './projects';
import { createTemplate, parseTemplateSurvey } from './runs/templates';
import { createSchedule } from './schedules/schedules';
import { exportFilesOf } from './import-archives';

/**
 * `POST /v1/import/{format}` (spec part A 4.14). A format's reader (core/imports/<format>.ts)
 * turns the export into a plan; this applies it through the same create paths the API uses, so
 * every rule, access check and chain entry applies (one chain entry per object created), all in
 * one transaction: one object refused refuses the import and nothing is written. A preview runs
 * exactly the same work and rolls it back, so it reports what an apply would do.
 *
 * An object an earlier import of the same format created (matched by its external id) is
 * skipped, and what names it is pointed at it; an object whose name an object not imported from
 * that source holds is skipped, and references to it are dropped, noted.
 */

/**
 * What a request may add to the export: the name of the inventory a fleet format makes, or of the
 * job a single Jenkins config.xml holds; the inventory a job format's templates target.
 */
export interface ImportOptions {
  name?: string;
  inventory?: string;
}

/** A format read from one JSON document, or from files (its text, or a zip archive's). */
type Reader = { body: 'json'; read: (body: unknown, options: ImportOptions) => ImportPlan } | { body: 'files'; read: (files: ExportFiles, options: ImportOptions) => ImportPlan; wanted: (path: string) => boolean };

const READERS: Record<string, Reader> = {
  tmplauto: { body: 'json', read: readTmplauto },
  projrunner: { body: 'json', read: readProjrunner },
  cookbook: { body: 'json', read: readCookbook },
  manifest: { body: 'json', read: readManifest },
  jobsched: { body: 'files', read: readJobsched, wanted: (path) => RUNDECK_JOB_FILE.test(path) },
  ciserver: { body: 'files', read: readCiserver, wanted: (path) => JENKINS_JOB_FILE.test(path) },
};

/** The formats that bring a fleet as one inventory (spec part A 4.14 rule 2), named by `name`. */
const FLEET_FORMATS = ['cookbook', 'manifest'];
/** The formats whose jobs target the hosts of an inventory the request names (rule 2). */
const JOB_FORMATS = ['jobsched', 'ciserver'];
/** The formats that take `name`. */
const NAMED_FORMATS = [...FLEET_FORMATS, 'ciserver'];

/** Every format of spec part A 4.14, and those this server reads. */
export const IMPORT_FORMATS = ['tmplauto', 'projrunner', 'cookbook', 'manifest', 'jobsched', 'ciserver'] as const;
export const SUPPORTED_IMPORT_FORMATS = Object.keys(READERS);

export interface ImportedObject {
  kind: string;
  name: string;
  external_id: string;
  source: string;
  /** The object's id: after an apply the one created, for a skipped object the one it matched. */
  id?: string;
  notes: string[];
  /** The notification targets attached to it, each for an event. */
  attachments?: { target_id: string; event: string }[];
}

export interface ImportReport {
  format: string;
  applied: boolean;
  created: ImportedObject[];
  skipped: (Omit<ImportedObject, 'notes' | 'external_id'> & { external_id?: string; reason: string })[];
  counts: { created: number; skipped: number };
}

/** 400 naming an unknown or unsupported format, and the formats this server reads. */
export function requireImportFormat(format: string): void {
  if (!READERS[format]) {
    const known = (IMPORT_FORMATS as readonly string[]).includes(format);
    // A crontab imports only from the command line (spec part A 4.14 rule 6).
    if (format === 'cron') {
      throw badRequest(`format cron is not an import format: a crontab imports only from the command line, with cairn import cron <file>; supported formats: ${SUPPORTED_IMPORT_FORMATS.join(', ')}`, { field: 'format', supported: SUPPORTED_IMPORT_FORMATS });
    }
    throw badRequest(
      known
        ? `format ${format} is not supported by this server yet; supported formats: ${SUPPORTED_IMPORT_FORMATS.join(', ')}`
        : `format ${JSON.stringify(format)} is not an import format; supported formats: ${SUPPORTED_IMPORT_FORMATS.join(', ')}`,
      { field: 'format', supported: SUPPORTED_IMPORT_FORMATS },
    );
  }
}

/** Whether a supported format is read from JSON (the route parses it) or from the body's bytes. */
export const readsJson = (format: string): boolean => READERS[format]?.body === 'json';

/** The plan of an export in a supported format (requireImportFormat): `body` is parsed JSON, or the bytes of a format read from files. */
export async function planImport(format: string, body: unknown, options: ImportOptions = {}): Promise<ImportPlan> {
  requireImportFormat(format);
  if (options.name !== undefined && !NAMED_FORMATS.includes(format)) {
    throw badRequest(`name: only the fleet formats (${FLEET_FORMATS.join(', ')}) make one inventory to name, and ciserver one job; ${format} names its objects itself`, { field: 'name' });
  }
  if (options.inventory !== undefined && !JOB_FORMATS.includes(format)) {
    throw badRequest(`inventory: only the job formats (${JOB_FORMATS.join(', ')}) take an inventory for their jobs' hosts; ${format} brings its own`, { field: 'inventory' });
  }
  const reader = READERS[format];
  const plan = reader.body === 'json' ? reader.read(body, options) : reader.read(await exportFilesOf(body as Buffer, reader.wanted), options);
  requireCleanText(plan);
  return options.inventory !== undefined ? { ...plan, inventory_id: options.inventory } : plan;
}

class PreviewDone extends Error {
  constructor(readonly report: ImportReport) {
    super('preview rolled back');
  }
}

/** Previews (`apply` false) or applies a plan for an admin. */
export async function runImport(server: ServerContext, caller: Caller, origin: AuditOrigin, plan: ImportPlan, apply: boolean): Promise<ImportReport> {
  if (plan.inventory_id !== undefined && !(await getInventory(server.sql, plan.inventory_id))) {
    throw badRequest(`inventory: no inventory ${JSON.stringify(plan.inventory_id)}`, { field: 'inventory' });
  }
  // Repositories are tried before the transaction opens, so no network wait holds it.
  const unfetchable = await unfetchableRepositories(server, plan);
  try {
    return (await server.sql.begin(async (tx) => {
      const report = await applyPlan({ ...server, sql: tx as unknown as Sql, pool: server.sql }, tx, caller, origin, plan, unfetchable);
      // A preview's ids were never committed: it names none.
      if (!apply) throw new PreviewDone({ ...report, created: report.created.map(({ id: _id, ...rest }) => rest) });
      return { ...report, applied: true };
    })) as ImportReport;
  } catch (err) {
    if (err instanceof PreviewDone) return err.report;
    throw err;
  }
}

const TABLES: Record<PlannedObject['kind'], ImportTable> = { credential: 'credentials', project: 'projects', inventory: 'inventories', notification_target: 'notification_targets', template: 'templates', schedule: 'schedules' };

/**
 * Why each project whose repository this server cannot fetch from (unreachable, refused by the
 * egress rule, a path outside --project-local-roots) would be refused by its create path, keyed
 * by external id: such a project is left behind rather than refusing the import.
 */
async function unfetchableRepositories(ctx: ServerContext, plan: ImportPlan): Promise<Map<string, string>> {
  const reasons = new Map<string, string>();
  for (const object of plan.objects) {
    if (object.kind !== 'project') continue;
    try {
      await requireFetchableUrl(ctx, object.draft.url);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      reasons.set(object.external_id, err.message.replace(/^url: /, ''));
    }
  }
  return reasons;
}

async function applyPlan(
  ctx: ServerContext,
  tx: postgres.TransactionSql,
  caller: Caller,
  origin: AuditOrigin,
  plan: ImportPlan,
  unfetchable: Map<string, string>,
): Promise<ImportReport> {
  const bindings = await importBindings(tx, plan.format);
  const ids = new Map<string, string>();
  const created: ImportedObject[] = [];
  const skipped: ImportReport['skipped'] = plan.left_out.map((l) => ({ kind: l.kind, name: l.name, source: l.source, reason: l.reason }));
  const names = new Map<string, Set<string>>();
  for (const object of plan.objects) {
    const bound = bindings.get(refKey(object));
    if (bound && (await importedObjectExists(tx, TABLES[object.kind], bound))) {
      ids.set(refKey(object), bound);
      skipped.push({ kind: object.kind, name: object.name, external_id: object.external_id, source: object.source, id: bound, reason: 'imported before from this source' });
      continue;
    }
    const unreachable = object.kind === 'project' ? unfetchable.get(object.external_id) : undefined;
    if (unreachable) {
      skipped.push({ kind: 'project', name: object.name, external_id: object.external_id, source: object.source, reason: unreachable });
      continue;
    }
    // Schedule names need not be unique; every other kind's are kept apart from objects not imported.
    if (object.kind !== 'schedule') {
      const taken = names.get(object.kind) ?? (await takenNames(tx, TABLES[object.kind]));
      names.set(object.kind, taken);
      if (taken.has(object.name)) {
        skipped.push({ kind: object.kind, name: object.name, external_id: object.external_id, source: object.source, reason: `a ${object.kind.replace('_', ' ')} named ${JSON.stringify(object.name)} exists already and was not imported from this source; rename one and import again` });
        continue;
      }
      taken.add(object.name);
    }
    const resolve = (ref: ImportRef | null): string | null => {
      if (!ref) return null;
      const id = ids.get(refKey(ref));
      if (!id) object.notes.push(`${ref.kind.replace('_', ' ')} ${ref.external_id} is not imported, so it is not attached`);
      return id ?? null;
    };
    if (object.kind === 'schedule' && !ids.has(refKey(object.template))) {
      skipped.push({ kind: 'schedule', name: object.name, external_id: object.external_id, source: object.source, reason: `its template ${object.template.external_id} is not imported` });
      continue;
    }
    const objectOrigin: AuditOrigin = {
      actor: origin.actor,
      method: origin.method,
      path: origin.path,
      request: origin.request && { ...origin.request, body: { source: object.source, kind: object.kind, external_id: object.external_id, draft: object.draft } },
      withheld: new Set(),
    };
    let id: string;
    try {
      id = await createObject(ctx, tx, caller, objectOrigin, object, resolve, plan.inventory_id);
    } catch (err) {
      if (err instanceof DomainError) {
        const field = typeof err.details.field === 'string' ? `${object.source}: ${err.details.field}` : object.source;
        throw new DomainError(err.code, `${object.source} (${object.kind.replace('_', ' ')} ${JSON.stringify(object.name)}): ${err.message}`, { ...err.details, field, source: object.source }, err.headers);
      }
      throw err;
    }
    ids.set(refKey(object), id);
    const attached = object.kind === 'template' || object.kind === 'project' ? await attachNotifications(ctx, caller, objectOrigin, object, id, resolve) : [];
    await saveImportBinding(tx, { format: plan.format, kind: object.kind, external_id: object.external_id, object_id: id }, caller.account.username);
    created.push({ kind: object.kind, name: object.name, external_id: object.external_id, source: object.source, id, notes: object.notes, ...(attached.length ? { attachments: attached } : {}) });
  }
  return { format: plan.format, applied: false, created, skipped, counts: { created: created.length, skipped: skipped.length } };
}

/**
 * Attaches the object to the imported targets its source notified, through the attachment path
 * of `POST /v1/notifications/{id}/attachments` (one chain entry each). A workflow is stored as a
 * template, so it is attached as one; an import never attaches for `skipped`.
 */
async function attachNotifications(
  ctx: ServerContext,
  caller: Caller,
  origin: AuditOrigin,
  object: PlannedTemplate | PlannedProject,
  objectId: string,
  resolve: (ref: ImportRef | null) => string | null,
): Promise<{ target_id: string; event: string }[]> {
  const attached: { target_id: string; event: string }[] = [];
  for (const { target, event } of object.notifications) {
    const targetId = resolve(target);
    if (!targetId || attached.some((a) => a.target_id === targetId && a.event === event)) continue;
    await attachTarget(ctx, caller, origin, targetId, { object_kind: object.kind, object_id: objectId, event });
    attached.push({ target_id: targetId, event });
  }
  return attached;
}

/** Creates one planned object through its API create path; returns its id. */
async function createObject(
  ctx: ServerContext,
  tx: postgres.TransactionSql,
  caller: Caller,
  origin: AuditOrigin,
  object: PlannedObject,
  resolve: (ref: ImportRef | null) => string | null,
  inventoryId: string | undefined,
): Promise<string> {
  switch (object.kind) {
    case 'credential':
      return (await createCredential(ctx, caller, origin, { ...object.draft, inputs: object.draft.inputs })).credential.id;
    case 'project':
      return (await createProject(ctx, caller, origin, { ...object.draft, credential_id: resolve(object.credential) })).id;
    case 'inventory':
      return (await createInventory(ctx, caller, origin, object.draft)).id;
    case 'notification_target':
      return (await createTarget(ctx, caller, origin, { name: object.draft.name, description: object.draft.description, kind: object.draft.kind as never, to: object.draft.to ?? undefined }, { imported: true })).id;
    case 'template': {
      const { steps, survey, ...rest } = object.draft;
      const external = object.external_job_template_id !== null && !(await externalJobTemplateTaken(tx, object.external_job_template_id)) ? object.external_job_template_id : undefined;
      if (object.external_job_template_id !== null && !external) object.notes.push(`another template is bound to AWX job template ${object.external_job_template_id} already, so this one is not`);
      if (steps) {
        try {
          checkGraph(steps);
        } catch (err) {
          if (err instanceof WorkflowGraphError) throw badRequest(`steps: ${err.message}`, { field: err.field });
          throw err;
        }
      }
      const stepsWithInventories = steps?.map((step) => {
        const inventory = object.step_inventories[step.name];
        const id = inventory ? resolve(inventory) : null;
        return id ? { ...step, inventory_id: id } : step;
      });
      const template = await createTemplate(
        ctx,
        caller,
        origin,
        {
          ...rest,
          allow_callbacks: external ? rest.allow_callbacks : false,
          external_callback: external ? rest.external_callback : false,
          survey: parseTemplateSurvey(survey, origin),
          steps: stepsWithInventories ?? null,
          inventory_id: resolve(object.inventory) ?? inventoryId ?? null,
          project_id: resolve(object.project),
          credentials: object.credentials.map(resolve).filter((id): id is string => id !== null),
        },
        { externalJobTemplateId: external },
      );
      return template.id;
    }
    case 'schedule':
      return (await createSchedule(ctx, caller, origin, { ...object.draft, spring_forward: null, template_id: resolve(object.template), submission: null })).id;
  }
}
