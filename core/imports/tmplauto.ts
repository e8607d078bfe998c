import type { StepDefinition } from '../runs/workflow-graph';
import {
  isObject,
  listAt,
  malformed,
  objectAt,
  optionalNumber,
  optionalString,
  ordered,
  stringAt,
  tagList,
  type ImportPlan,
  type ImportRef,
  type Json,
  type LeftOut,
  type PlannedAttachment,
  type PlannedObject,
  type PlannedTemplate,
} from './plan';
import { credentialInputs, EXPORTED_SECRET, indentedVars, varsOf, yamlKey } from './values';

/**
 * `tmplauto`: AWX / Ansible Tower's `awx export` document (spec part A 4.14). Top-level lists
 * `credentials`, `projects`, `inventory`, `notification_templates`, `job_templates`,
 * `workflow_job_templates` and `schedules`; every object carries a `natural_key` (name and
 * organization) and refers to others by theirs; hosts, groups, surveys, schedules and workflow
 * nodes sit in each object's `related` block. External ids are `<organization>/<name>` (a
 * credential's adds its type's name), so a re-import finds what an earlier one created.
 */

/** AWX credential type names to Cairn's built-in kinds. */
const CREDENTIAL_KINDS: Record<string, string> = {
  Machine: 'machine',
  'Source Control': 'scm',
  Vault: 'vault',
  'Amazon Web Services': 'aws',
  'Google Compute Engine': 'gcp',
  'Microsoft Azure Resource Manager': 'azure',
  'VMware vCenter': 'vmware',
  'OpenShift or Kubernetes API Bearer Token': 'kubernetes',
  'Container Registry': 'registry',
  Network: 'network',
};

/** AWX notification types to Cairn's kinds. */
const NOTIFICATION_KINDS: Record<string, string> = {
  webhook: 'webhook',
  slack: 'chat_a',
  mattermost: 'chat_b',
  pagerduty: 'incident',
  grafana: 'annotation',
  email: 'email',
  twilio: 'sms',
};

/** AWX survey question types to Cairn's (spec part A 2.4). */
const SURVEY_TYPES: Record<string, string> = { text: 'text', textarea: 'multiline', password: 'secret', integer: 'int', multiplechoice: 'choice' };

const TOP_LEVEL = ['credentials', 'projects', 'inventory', 'notification_templates', 'job_templates', 'workflow_job_templates', 'schedules'];

/** `<organization>/<name>` of a natural key (or of an object carrying name and organization). */
function keyOf(value: unknown, field: string): string {
  const nk = objectAt(value, field);
  const org = isObject(nk.organization) && typeof nk.organization.name === 'string' ? nk.organization.name : '';
  const base = `${org}/${stringAt(nk.name, `${field}.name`)}`;
  return isObject(nk.credential_type) && typeof nk.credential_type.name === 'string' ? `${base}/${nk.credential_type.name}` : base;
}

/** An object's external id: its natural key's `<organization>/<name>` (the object's own fields when it has none). */
const idOf = (item: Json, at: string) => (isObject(item.natural_key) ? keyOf(item.natural_key, `${at}.natural_key`) : keyOf(item, at));
const nameOf = (item: Json, at: string) => stringAt(item.name, `${at}.name`);
const relatedOf = (item: Json, at: string) => (item.related === undefined ? {} : objectAt(item.related, `${at}.related`));

