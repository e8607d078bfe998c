import { parse as parseYaml, YAMLParseError } from 'yaml';
import type { ExportFile, ExportFiles } from './export-files';
import { quartzToCron } from './job-schedules';
import { JobTargets } from './job-targets';
import { isObject, malformed, ordered, type ImportPlan, type Json, type LeftOut, type PlannedAttachment, type PlannedObject } from './plan';
import { bashScript, bashTemplateDraft, durationSeconds, type ScriptStep } from './script';
import { attr, child, childText, elements, parseXml, textOf, type XmlElement } from './xml';

/**
 * `jobsched`: Rundeck jobs (spec part A 4.14 rule 3), told apart by content: a job export in XML
 * (`<joblist><job>…`, as `rd jobs list -f` or the job's Download menu write it), in YAML (a list
 * of job maps), or a project archive (a zip holding `rundeck-<project>/jobs/job-*.xml`). Each job
 * becomes a bash template whose script runs its sequence of steps (core/imports/script.ts), its
 * options a survey, its schedule a schedule. A job with a step Cairn cannot run on its own (a job
 * reference, a plugin step, a script file or URL on the Rundeck server) is left out, naming the
 * step: running the rest without it would not be the same job. External ids are the job's uuid.
 */

interface RdOption {
  name: string;
  label: string | null;
  description: string | null;
  required: boolean;
  secure: boolean;
  value: string | null;
  values: string[] | null;
  enforced: boolean;
  regex: string | null;
  multivalued: boolean;
  type: string | null;
  /** A secure option's default from Rundeck's key storage. */
  storagePath: string | null;
}

interface RdStep {
  description: string | null;
  exec: string | null;
  script: string | null;
  scriptfile: string | null;
  scripturl: string | null;
  args: string | null;
  interpreter: string | null;
  quoted: boolean;
  jobref: string | null;
  plugin: string | null;
  errorhandler: RdStep | null;
  keepgoingOnSuccess: boolean;
}

interface RdJob {
  source: string;
  uuid: string | null;
  name: string;
  group: string | null;
  project: string | null;
  description: string | null;
  options: RdOption[];
  steps: RdStep[];
  keepgoing: boolean;
  strategy: string | null;
  nodefilter: string | null;
  /** A Quartz expression, built from the simple form when the job gives that. */
  crontab: string | null;
  scheduleEnabled: boolean;
  executionEnabled: boolean;
  timeout: string | null;
  timeZone: string | null;
  retry: string | null;
  notifications: RdNotification[];
}

/** One trigger's notifications (`onstart`, `onsuccess`, `onfailure`, …). */
interface RdNotification {
  trigger: string;
  emails: string[];
  urls: string[];
  plugins: string[];
}

/** Rundeck's notification triggers as the events Cairn attaches a target for. */
const TRIGGER_EVENTS: Record<string, 'started' | 'success' | 'failure'> = { onstart: 'started', onsuccess: 'success', onfailure: 'failure' };

/** The job files of a Rundeck project archive. */
export const RUNDECK_JOB_FILE = /^rundeck-([^/]+)\/jobs\/job-[^/]+\.xml$/;

export function readJobsched(input: ExportFiles, options: { inventory?: string }): ImportPlan {
  const jobs: RdJob[] = [];
  if (input.archive) {
    const files = input.files.filter((f) => RUNDECK_JOB_FILE.test(f.path));
    if (!files.length) throw malformed('body', 'is a zip but not a Rundeck project archive: it holds no rundeck-<project>/jobs/job-*.xml');
    for (const file of files) jobs.push(...xmlJobs(file, RUNDECK_JOB_FILE.exec(file.path)![1]));
  } else {
    const file = input.files[0];
    const text = file.text.replace(/^\ufeff/, '').trimStart();
    jobs.push(...(text.startsWith('<') ? xmlJobs(file, null) : yamlJobs(file)));
  }
  const objects: PlannedObject[] = [];
  const leftOut: LeftOut[] = [];
  const seen = new Set<string>();
  const targets = new JobTargets('a Rundeck job notification');
  for (const job of jobs) planJob(job, objects, leftOut, seen, options.inventory !== undefined, targets);
  return { format: 'jobsched', objects: ordered([...targets.objects(), ...objects]), left_out: leftOut };
}

