import type { StepDefinition } from '../runs/workflow-graph';
import { badRequest } from '../errors';

/**
 * The common shape every import format is read into (spec part A 4.14): the objects an export
 * would create, in the order they can be created (what an object names comes before it), each
 * with its format's stable external id, and the parts of the export left out with the reason.
 * Readers (core/imports/<format>.ts) are pure; services/imports.ts previews and applies a plan.
 */

export type ImportKind = 'credential' | 'project' | 'inventory' | 'notification_target' | 'template' | 'schedule';

/** Another object of the same export, by kind and external id. */
export interface ImportRef {
  kind: ImportKind;
  external_id: string;
}

interface Planned<K extends ImportKind, D> {
  kind: K;
  external_id: string;
  name: string;
  /** Where in the export it came from (`job_templates[2]`), as errors name it. */
  source: string;
  draft: D;
  /** What of the source could not be carried, each a sentence. */
  notes: string[];
}

export type PlannedCredential = Planned<'credential', { name: string; description: string; kind: string; inputs: Record<string, string> }>;
/** A notification target an imported object is attached to, for an event (spec part A 2.11 rule 6). */
export interface PlannedAttachment {
  target: ImportRef;
  event: 'started' | 'success' | 'failure' | 'approval';
}

export type PlannedProject = Planned<'project', { name: string; url: string; branch: string | null }> & { credential: ImportRef | null; notifications: PlannedAttachment[] };
export type PlannedInventory = Planned<'inventory', { name: string; content: string; format: 'yaml' | 'ini' }>;
export type PlannedTarget = Planned<'notification_target', { name: string; description: string; kind: string; to: string | null }>;
export type PlannedTemplate = Planned<
  'template',
  {
    name: string;
    tool: string | null;
    command: string | null;
    playbook: string | null;
    limit: string | null;
    tags: string[] | null;
    skip_tags: string[] | null;
    forks: number | null;
    verbosity: number | null;
    diff_mode: boolean | null;
    extra_vars: Record<string, unknown> | null;
    timeout: number | null;
    /** Survey fields as core/runs/survey.ts parses them. */
    survey: unknown[];
    /** A workflow's steps; a step's stored inventory is given by `step_inventories`. */
    steps: StepDefinition[] | null;
    allow_callbacks: boolean;
    external_callback: boolean;
  }
> & {
  inventory: ImportRef | null;
  project: ImportRef | null;
  credentials: ImportRef[];
  /** Step name to the inventory its ansible step runs against. */
  step_inventories: Record<string, ImportRef>;
  /** The other system's job template id, bound so its callback address answers (spec part A 2.3). */
  external_job_template_id: string | null;
  notifications: PlannedAttachment[];
};
export type PlannedSchedule = Planned<'schedule', { name: string; cron: string | null; rrule: string | null; timezone: string | null; enabled: boolean }> & { template: ImportRef };

export type PlannedObject = PlannedCredential | PlannedProject | PlannedInventory | PlannedTarget | PlannedTemplate | PlannedSchedule;

/** A part of the export that becomes nothing, and why. */
export interface LeftOut {
  kind: string;
  name: string;
  source: string;
  reason: string;
}

export interface ImportPlan {
  format: string;
  objects: PlannedObject[];
  left_out: LeftOut[];
  /** The inventory the request named for the hosts the jobs target (`jobsched`, `ciserver`; spec part A 4.14 rule 2): set on every template without one of its own. */
  inventory_id?: string;
}

/** The order objects are created in: each kind only names kinds before it. */
export const KIND_ORDER: readonly ImportKind[] = ['credential', 'project', 'inventory', 'notification_target', 'template', 'schedule'];

export const refKey = (ref: ImportRef) => `${ref.kind}:${ref.external_id}`;

/** Sorts a plan's objects into creation order, keeping the export's order within a kind. */
export function ordered(objects: PlannedObject[]): PlannedObject[] {
  return [...objects].sort((a, b) => KIND_ORDER.indexOf(a.kind) - KIND_ORDER.indexOf(b.kind));
}

/** A malformed export: 400 naming where in it. */
export const malformed = (field: string, message: string) => badRequest(`${field}: ${message}`, { field });

// --- reading untyped JSON, naming the field at fault

export type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function objectAt(value: unknown, field: string): Json {
  if (!isObject(value)) throw malformed(field, 'must be an object');
  return value;
}

/** A list, or an empty one when absent. */
export function listAt(value: unknown, field: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw malformed(field, 'must be a list');
  return value;
}

export function stringAt(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.trim() === '') throw malformed(field, 'must be a non-empty string');
  return value;
}

/** A string, or null when absent or empty. */
export function optionalString(value: unknown, field: string): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string') throw malformed(field, 'must be a string');
  return value;
}

export function optionalNumber(value: unknown, field: string): number | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw malformed(field, 'must be a number');
  return value;
}

/** Comma-separated tags as a list; null when none. */
export function tagList(value: string | null): string[] | null {
  const tags = (value ?? '').split(',').map((t) => t.trim()).filter(Boolean);
  return tags.length ? tags : null;
}

/**
 * Refuses a plan any object of which holds NUL, or text that was not UTF-8 (kept as a lone
 * surrogate by the decoder), in a field it would create: 400 naming the object and the field
 * (spec part A 4.14 rule 5), before anything is written. JSON bodies are refused sooner, by the
 * JSON scan; this covers the XML, YAML and archive formats, and whatever a reader composes.
 */
export function requireCleanText(plan: ImportPlan): void {
  for (const object of plan.objects) {
    const fault = faultIn(object.name, 'name') ?? faultIn(object.draft, '');
    if (fault) {
      const field = `${object.source}.${fault.path}`;
      throw badRequest(`${field}: ${object.kind.replace('_', ' ')} ${JSON.stringify(object.name.replace(/[\0\ud800-\udfff]/g, '?'))} holds ${fault.what}`, { field, source: object.source });
    }
  }
}

function faultIn(value: unknown, path: string): { path: string; what: string } | null {
  if (typeof value === 'string') {
    if (value.includes('\0')) return { path, what: 'NUL' };
    if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(value)) return { path, what: 'text that is not valid UTF-8' };
    return null;
  }
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const fault = faultIn(item, `${path}[${i}]`);
      if (fault) return fault;
    }
    return null;
  }
  if (isObject(value)) {
    for (const [key, item] of Object.entries(value)) {
      const fault = faultIn(key, path ? `${path}.${key}` : key) ?? faultIn(item, path ? `${path}.${key}` : key);
      if (fault) return fault;
    }
  }
  return null;
}
