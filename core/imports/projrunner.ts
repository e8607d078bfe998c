import { listAt, malformed, objectAt, optionalString, ordered, stringAt, type ImportPlan, type ImportRef, type LeftOut, type PlannedObject } from './plan';
import { varsOf } from './values';

/**
 * `projrunner`: Semaphore UI's project backup (`GET /api/project/{id}/backup`, spec part A
 * 4.14): `meta`, `keys`, `repositories`, `inventories`, `environments`, `templates`,
 * `schedules` and `views`, each referring to the others by name. External ids are
 * `<project>/<name>`, the project being `meta.name`.
 */

/** Semaphore survey variable types to Cairn's (spec part A 2.4); '' is a string. */
const SURVEY_TYPES: Record<string, string> = { '': 'text', string: 'text', int: 'int', secret: 'secret', enum: 'choice' };

export function readProjrunner(body: unknown): ImportPlan {
  const doc = objectAt(body, 'body');
  const meta = objectAt(doc.meta, 'meta');
  const project = stringAt(meta.name, 'meta.name');
  if (!Array.isArray(doc.templates)) throw malformed('templates', 'must be a list: a Semaphore project backup holds its templates there');
  const id = (name: string) => `${project}/${name}`;
  const objects: PlannedObject[] = [];
  const leftOut: LeftOut[] = [];

  // Keys: a key a repository uses is a source-control credential, any other a machine one.
  const repositories = listAt(doc.repositories, 'repositories').map((raw, i) => objectAt(raw, `repositories[${i}]`));
  const repoKeys = new Set(repositories.map((r) => r.ssh_key).filter((k): k is string => typeof k === 'string'));
  const keys = new Set<string>();
  listAt(doc.keys, 'keys').forEach((raw, i) => {
    const at = `keys[${i}]`;
    const key = objectAt(raw, at);
    const name = stringAt(key.name, `${at}.name`);
    const type = optionalString(key.type, `${at}.type`) ?? 'none';
    if (type === 'none') return leftOut.push({ kind: 'credential', name, source: at, reason: 'a key of type none holds nothing' });
    if (type !== 'ssh' && type !== 'login_password') return leftOut.push({ kind: 'credential', name, source: at, reason: `key type ${type} has no Cairn credential kind` });
    keys.add(name);
    const login = key.login_password && typeof key.login_password === 'object' ? (key.login_password as Record<string, unknown>).login : undefined;
    const sshLogin = key.ssh && typeof key.ssh === 'object' ? (key.ssh as Record<string, unknown>).login : undefined;
    const username = typeof login === 'string' && login ? login : typeof sshLogin === 'string' && sshLogin ? sshLogin : null;
    objects.push({
      kind: 'credential',
      external_id: id(name),
      name,
      source: at,
      draft: { name, description: '', kind: repoKeys.has(name) ? 'scm' : 'machine', inputs: username ? { username } : {} },
      notes: ['its secret is not in the backup: it waits for it (set it with PUT /v1/credentials/{id})'],
    });
  });
  const keyRef = (name: unknown): ImportRef | null => (typeof name === 'string' && keys.has(name) ? { kind: 'credential', external_id: id(name) } : null);

  const projects = new Set<string>();
  repositories.forEach((repo, i) => {
    const at = `repositories[${i}]`;
    const name = stringAt(repo.name, `${at}.name`);
    const url = stringAt(repo.git_url, `${at}.git_url`);
    projects.add(name);
    objects.push({ kind: 'project', external_id: id(name), name, source: at, draft: { name, url, branch: optionalString(repo.git_branch, `${at}.git_branch`) }, credential: keyRef(repo.ssh_key), notifications: [], notes: [] });
  });

  const inventories = new Map<string, ImportRef | null>();
  listAt(doc.inventories, 'inventories').forEach((raw, i) => {
    const at = `inventories[${i}]`;
    const inv = objectAt(raw, at);
    const name = stringAt(inv.name, `${at}.name`);
    const type = optionalString(inv.type, `${at}.type`) ?? 'static';
    if (type !== 'static' && type !== 'static-yaml') return leftOut.push({ kind: 'inventory', name, source: at, reason: `a ${type} inventory names a file or workspace on the Semaphore server, not hosts` });
    const content = optionalString(inv.inventory, `${at}.inventory`);
    if (!content) return leftOut.push({ kind: 'inventory', name, source: at, reason: 'it holds no hosts' });
    inventories.set(name, keyRef(inv.ssh_key));
    objects.push({ kind: 'inventory', external_id: id(name), name, source: at, draft: { name, content, format: type === 'static-yaml' ? 'yaml' : 'ini' }, notes: inv.become_key ? ['its become key is not carried: add it to templates as a credential'] : [] });
  });

  const environments = new Map<string, { vars: Record<string, unknown> | null | undefined; dropsMore: boolean }>();
  listAt(doc.environments, 'environments').forEach((raw, i) => {
    const env = objectAt(raw, `environments[${i}]`);
    const envVars = varsOf(env.env);
    const dropsMore = envVars !== null || !!env.password || listAt(env.secrets, `environments[${i}].secrets`).length > 0;
    environments.set(stringAt(env.name, `environments[${i}].name`), { vars: varsOf(env.json), dropsMore });
  });

  const templates = new Set<string>();
  doc.templates.forEach((raw: unknown, i: number) => {
    const at = `templates[${i}]`;
    const tpl = objectAt(raw, at);
    const name = stringAt(tpl.name, `${at}.name`);
    const app = optionalString(tpl.app, `${at}.app`) ?? 'ansible';
    const playbook = stringAt(tpl.playbook, `${at}.playbook`);
    if (app !== 'ansible' && app !== 'bash') return leftOut.push({ kind: 'template', name, source: at, reason: `a ${app} template is not carried; only ansible and bash templates are` });
    const notes: string[] = [];
    const envName = optionalString(tpl.environment, `${at}.environment`);
    const environment = envName ? environments.get(envName) : undefined;
    const extraVars = environment ? environment.vars : null;
    if (envName && extraVars === undefined) notes.push(`environment ${envName}'s variables are not read (missing from the backup, or nested YAML): set them on the template`);
    if (environment?.dropsMore) notes.push(`environment ${envName}'s environment variables and secrets are not carried`);
    if (optionalString(tpl.arguments, `${at}.arguments`) && tpl.arguments !== '[]') notes.push('its CLI arguments are not carried');
    const inventoryName = optionalString(tpl.inventory, `${at}.inventory`);
    const inventory = inventoryName && inventories.has(inventoryName) ? ({ kind: 'inventory', external_id: id(inventoryName) } as const) : null;
    if (inventoryName && !inventory) notes.push(`inventory ${inventoryName} is not imported, so it is not attached`);
    const repoName = optionalString(tpl.repository, `${at}.repository`);
    const projectRef = repoName && projects.has(repoName) ? ({ kind: 'project', external_id: id(repoName) } as const) : null;
    if (repoName && !projectRef) notes.push(`repository ${repoName} is not imported, so it is not attached`);
    const machine = inventoryName ? inventories.get(inventoryName) : null;
    templates.add(name);
    objects.push({
      kind: 'template',
      external_id: id(name),
      name,
      source: at,
      draft: {
        name,
        tool: app,
        command: app === 'bash' ? `bash ${JSON.stringify(playbook)}` : null,
        playbook: app === 'ansible' ? playbook : null,
        limit: null, tags: null, skip_tags: null, forks: null, verbosity: null, diff_mode: null,
        extra_vars: extraVars ?? null,
        timeout: null,
        survey: surveyOf(tpl.survey_vars, `${at}.survey_vars`),
        steps: null,
        allow_callbacks: false,
        external_callback: false,
      },
      inventory: app === 'ansible' ? inventory : null,
      project: projectRef,
      credentials: machine ? [machine] : [],
      step_inventories: {},
      external_job_template_id: null,
      notifications: [],
      notes,
    });
  });

  // Older backups keep a template's schedule on the template as `cron`; newer ones list `schedules`.
  const schedules = [
    ...doc.templates.flatMap((raw: unknown, i: number) => {
      const tpl = objectAt(raw, `templates[${i}]`);
      return typeof tpl.cron === 'string' && tpl.cron.trim() ? [{ at: `templates[${i}].cron`, sch: { cron_format: tpl.cron, template: tpl.name } as Record<string, unknown> }] : [];
    }),
    ...listAt(doc.schedules, 'schedules').map((raw, i) => ({ at: `schedules[${i}]`, sch: objectAt(raw, `schedules[${i}]`) })),
  ];
  schedules.forEach(({ at, sch }) => {
    const template = stringAt(sch.template, `${at}.template`);
    const cron = stringAt(sch.cron_format, `${at}.cron_format`);
    const name = optionalString(sch.name, `${at}.name`) ?? `${template}, cron ${cron}`;
    if (!templates.has(template)) return leftOut.push({ kind: 'schedule', name, source: at, reason: `its template ${template} is not imported` });
    objects.push({ kind: 'schedule', external_id: id(`${template}/${cron}`), name, source: at, draft: { name, cron, rrule: null, timezone: null, enabled: sch.active !== false }, template: { kind: 'template', external_id: id(template) }, notes: [] });
  });

  listAt(doc.views, 'views').forEach((raw, i) => {
    const view = objectAt(raw, `views[${i}]`);
    leftOut.push({ kind: 'view', name: String(view.title ?? view.name ?? ''), source: `views[${i}]`, reason: 'Cairn has no template views; its template list is filtered instead' });
  });
  return { format: 'projrunner', objects: ordered(objects), left_out: leftOut };
}

function surveyOf(list: unknown, at: string): unknown[] {
  return listAt(list, at).map((raw, i) => {
    const qat = `${at}[${i}]`;
    const q = objectAt(raw, qat);
    const semaphoreType = typeof q.type === 'string' ? q.type : '';
    const type = SURVEY_TYPES[semaphoreType];
    if (!type) throw malformed(`${qat}.type`, `survey type ${JSON.stringify(semaphoreType)} is not one Semaphore writes (string, int, secret, enum)`);
    const field: Record<string, unknown> = { var: stringAt(q.name, `${qat}.name`), type, required: q.required === true };
    const title = optionalString(q.title, `${qat}.title`);
    const help = optionalString(q.description, `${qat}.description`);
    if (title) field.label = title;
    if (help) field.help = help;
    if (type === 'choice') field.choices = listAt(q.values, `${qat}.values`).map((v, j) => String(objectAt(v, `${qat}.values[${j}]`).value ?? ''));
    return field;
  });
}