// ---- XML (Rundeck's job-xml)

function xmlJobs(file: ExportFile, archiveProject: string | null): RdJob[] {
  const root = parseXml(file.text, file.path);
  if (root.tagName !== 'joblist') throw malformed(file.path, `is not a Rundeck job export: its root element is <${root.tagName}>, not <joblist>`);
  const jobs = elements(root, 'job');
  if (!jobs.length && !archiveProject) throw malformed(file.path, 'holds no <job>');
  return jobs.map((job, i) => {
    const at = `${file.path === 'body' ? '' : `${file.path}: `}joblist.job[${i}]`;
    const context = child(job, 'context');
    const schedule = child(job, 'schedule');
    const sequence = child(job, 'sequence');
    const name = childText(job, 'name');
    if (!name) throw malformed(`${at}.name`, 'must be a non-empty string');
    return {
      source: at,
      uuid: childText(job, 'uuid') ?? childText(job, 'id'),
      name,
      group: childText(job, 'group'),
      project: childText(context, 'project') ?? archiveProject,
      description: childText(job, 'description'),
      options: elements(child(context, 'options'), 'option').map((o, j) => xmlOption(o, `${at}.context.options.option[${j}]`)),
      steps: elements(sequence, 'command').map(xmlStep),
      keepgoing: attr(sequence, 'keepgoing') === 'true',
      strategy: attr(sequence, 'strategy'),
      nodefilter: childText(child(job, 'nodefilters'), 'filter'),
      crontab: schedule ? (attr(schedule, 'crontab') ?? simpleQuartz({
        hour: attr(child(schedule, 'time'), 'hour'),
        minute: attr(child(schedule, 'time'), 'minute'),
        seconds: attr(child(schedule, 'time'), 'seconds'),
        weekday: attr(child(schedule, 'weekday'), 'day'),
        dayofmonth: attr(child(schedule, 'dayofmonth'), 'day') ?? attr(child(schedule, 'month'), 'day'),
        month: attr(child(schedule, 'month'), 'month'),
        year: attr(child(schedule, 'year'), 'year'),
      })) : null,
      scheduleEnabled: childText(job, 'scheduleEnabled') !== 'false',
      executionEnabled: childText(job, 'executionEnabled') !== 'false',
      timeout: childText(job, 'timeout'),
      timeZone: childText(job, 'timeZone'),
      retry: childText(job, 'retry'),
      notifications: elements(child(job, 'notification')).map((trigger) => ({
        trigger: trigger.tagName,
        emails: elements(trigger, 'email').map((e) => attr(e, 'recipients') ?? '').filter(Boolean),
        urls: elements(trigger, 'webhook').flatMap((w) => (attr(w, 'urls') ?? '').split(',')).map((u) => u.trim()).filter(Boolean),
        plugins: elements(trigger, 'plugin').map((p) => attr(p, 'type') ?? 'a plugin'),
      })),
    };
  });
}

function xmlOption(o: XmlElement, at: string): RdOption {
  const name = attr(o, 'name');
  if (!name) throw malformed(`${at}.name`, 'must be a non-empty string');
  const delimiter = attr(o, 'valuesListDelimiter') ?? ',';
  const values = attr(o, 'values');
  const listed = elements(child(o, 'values'), 'value').map((v) => textOf(v) ?? '');
  return {
    name,
    label: attr(o, 'label'),
    description: childText(o, 'description'),
    required: attr(o, 'required') === 'true',
    secure: attr(o, 'secure') === 'true',
    value: attr(o, 'value'),
    values: values !== null ? values.split(delimiter).map((v) => v.trim()).filter(Boolean) : listed.length ? listed : null,
    enforced: attr(o, 'enforcedvalues') === 'true',
    regex: attr(o, 'regex'),
    multivalued: attr(o, 'multivalued') === 'true',
    type: attr(o, 'type'),
    storagePath: attr(o, 'storagePath'),
  };
}