export function readTmplauto(body: unknown): ImportPlan {
  const doc = objectAt(body, 'body');
  if (!TOP_LEVEL.some((key) => key in doc)) {
    throw malformed('body', `is not an awx export: it has none of ${TOP_LEVEL.join(', ')}`);
  }
  const objects: PlannedObject[] = [];
  const leftOut: LeftOut[] = [];
  const known = new Set<string>();
  const add = (object: PlannedObject) => {
    known.add(`${object.kind}:${object.external_id}`);
    objects.push(object);
  };
  const ref = (kind: ImportRef['kind'], value: unknown, field: string): ImportRef | null =>
    value === undefined || value === null ? null : { kind, external_id: keyOf(value, field) };

  listAt(doc.credentials, 'credentials').forEach((raw, i) => {
    const at = `credentials[${i}]`;
    const item = objectAt(raw, at);
    const name = nameOf(item, at);
    const typeName = isObject(item.credential_type) ? String(item.credential_type.name ?? '') : '';
    const kind = CREDENTIAL_KINDS[typeName];
    if (!kind) return leftOut.push({ kind: 'credential', name, source: at, reason: `credential type ${JSON.stringify(typeName)} has no built-in Cairn kind; create it as a custom credential type` });
    const given = item.inputs === undefined ? {} : objectAt(item.inputs, `${at}.inputs`);
    const { inputs, dropped, missing } = credentialInputs(kind, given);
    if (missing) return leftOut.push({ kind: 'credential', name, source: at, reason: `its ${missing} is required and the export does not carry it` });
    add({
      kind: 'credential',
      external_id: isObject(item.natural_key) ? idOf(item, at) : keyOf({ ...item, credential_type: item.credential_type }, at),
      name,
      source: at,
      draft: { name, description: optionalString(item.description, `${at}.description`) ?? '', kind, inputs },
      notes: ['its secrets are not in the export: it waits for them (set them with PUT /v1/credentials/{id})', ...(dropped.length ? [`inputs not carried: ${dropped.join(', ')}`] : [])],
    });
  });

  listAt(doc.projects, 'projects').forEach((raw, i) => {
    const at = `projects[${i}]`;
    const item = objectAt(raw, at);
    const name = nameOf(item, at);
    const scmType = optionalString(item.scm_type, `${at}.scm_type`);
    if (scmType !== 'git') return leftOut.push({ kind: 'project', name, source: at, reason: scmType ? `scm_type ${scmType}: Cairn projects are git repositories` : 'a manual project (files on the AWX server) has no repository to fetch' });
    add({
      kind: 'project',
      external_id: idOf(item, at),
      name,
      source: at,
      draft: { name, url: stringAt(item.scm_url, `${at}.scm_url`), branch: optionalString(item.scm_branch, `${at}.scm_branch`) },
      credential: ref('credential', item.credential, `${at}.credential`),
      notifications: notificationsOf(relatedOf(item, at), at),
      notes: [],
    });
  });

  listAt(doc.inventory, 'inventory').forEach((raw, i) => {
    const at = `inventory[${i}]`;
    const item = objectAt(raw, at);
    const name = nameOf(item, at);
    const kind = optionalString(item.kind, `${at}.kind`);
    if (kind) return leftOut.push({ kind: 'inventory', name, source: at, reason: `a ${kind} inventory is composed from others; compose it again with POST /v1/inventories` });
    const related = relatedOf(item, at);
    const notes = listAt(related.inventory_sources, `${at}.related.inventory_sources`).length ? ['its inventory sources are not carried; add them with POST /v1/inventory-sources'] : [];
    add({ kind: 'inventory', external_id: idOf(item, at), name, source: at, draft: { name, content: inventoryYaml(item, related, at), format: 'yaml' }, notes });
  });

  listAt(doc.notification_templates, 'notification_templates').forEach((raw, i) => {
    const at = `notification_templates[${i}]`;
    const item = objectAt(raw, at);
    const name = nameOf(item, at);
    const type = optionalString(item.notification_type, `${at}.notification_type`) ?? '';
    const kind = NOTIFICATION_KINDS[type];
    if (!kind) return leftOut.push({ kind: 'notification_target', name, source: at, reason: `notification type ${JSON.stringify(type)} has no Cairn kind` });
    const config = item.notification_configuration === undefined ? {} : objectAt(item.notification_configuration, `${at}.notification_configuration`);
    const recipients = kind === 'email' ? listAt(config.recipients, `${at}.notification_configuration.recipients`) : kind === 'sms' ? listAt(config.to_numbers, `${at}.notification_configuration.to_numbers`) : [];
    add({
      kind: 'notification_target',
      external_id: idOf(item, at),
      name,
      source: at,
      draft: { name, description: optionalString(item.description, `${at}.description`) ?? '', kind, to: recipients.length ? recipients.map(String).join(', ') : null },
      notes: kind === 'email' || kind === 'sms' ? [] : ['its url and key are not carried: it waits for them (set them with PUT /v1/notifications/{id})'],
    });
  });

  const jobTemplates = new Map<string, Json>();
  listAt(doc.job_templates, 'job_templates').forEach((raw, i) => {
    const at = `job_templates[${i}]`;
    const item = objectAt(raw, at);
    const name = nameOf(item, at);
    const related = relatedOf(item, at);
    const notes: string[] = [];
    const extraVars = varsOf(item.extra_vars);
    if (extraVars === undefined) notes.push('extra_vars are nested YAML, which is not read: set them on the template');
    const externalId = awxId(item);
    if (externalId === null) notes.push('the export carries no AWX id for it, so the AWX-compatible callback address cannot answer for it');
    const callbacks = !!optionalString(item.host_config_key, `${at}.host_config_key`);
    if (callbacks) notes.push('its host config key is not carried: mint one with POST /v1/templates/{id}/callback-key and give it to hosts');
    if (item.job_type === 'check') notes.push('job_type check is not carried: Cairn runs it as run');
    const template: PlannedTemplate = {
      kind: 'template',
      external_id: idOf(item, at),
      name,
      source: at,
      draft: {
        name,
        tool: 'ansible',
        command: null,
        playbook: stringAt(item.playbook, `${at}.playbook`),
        limit: optionalString(item.limit, `${at}.limit`),
        tags: tagList(optionalString(item.job_tags, `${at}.job_tags`)),
        skip_tags: tagList(optionalString(item.skip_tags, `${at}.skip_tags`)),
        forks: optionalNumber(item.forks, `${at}.forks`) || null,
        verbosity: optionalNumber(item.verbosity, `${at}.verbosity`) || null,
        diff_mode: item.diff_mode === true ? true : null,
        extra_vars: extraVars ?? null,
        timeout: optionalNumber(item.timeout, `${at}.timeout`) || null,
        survey: surveyOf(item, related, at, notes),
        steps: null,
        allow_callbacks: callbacks && externalId !== null,
        external_callback: callbacks && externalId !== null,
      },
      inventory: ref('inventory', item.inventory, `${at}.inventory`),
      project: ref('project', item.project, `${at}.project`),
      credentials: listAt(related.credentials, `${at}.related.credentials`).map((c, j) => ({ kind: 'credential' as const, external_id: keyOf(c, `${at}.related.credentials[${j}]`) })),
      step_inventories: {},
      external_job_template_id: externalId,
      notifications: notificationsOf(related, at),
      notes,
    };
    jobTemplates.set(template.external_id, item);
    add(template);
    schedulesOf(related.schedules, `${at}.related.schedules`, { kind: 'template', external_id: template.external_id }, add);
  });

  listAt(doc.workflow_job_templates, 'workflow_job_templates').forEach((raw, i) => {
    const at = `workflow_job_templates[${i}]`;
    const item = objectAt(raw, at);
    const name = nameOf(item, at);
    const related = relatedOf(item, at);
    const notes: string[] = [];
    const graph = workflowSteps(listAt(related.workflow_nodes, `${at}.related.workflow_nodes`), `${at}.related.workflow_nodes`, jobTemplates, notes);
    if ('missing' in graph) return leftOut.push({ kind: 'template', name, source: at, reason: graph.missing });
    const extraVars = varsOf(item.extra_vars);
    if (extraVars === undefined) notes.push('extra_vars are nested YAML, which is not read: set them on the template');
    const template: PlannedTemplate = {
      kind: 'template',
      external_id: idOf(item, at),
      name,
      source: at,
      draft: {
        name, tool: null, command: null, playbook: null, limit: null, tags: null, skip_tags: null, forks: null, verbosity: null, diff_mode: null,
        extra_vars: extraVars ?? null,
        timeout: null,
        survey: surveyOf(item, related, at, notes),
        steps: graph.steps,
        allow_callbacks: false,
        external_callback: false,
      },
      inventory: null,
      project: null,
      credentials: [],
      step_inventories: graph.inventories,
      external_job_template_id: null,
      notifications: notificationsOf(related, at),
      notes,
    };
    add(template);
    schedulesOf(related.schedules, `${at}.related.schedules`, { kind: 'template', external_id: template.external_id }, add);
  });

  // Schedules exported on their own name their template under `unified_job_template`.
  listAt(doc.schedules, 'schedules').forEach((raw, i) => {
    const at = `schedules[${i}]`;
    const item = objectAt(raw, at);
    const owner = item.unified_job_template ?? (isObject(item.natural_key) ? item.natural_key.unified_job_template : undefined);
    schedulesOf([item], at, { kind: 'template', external_id: keyOf(owner, `${at}.unified_job_template`) }, add, at);
  });

  // A reference to an object the export does not hold (or that is left out) is dropped, noted.
  for (const object of objects) dropUnknownRefs(object, known);
  return { format: 'tmplauto', objects: dedupe(ordered(objects), leftOut), left_out: leftOut };
}