function xmlStep(command: XmlElement): RdStep {
  const plugin = child(command, 'node-step-plugin') ?? child(command, 'step-plugin');
  const jobref = child(command, 'jobref');
  const handler = child(command, 'errorhandler');
  const interpreter = child(command, 'scriptinterpreter');
  return {
    description: childText(command, 'description'),
    exec: textOf(child(command, 'exec')),
    script: textOf(child(command, 'script')),
    scriptfile: childText(command, 'scriptfile'),
    scripturl: childText(command, 'scripturl'),
    args: childText(command, 'scriptargs'),
    interpreter: textOf(interpreter)?.trim() || null,
    quoted: attr(interpreter, 'argsquoted') === 'true',
    jobref: jobref ? [attr(jobref, 'group'), attr(jobref, 'name') ?? attr(jobref, 'uuid')].filter(Boolean).join('/') : null,
    plugin: plugin ? (attr(plugin, 'type') ?? 'a plugin') : null,
    errorhandler: handler ? xmlStep(handler) : null,
    keepgoingOnSuccess: attr(handler, 'keepgoingOnSuccess') === 'true',
  };
}

// ---- YAML (Rundeck's job-yaml)

function yamlJobs(file: ExportFile): RdJob[] {
  let doc: unknown;
  try {
    doc = parseYaml(file.text, { maxAliasCount: 100, uniqueKeys: true });
  } catch (err) {
    const message = err instanceof YAMLParseError ? err.message.split('\n')[0] : (err as Error).message;
    throw malformed(file.path, `is neither a Rundeck job XML export (<joblist>) nor YAML: ${message}`);
  }
  if (!Array.isArray(doc)) throw malformed(file.path, 'is not a Rundeck job export: job YAML is a list of jobs');
  return doc.map((raw, i) => {
    const at = `[${i}]`;
    if (!isObject(raw)) throw malformed(at, 'must be a job map');
    const name = str(raw.name);
    if (!name) throw malformed(`${at}.name`, 'must be a non-empty string');
    const sequence = isObject(raw.sequence) ? raw.sequence : {};
    const commands = Array.isArray(sequence.commands) ? sequence.commands : [];
    const schedule = isObject(raw.schedule) ? raw.schedule : null;
    const nodefilters = isObject(raw.nodefilters) ? raw.nodefilters : {};
    const retry = isObject(raw.retry) ? str(raw.retry.retry) : str(raw.retry);
    return {
      source: at,
      uuid: str(raw.uuid) ?? str(raw.id),
      name,
      group: str(raw.group),
      project: str(raw.project),
      description: str(raw.description),
      options: yamlOptions(raw.options, `${at}.options`),
      steps: commands.map((c, j) => yamlStep(c, `${at}.sequence.commands[${j}]`)),
      keepgoing: sequence.keepgoing === true || sequence.keepgoing === 'true',
      strategy: str(sequence.strategy),
      nodefilter: str(nodefilters.filter),
      crontab: schedule ? (str(schedule.crontab) ?? simpleQuartz(yamlSimple(schedule))) : null,
      scheduleEnabled: raw.scheduleEnabled !== false && raw.scheduleEnabled !== 'false',
      executionEnabled: raw.executionEnabled !== false && raw.executionEnabled !== 'false',
      timeout: str(raw.timeout),
      timeZone: str(raw.timeZone),
      retry,
      notifications: isObject(raw.notification)
        ? Object.entries(raw.notification).map(([trigger, value]) => {
            const v = isObject(value) ? value : {};
            const email = isObject(v.email) ? str(v.email.recipients) : null;
            const urls = str(v.urls) ?? (isObject(v.webhook) ? str(v.webhook.urls) : null);
            const plugins = (Array.isArray(v.plugin) ? v.plugin : v.plugin ? [v.plugin] : []).map((p) => (isObject(p) ? (str(p.type) ?? 'a plugin') : 'a plugin'));
            return { trigger, emails: email ? [email] : [], urls: urls ? urls.split(',').map((u) => u.trim()).filter(Boolean) : [], plugins };
          })
        : [],
    };
  });
}

/** A scalar as a string (YAML may give numbers and booleans), or null when absent or blank. */
function str(value: unknown): string | null {
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return typeof value === 'string' && value.trim() !== '' ? value : null;
}

/** Options as a list of maps (newer exports) or a map of name to option (older ones). */
function yamlOptions(value: unknown, at: string): RdOption[] {
  const list = Array.isArray(value) ? value : isObject(value) ? Object.entries(value).map(([name, o]) => ({ name, ...(isObject(o) ? o : {}) })) : [];
  return list.map((raw, i) => {
    if (!isObject(raw)) throw malformed(`${at}[${i}]`, 'must be an option map');
    const name = str(raw.name);
    if (!name) throw malformed(`${at}[${i}].name`, 'must be a non-empty string');
    const delimiter = str(raw.valuesListDelimiter) ?? ',';
    const values = Array.isArray(raw.values) ? raw.values.map(String) : typeof raw.values === 'string' ? raw.values.split(delimiter).map((v) => v.trim()).filter(Boolean) : null;
    return {
      name,
      label: str(raw.label),
      description: str(raw.description),
      required: raw.required === true,
      secure: raw.secure === true,
      value: str(raw.value),
      values,
      enforced: raw.enforced === true,
      regex: str(raw.regex),
      multivalued: raw.multivalued === true,
      type: str(raw.type),
      storagePath: str(raw.storagePath),
    };
  });
}

function yamlStep(raw: unknown, at: string): RdStep {
  if (!isObject(raw)) throw malformed(at, 'must be a step map');
  const jobref = isObject(raw.jobref) ? raw.jobref : null;
  const handler = isObject(raw.errorhandler) ? raw.errorhandler : null;
  const plugin = raw.type !== undefined && raw.exec === undefined && raw.script === undefined ? (str(raw.type) ?? 'a plugin') : null;
  return {
    description: str(raw.description),
    exec: typeof raw.exec === 'string' ? raw.exec : null,
    script: typeof raw.script === 'string' ? raw.script : null,
    scriptfile: str(raw.scriptfile),
    scripturl: str(raw.scripturl),
    args: str(raw.args),
    interpreter: str(raw.scriptInterpreter),
    quoted: raw.interpreterArgsQuoted === true,
    jobref: jobref ? [str(jobref.group), str(jobref.name) ?? str(jobref.uuid)].filter(Boolean).join('/') : null,
    plugin,
    errorhandler: handler ? yamlStep(handler, `${at}.errorhandler`) : null,
    keepgoingOnSuccess: handler?.keepgoingOnSuccess === true,
  };
}

function yamlSimple(schedule: Json): Parameters<typeof simpleQuartz>[0] {
  const time = isObject(schedule.time) ? schedule.time : {};
  const month = schedule.month;
  return {
    hour: str(time.hour),
    minute: str(time.minute),
    seconds: str(time.seconds),
    weekday: isObject(schedule.weekday) ? str(schedule.weekday.day) : str(schedule.weekday),
    dayofmonth: isObject(schedule.dayofmonth) ? str(schedule.dayofmonth.day) : isObject(month) ? str(month.day) : null,
    month: isObject(month) ? str(month.month) : str(month),
    year: isObject(schedule.year) ? str(schedule.year.year) : str(schedule.year),
  };
}

/** Rundeck's simple schedule form (time, weekday, month, day of month, year) as a Quartz expression. */
function simpleQuartz(s: { hour: string | null; minute: string | null; seconds: string | null; weekday: string | null; dayofmonth: string | null; month: string | null; year: string | null }): string | null {
  if (s.hour === null && s.minute === null) return null;
  const dom = s.dayofmonth && s.dayofmonth !== '?' ? s.dayofmonth : '?';
  const dow = dom !== '?' ? '?' : (s.weekday ?? '*');
  return [s.seconds ?? '0', s.minute ?? '0', s.hour ?? '0', dom === '?' && dow === '?' ? '*' : dom, s.month ?? '*', dow, s.year ?? '*'].join(' ');
}

// ---- the plan