/** AWX's notification lists on an object to the events Cairn attaches for (`error` read as failure, `approvals` as approval). */
const NOTIFICATION_EVENTS = { notification_templates_started: 'started', notification_templates_success: 'success', notification_templates_error: 'failure', notification_templates_approvals: 'approval' } as const;

function notificationsOf(related: Json, at: string): PlannedAttachment[] {
  return Object.entries(NOTIFICATION_EVENTS).flatMap(([list, event]) =>
    listAt(related[list], `${at}.related.${list}`).map((ref, i) => ({ target: { kind: 'notification_target' as const, external_id: keyOf(ref, `${at}.related.${list}[${i}]`) }, event })),
  );
}

/** AWX's numeric id of a job template: `id`, or the one in its `url` or callback address. */
function awxId(item: Json): string | null {
  if (typeof item.id === 'number' && Number.isInteger(item.id)) return String(item.id);
  const related = isObject(item.related) ? item.related : {};
  for (const url of [item.url, related.callback]) {
    const match = typeof url === 'string' ? /\/job_templates\/(\d+)\//.exec(url) : null;
    if (match) return match[1];
  }
  return null;
}

function surveyOf(item: Json, related: Json, at: string, notes: string[]): unknown[] {
  if (item.survey_enabled === false || related.survey_spec === undefined) return [];
  const spec = listAt(objectAt(related.survey_spec, `${at}.related.survey_spec`).spec, `${at}.related.survey_spec.spec`);
  return spec.flatMap((raw, i) => {
    const qat = `${at}.related.survey_spec.spec[${i}]`;
    const q = objectAt(raw, qat);
    const variable = stringAt(q.variable, `${qat}.variable`);
    const awxType = stringAt(q.type, `${qat}.type`);
    const type = SURVEY_TYPES[awxType];
    if (!type) {
      notes.push(`survey question ${variable} (${awxType}) has no Cairn type and is not carried`);
      return [];
    }
    const field: Record<string, unknown> = { var: variable, type, required: q.required === true };
    const label = optionalString(q.question_name, `${qat}.question_name`);
    const help = optionalString(q.question_description, `${qat}.question_description`);
    if (label) field.label = label;
    if (help) field.help = help;
    const min = optionalNumber(q.min, `${qat}.min`);
    const max = optionalNumber(q.max, `${qat}.max`);
    if (type === 'int') Object.assign(field, min !== null && { min }, max !== null && { max });
    if (type === 'text' || type === 'multiline' || type === 'secret') Object.assign(field, min !== null && min > 0 && { min_length: min }, max !== null && { max_length: max });
    if (type === 'choice') field.choices = Array.isArray(q.choices) ? q.choices.map(String) : String(q.choices ?? '').split('\n').filter(Boolean);
    const def = q.default;
    if (def !== undefined && def !== null && def !== '' && def !== EXPORTED_SECRET) field.default = type === 'int' ? Number(def) : String(def);
    if (def === EXPORTED_SECRET) notes.push(`survey question ${variable}: its secret default is not in the export`);
    return [field];
  });
}

/** A schedule of `template`, one per item; AWX rrules carry DTSTART with its TZID, which sets the zone. */
function schedulesOf(list: unknown, at: string, template: ImportRef, add: (o: PlannedObject) => void, single?: string): void {
  listAt(list, at).forEach((raw, i) => {
    const sat = single ?? `${at}[${i}]`;
    const item = objectAt(raw, sat);
    const name = nameOf(item, sat);
    const notes = varsOf(item.extra_data) ? ['its extra_data is not carried: a Cairn schedule fires its template as saved'] : [];
    add({
      kind: 'schedule',
      external_id: `${template.external_id}/${name}`,
      name,
      source: sat,
      draft: { name, cron: null, rrule: stringAt(item.rrule, `${sat}.rrule`), timezone: null, enabled: item.enabled !== false },
      template,
      notes,
    });
  });
}

/**
 * A workflow's nodes as steps: a job template node runs that template's playbook against its
 * inventory; an approval node is an approval step. A success or always edge becomes `depends_on`
 * (an always edge noted: Cairn runs it after success only); a failure edge from an approval node
 * becomes its `if_denied`; any other failure edge is noted and dropped.
 */
function workflowSteps(nodes: unknown[], at: string, jobTemplates: Map<string, Json>, notes: string[]): { steps: StepDefinition[]; inventories: Record<string, ImportRef> } | { missing: string } {
  const byIdentifier = new Map<string, { step: StepDefinition; at: string; node: Json }>();
  const inventories: Record<string, ImportRef> = {};
  const names = new Set<string>();
  for (const [i, raw] of nodes.entries()) {
    const nat = `${at}[${i}]`;
    const node = objectAt(raw, nat);
    const identifier = stringAt(node.identifier, `${nat}.identifier`);
    const related = relatedOf(node, nat);
    const ujt = node.unified_job_template;
    const approval = isObject(related.create_approval_template) ? related.create_approval_template : isObject(ujt) && ujt.type === 'workflow_approval_template' ? ujt : null;
    let step: StepDefinition;
    if (approval) {
      const name = unique(stringAt(approval.name, `${nat}.approval.name`), identifier, names);
      const timeout = optionalNumber(approval.timeout, `${nat}.approval.timeout`);
      step = { name, type: 'approval', depends_on: [], ...(approval.description ? { description: String(approval.description) } : {}), ...(timeout ? { approval_timeout: timeout } : {}) };
    } else {
      if (!isObject(ujt) || ujt.type !== 'job_template') return { missing: `node ${identifier} runs ${isObject(ujt) ? `a ${String(ujt.type)}` : 'nothing'}; only job template and approval nodes are carried` };
      const key = keyOf(ujt, `${nat}.unified_job_template`);
      const jt = jobTemplates.get(key);
      if (!jt) return { missing: `node ${identifier} runs job template ${key}, which the export does not hold` };
      const name = unique(String(jt.name), identifier, names);
      const extraVars = varsOf(jt.extra_vars);
      step = {
        name, type: 'run', depends_on: [], tool: 'ansible', playbook: String(jt.playbook),
        ...(typeof jt.limit === 'string' && jt.limit ? { limit: jt.limit } : {}),
        ...(extraVars ? { extra_vars: extraVars } : {}),
      };
      if (jt.inventory) inventories[name] = { kind: 'inventory', external_id: keyOf(jt.inventory, `${nat}.unified_job_template.inventory`) };
    }
    byIdentifier.set(identifier, { step, at: nat, node });
  }
  for (const { step, at: nat, node } of byIdentifier.values()) {
    const related = relatedOf(node, nat);
    const edges = (name: string) => listAt(related[name], `${nat}.related.${name}`).map((e, j) => stringAt(objectAt(e, `${nat}.related.${name}[${j}]`).identifier, `${nat}.related.${name}[${j}].identifier`));
    const child = (id: string, field: string) => {
      const found = byIdentifier.get(id);
      if (!found) throw malformed(field, `names node ${id}, which the workflow does not hold`);
      return found.step;
    };
    for (const id of edges('success_nodes')) child(id, `${nat}.related.success_nodes`).depends_on.push(step.name);
    for (const id of edges('always_nodes')) {
      child(id, `${nat}.related.always_nodes`).depends_on.push(step.name);
      notes.push(`step ${id}: an always edge from ${step.name} is carried as success only`);
    }
    for (const id of edges('failure_nodes')) {
      const target = child(id, `${nat}.related.failure_nodes`);
      if (step.type === 'approval' && !step.if_denied) step.if_denied = target.name;
      else notes.push(`the failure edge from ${step.name} to ${target.name} is not carried: Cairn steps run on success`);
    }
  }
  return { steps: [...byIdentifier.values()].map((v) => v.step), inventories };
}