/** A Rundeck option's name as a survey var and as Rundeck's environment variable. */
const varOf = (name: string) => name.replace(/[^A-Za-z0-9_]/g, '_').replace(/^(\d)/, '_$1');
const envOf = (name: string) => `RD_OPTION_${name.toUpperCase().replace(/[^A-Z0-9_]/g, '_')}`;

/** A pattern RE2 cannot run (lookaround, backreferences) is not carried. */
const RE2_UNSUPPORTED = /\(\?[=!<]|\\[1-9]|\(\?>|[*+?}]\+/;

function planJob(job: RdJob, objects: PlannedObject[], leftOut: LeftOut[], seen: Set<string>, withInventory: boolean, targets: JobTargets): void {
  const name = job.group ? `${job.group}/${job.name}` : job.name;
  const externalId = job.uuid ?? `${job.project ?? ''}/${name}`;
  if (seen.has(externalId)) return void leftOut.push({ kind: 'template', name, source: job.source, reason: `job ${externalId} appears twice in the export; its first is imported` });
  seen.add(externalId);
  const refused = job.steps.map((step, i) => unrunnable(step, i + 1)).find((r) => r !== null);
  if (refused) return void leftOut.push({ kind: 'template', name, source: job.source, reason: refused });
  if (!job.steps.length) return void leftOut.push({ kind: 'template', name, source: job.source, reason: 'its sequence has no step' });

  const notes: string[] = [];
  const survey: unknown[] = [];
  const prologue: string[] = [];
  for (const option of job.options) {
    if (option.type === 'file') {
      notes.push(`option ${option.name} is a file option, which is not carried`);
      continue;
    }
    const variable = varOf(option.name);
    if (variable !== option.name) notes.push(`option ${option.name} is the survey var ${variable}`);
    const field: Record<string, unknown> = { var: variable, type: option.secure ? 'secret' : option.values && option.enforced && !option.multivalued ? 'choice' : 'text', required: option.required };
    if (option.label) field.label = option.label;
    if (option.description) field.help = option.description;
    if (field.type === 'choice') field.choices = option.values;
    else if (option.values?.length) notes.push(`option ${option.name}'s ${option.multivalued ? 'multiple values' : 'suggested values'} (${option.values.join(', ')}) are not carried: it is a text field`);
    if (option.value !== null && !option.secure && (field.type !== 'choice' || option.values!.includes(option.value))) field.default = option.value;
    if (option.secure && option.value !== null) notes.push(`option ${option.name}'s secure default is not carried`);
    if (option.storagePath) notes.push(`option ${option.name}'s default from Rundeck's key storage (${option.storagePath}) is not carried: answer it at launch`);
    if (option.regex && field.type !== 'choice') {
      if (RE2_UNSUPPORTED.test(option.regex)) notes.push(`option ${option.name}'s regex uses Java syntax RE2 does not run and is not carried`);
      else field.pattern = option.regex;
    }
    survey.push(field);
    prologue.push(`export ${envOf(option.name)}="\${${variable}-}"`);
  }
  if (prologue.length) prologue.unshift("# Rundeck's option variables, from the survey's answers:");

  const tokens = new Set<string>();
  const translate = (text: string) =>
    text.replace(/\$\{option\.([^}\s]+)\}/g, (_all, opt: string) => `\${${envOf(opt)}}`).replace(/\$\{(job|node|execution|globals|data)\.[^}]*\}/g, (all) => (tokens.add(all), all));
  const stepOf = (step: RdStep, n: number): ScriptStep => {
    if (step.script !== null && /@option\.[^@\s]+@/.test(step.script)) notes.push(`step ${n}'s script uses @option.NAME@ tokens, which are not expanded: use $RD_OPTION_NAME`);
    return step.exec !== null
      ? { label: step.description ?? step.exec, kind: 'command', text: translate(step.exec) }
      : { label: step.description ?? 'inline script', kind: 'script', text: step.script ?? '', args: step.args && translate(step.args), interpreter: step.interpreter, quoted: step.quoted };
  };
  const steps = job.steps.map((step, i): ScriptStep => ({
    ...stepOf(step, i + 1),
    handler: step.errorhandler ? { ...stepOf(step.errorhandler, i + 1), recovers: step.keepgoingOnSuccess } : null,
  }));
  if (tokens.size) notes.push(`Rundeck context variables ${[...tokens].join(', ')} are not set: the job runs on a Cairn worker`);
  if (job.nodefilter) notes.push(`its node filter ${JSON.stringify(job.nodefilter)} is not carried: the script runs on a Cairn worker${withInventory ? ', the template naming the import\'s inventory' : ''}`);
  if (job.strategy === 'parallel') notes.push('its parallel strategy is not carried: the steps run in order');
  if (!job.executionEnabled) notes.push('execution was disabled in Rundeck; the template may be launched');
  if (job.retry && job.retry !== '0') notes.push(`its retry count ${job.retry} is not carried`);
  const notifications: PlannedAttachment[] = [];
  job.notifications.forEach((n) => {
    const event = TRIGGER_EVENTS[n.trigger];
    const what = [...n.emails.map(() => 'mail'), ...n.urls.map(() => 'webhook'), ...n.plugins];
    if (!event) return void (what.length && notes.push(`its ${n.trigger} notifications are not carried: Cairn has no such event`));
    for (const recipients of n.emails) {
      const attachment = targets.email(recipients, event, `${job.source}.notification.${n.trigger}`);
      if (attachment) notifications.push(attachment);
    }
    for (const url of n.urls) notifications.push(targets.webhook(url, event, `${job.source}.notification.${n.trigger}`));
    for (const plugin of n.plugins) notes.push(`its ${n.trigger} notification by the ${plugin} plugin is not carried: attach a notification target`);
  });
  let timeout: number | null = null;
  if (job.timeout) {
    timeout = durationSeconds(job.timeout);
    if (timeout === null) notes.push(`its timeout ${JSON.stringify(job.timeout)} is not a duration Cairn reads and is not carried`);
  }
  const header = [`Rundeck job ${name}${job.uuid ? ` (${job.uuid})` : ''}${job.project ? ` of project ${job.project}` : ''}, imported by Cairn.`, ...(job.description ? job.description.split('\n') : [])];
  objects.push({
    kind: 'template',
    external_id: externalId,
    name,
    source: job.source,
    draft: bashTemplateDraft(name, bashScript(header, prologue, steps, job.keepgoing), timeout, survey),
    inventory: null,
    project: null,
    credentials: [],
    step_inventories: {},
    external_job_template_id: null,
    notifications,
    notes,
  });

  if (!job.crontab) return;
  const cron = quartzToCron(job.crontab);
  const scheduleName = `${name}, ${job.crontab}`;
  if ('problem' in cron) return void leftOut.push({ kind: 'schedule', name: scheduleName, source: `${job.source}.schedule`, reason: cron.problem });
  objects.push({
    kind: 'schedule',
    external_id: `${externalId}/schedule`,
    name: scheduleName,
    source: `${job.source}.schedule`,
    draft: { name: scheduleName, cron: cron.cron, rrule: null, timezone: job.timeZone, enabled: job.scheduleEnabled },
    template: { kind: 'template', external_id: externalId },
    notes: cron.notes,
  });
}

/** Why a step cannot run on a Cairn worker as part of a script, or null when it can. */
function unrunnable(step: RdStep, n: number): string | null {
  const handler = step.errorhandler ? unrunnable(step.errorhandler, n) : null;
  if (handler) return handler.replace(`step ${n}`, `step ${n}'s error handler`);
  if (step.jobref) return `step ${n} runs job ${step.jobref}; a job reference is not carried (import that job and chain the templates in a workflow)`;
  if (step.plugin) return `step ${n} is a ${step.plugin} plugin step, which Cairn has no counterpart for`;
  if (step.scriptfile) return `step ${n} runs the script file ${step.scriptfile} on the Rundeck server, which the export does not hold`;
  if (step.scripturl) return `step ${n} fetches its script from ${step.scripturl} at run time, which is not carried`;
  if (step.exec === null && step.script === null) return `step ${n} has no command or script`;
  return null;
}