function unique(name: string, identifier: string, names: Set<string>): string {
  const chosen = names.has(name) ? `${name} (${identifier})` : name;
  names.add(chosen);
  return chosen;
}

/** YAML inventory content of an AWX inventory: its variables, hosts (with theirs) and groups (with hosts, children, variables). */
function inventoryYaml(item: Json, related: Json, at: string): string {
  const lines = ['all:', `  vars:${indentedVars(item.variables, '    ')}`, '  hosts:'];
  const hosts = listAt(related.hosts, `${at}.related.hosts`);
  if (!hosts.length) lines[2] = '  hosts: {}';
  // A disabled host is left out, from its groups too (naming it there would define it).
  const disabled = new Set<string>();
  hosts.forEach((raw, i) => {
    const host = objectAt(raw, `${at}.related.hosts[${i}]`);
    if (host.enabled === false) return disabled.add(stringAt(host.name, `${at}.related.hosts[${i}].name`));
    lines.push(`    ${yamlKey(stringAt(host.name, `${at}.related.hosts[${i}].name`))}:${indentedVars(host.variables, '      ')}`);
  });
  const groups = listAt(related.groups, `${at}.related.groups`);
  lines.push(groups.length ? '  children:' : '  children: {}');
  groups.forEach((raw, i) => {
    const gat = `${at}.related.groups[${i}]`;
    const group = objectAt(raw, gat);
    const grelated = relatedOf(group, gat);
    lines.push(`    ${yamlKey(stringAt(group.name, `${gat}.name`))}:`, `      vars:${indentedVars(group.variables, '        ')}`);
    const members = listAt(grelated.hosts, `${gat}.related.hosts`)
      .map((h, j) => stringAt(objectAt(h, `${gat}.related.hosts[${j}]`).name, `${gat}.related.hosts[${j}].name`))
      .filter((name) => !disabled.has(name));
    lines.push(members.length ? '      hosts:' : '      hosts: {}', ...members.map((m) => `        ${yamlKey(m)}: {}`));
    const children = listAt(grelated.children, `${gat}.related.children`).map((c, j) => stringAt(objectAt(c, `${gat}.related.children[${j}]`).name, `${gat}.related.children[${j}].name`));
    lines.push(children.length ? '      children:' : '      children: {}', ...children.map((c) => `        ${yamlKey(c)}: {}`));
  });
  return lines.join('\n') + '\n';
}

function dropUnknownRefs(object: PlannedObject, known: Set<string>): void {
  const has = (ref: ImportRef | null) => ref === null || known.has(`${ref.kind}:${ref.external_id}`);
  const note = (ref: ImportRef) => object.notes.push(`${ref.kind.replace('_', ' ')} ${ref.external_id} is not in the export (or is left out), so it is not attached`);
  if (object.kind === 'project' && !has(object.credential)) {
    note(object.credential!);
    object.credential = null;
  }
  if (object.kind === 'project' || object.kind === 'template') object.notifications = object.notifications.filter((n) => has(n.target) || (note(n.target), false));
  if (object.kind === 'template') {
    if (!has(object.inventory)) {
      note(object.inventory!);
      object.inventory = null;
    }
    if (!has(object.project)) {
      note(object.project!);
      object.project = null;
    }
    object.credentials = object.credentials.filter((c) => has(c) || (note(c), false));
    for (const [step, ref] of Object.entries(object.step_inventories)) {
      if (!has(ref)) {
        note(ref);
        delete object.step_inventories[step];
      }
    }
  }
}

/** A schedule of a template that is left out goes too. */
function dedupe(objects: PlannedObject[], leftOut: LeftOut[]): PlannedObject[] {
  const templates = new Set(objects.filter((o) => o.kind === 'template').map((o) => o.external_id));
  return objects.filter((o) => {
    if (o.kind !== 'schedule' || templates.has(o.template.external_id)) return true;
    leftOut.push({ kind: 'schedule', name: o.name, source: o.source, reason: `its template ${o.template.external_id} is not imported` });
    return false;
  });
}
