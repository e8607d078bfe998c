import type { ExportFiles } from './export-files';
import { jenkinsTimerCrons } from './job-schedules';
import { JobTargets } from './job-targets';
import { malformed, ordered, type ImportPlan, type ImportRef, type LeftOut, type PlannedAttachment, type PlannedObject, type PlannedProject } from './plan';
import { bashScript, bashTemplateDraft, type ScriptStep } from './script';
import { attr, child, childText, elements, parseXml, textOf, type XmlElement } from './xml';

/**
 * `ciserver`: Jenkins jobs (spec part A 4.14 rule 3), told apart by content: one job's
 * `config.xml` (its name given by `name=`, since the file does not hold it), or a zip of a
 * Jenkins `jobs/` directory (`jobs/<name>/config.xml`, folders nesting `jobs/<folder>/jobs/<name>`;
 * the job's full name, such as `team/build`, is its name in Cairn and its external id).
 *
 * A freestyle job (`<project>`) becomes a bash template: its shell build steps run in order, each
 * from its own file as Jenkins runs them (`sh -xe` unless the step has a `#!` line), stopping at
 * the first failure; its parameters a survey (they reach the steps as environment variables of
 * the same names, as in Jenkins); its timer triggers schedules. What cannot be carried is left
 * out with the reason: Pipeline, multibranch, matrix and Maven jobs, a job with a build step other
 * than a shell step (its other steps would not be the same job), polling triggers; parts of a job
 * that cannot be carried (post-build actions, its SCM checkout, other build wrappers) are noted.
 */

/** The wanted files of a jobs-directory zip: `…jobs/<name>(/jobs/<name>)*` `/config.xml`. */
export const JENKINS_JOB_FILE = /^(?:[^/]+\/)*?jobs\/((?:[^/]+\/jobs\/)*[^/]+)\/config\.xml$/;

/** Root elements of job types that are not carried, and why. */
const NOT_CARRIED: Record<string, string> = {
  'flow-definition': 'a Pipeline job: its Jenkinsfile runs Pipeline steps on Jenkins agents, which Cairn has no counterpart for; make a template of each stage\'s commands, or a workflow of them',
  'org.jenkinsci.plugins.workflow.multibranch.WorkflowMultiBranchProject': 'a multibranch Pipeline: its jobs are made by Jenkins from each branch\'s Jenkinsfile',
  'jenkins.branch.OrganizationFolder': 'an organization folder: its jobs are made by Jenkins from a forge\'s repositories',
  'matrix-project': 'a multi-configuration (matrix) job: Cairn runs one configuration per template',
  'maven2-moduleset': 'a Maven project job: its build is Jenkins\'s Maven integration',
};

const FOLDER = 'com.cloudbees.hudson.plugins.folder.Folder';

/** Jenkins parameter definitions to survey types. */
const PARAMETER_TYPES: Record<string, string> = {
  'hudson.model.StringParameterDefinition': 'text',
  'hudson.model.TextParameterDefinition': 'multiline',
  'hudson.model.BooleanParameterDefinition': 'bool',
  'hudson.model.ChoiceParameterDefinition': 'choice',
  'hudson.model.PasswordParameterDefinition': 'secret',
};

/** Jenkins's own build variables a step may read that a Cairn run does not set. */
const BUILD_VARIABLES = /\$\{?(BUILD_NUMBER|BUILD_ID|BUILD_URL|BUILD_TAG|BUILD_DISPLAY_NAME|NODE_NAME|NODE_LABELS|EXECUTOR_NUMBER|JENKINS_URL|JENKINS_HOME|JOB_URL|GIT_COMMIT|GIT_BRANCH|GIT_URL)\b/g;

export function readCiserver(input: ExportFiles, options: { name?: string }): ImportPlan {
  const objects: PlannedObject[] = [];
  const leftOut: LeftOut[] = [];
  const targets = new JobTargets('a Jenkins job\'s mail recipients');
  const projects = new JobProjects();
  if (input.archive) {
    if (options.name !== undefined) throw malformed('name', 'a zip of a jobs directory names its jobs itself; name= is for a single config.xml');
    const jobs = input.files.flatMap((file) => {
      const match = JENKINS_JOB_FILE.exec(file.path);
      return match ? [{ file, name: match[1].split('/jobs/').join('/') }] : [];
    });
    if (!jobs.length) throw malformed('body', 'is a zip but not a Jenkins jobs directory: it holds no jobs/<name>/config.xml');
    for (const { file, name } of jobs.sort((a, b) => a.name.localeCompare(b.name))) planJob(parseXml(file.text, file.path), name, file.path, objects, leftOut, targets, projects);
  } else {
    const file = input.files[0];
    const root = parseXml(file.text, 'body');
    if (options.name === undefined) throw malformed('name', 'a single config.xml does not hold its job\'s name: give it as name=');
    planJob(root, options.name, 'config.xml', objects, leftOut, targets, projects);
  }
  return { format: 'ciserver', objects: ordered([...projects.objects(), ...targets.objects(), ...objects]), left_out: leftOut };
}

function planJob(root: XmlElement, name: string, source: string, objects: PlannedObject[], leftOut: LeftOut[], targets: JobTargets, projects: JobProjects): void {
  const type = root.tagName;
  if (type === FOLDER) return void leftOut.push({ kind: 'folder', name, source, reason: 'a folder is not an object in Cairn: its jobs are imported with its name before theirs' });
  if (NOT_CARRIED[type]) return void leftOut.push({ kind: 'template', name, source, reason: `it is ${NOT_CARRIED[type]}` });
  if (type !== 'project') return void leftOut.push({ kind: 'template', name, source, reason: `its job type <${type}> is not one Cairn reads; only freestyle jobs (<project>) are carried` });

  const builders = elements(child(root, 'builders'));
  const other = builders.find((b) => b.tagName !== 'hudson.tasks.Shell');
  if (other) return void leftOut.push({ kind: 'template', name, source, reason: `its build step ${other.tagName} is not a shell step, which Cairn has no counterpart for` });
  if (!builders.length) return void leftOut.push({ kind: 'template', name, source, reason: 'it has no build step' });

  const notes: string[] = [];
  const survey: unknown[] = [];
  const definitions = elements(child(child(child(root, 'properties'), 'hudson.model.ParametersDefinitionProperty'), 'parameterDefinitions'));
  definitions.forEach((definition, i) => {
    const at = `${source}: properties.parameterDefinitions[${i}]`;
    const parameter = childText(definition, 'name');
    if (!parameter) throw malformed(`${at}.name`, 'must be a non-empty string');
    const surveyType = PARAMETER_TYPES[definition.tagName];
    if (!surveyType) return void notes.push(`parameter ${parameter} (${definition.tagName}) has no survey type and is not carried`);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(parameter)) return void notes.push(`parameter ${parameter} is not a shell variable name, so it could not reach the steps, and is not carried`);
    const field: Record<string, unknown> = { var: parameter, type: surveyType, required: false };
    const help = childText(definition, 'description');
    if (help) field.help = help;
    const defaultValue = textOf(child(definition, 'defaultValue'));
    if (surveyType === 'bool') field.default = defaultValue?.trim() === 'true';
    else if (surveyType === 'choice') {
      const choicesElement = child(definition, 'choices');
      const strings = choicesElement ? choicesElement.getElementsByTagName('string') : null;
      const choices = strings && strings.length ? Array.from({ length: strings.length }, (_v, j) => textOf(strings.item(j) as XmlElement) ?? '') : (textOf(choicesElement) ?? '').split('\n').map((c) => c.trim()).filter(Boolean);
      if (!choices.length) return void notes.push(`choice parameter ${parameter} lists no choices and is not carried`);
      field.choices = choices;
      // Jenkins's first choice is the default.
      field.default = choices[0];
    } else if (surveyType === 'secret') {
      if (defaultValue?.trim()) notes.push(`password parameter ${parameter}'s default is encrypted with the Jenkins controller's key and is not carried`);
    } else if (defaultValue !== null && defaultValue !== '') field.default = definition.tagName === 'hudson.model.StringParameterDefinition' && childText(definition, 'trim') === 'true' ? defaultValue.trim() : defaultValue;
    survey.push(field);
  });

  const steps: ScriptStep[] = builders.map((builder, i) => {
    const command = textOf(child(builder, 'command')) ?? '';
    return { label: `shell step ${i + 1}`, kind: 'script', text: command, interpreter: command.startsWith('#!') ? null : 'sh -xe' };
  });
  const used = new Set<string>();
  for (const step of steps) for (const match of step.text.matchAll(BUILD_VARIABLES)) used.add(match[1]);
  if (used.size) notes.push(`its steps read Jenkins build variables a Cairn run does not set: ${[...used].join(', ')}`);

  // A git checkout becomes a project the template runs in a copy of; another SCM is not carried.
  const scm = child(root, 'scm');
  const scmClass = attr(scm, 'class');
  let project: ImportRef | null = null;
  if (scmClass === 'hudson.plugins.git.GitSCM') {
    const remote = child(child(scm, 'userRemoteConfigs'), 'hudson.plugins.git.UserRemoteConfig');
    const url = childText(remote, 'url');
    const spec = childText(child(child(scm, 'branches'), 'hudson.plugins.git.BranchSpec'), 'name');
    const branch = spec ? spec.replace(/^(\*\/|origin\/|refs\/heads\/)/, '') : null;
    if (!url) notes.push('its git checkout names no repository and is not carried');
    else {
      const exact = branch && !/[*?[\]]/.test(branch) ? branch : null;
      if (branch && !exact) notes.push(`its branch pattern ${spec} is not carried: the project follows the repository's default branch`);
      if (childText(remote, 'credentialsId')) notes.push(`its checkout credential ${childText(remote, 'credentialsId')} is not carried: give the project a source-control credential`);
      project = projects.project(url, exact, `${source}: scm`);
      notes.push(`its git checkout is the project for ${url}: the steps run in a copy of it, not a clone of their own`);
    }
  } else if (scmClass && scmClass !== 'hudson.scm.NullSCM') {
    notes.push(`its source checkout (${scmClass}) is not carried: the steps run in an empty work directory`);
  }
  // The mailer's recipients become an email target told of failures; other post-build actions are not carried.
  const notifications: PlannedAttachment[] = [];
  const publishers: string[] = [];
  for (const publisher of elements(child(root, 'publishers'))) {
    const recipients = publisher.tagName === 'hudson.tasks.Mailer' ? childText(publisher, 'recipients') : null;
    const attachment = recipients ? targets.email(recipients, 'failure', `${source}: publishers.hudson.tasks.Mailer`) : null;
    if (attachment) {
      notifications.push(attachment);
      notes.push('its mail on a broken build goes to an email target told of failures (Jenkins also mails when a build is fixed; Cairn does not)');
    } else publishers.push(publisher.tagName);
  }
  if (publishers.length) notes.push(`its post-build actions are not carried: ${publishers.join(', ')}`);
  let timeout: number | null = null;
  for (const wrapper of elements(child(root, 'buildWrappers'))) {
    const minutes = wrapper.tagName === 'hudson.plugins.build__timeout.BuildTimeoutWrapper' ? childText(child(wrapper, 'strategy'), 'timeoutMinutes') : null;
    if (minutes && /^\d+$/.test(minutes) && Number(minutes) > 0) timeout = Number(minutes) * 60;
    else notes.push(`its build wrapper ${wrapper.tagName} is not carried`);
  }
  if (childText(root, 'disabled') === 'true') notes.push('it was disabled in Jenkins; the template may be launched and its schedules are imported disabled');

  const prologue = [
    '# What Jenkins sets for every build that a Cairn run can:',
    `export JOB_NAME=${shellQuote(name)} JOB_BASE_NAME=${shellQuote(name.split('/').pop()!)} WORKSPACE="$PWD"`,
  ];
  const description = childText(root, 'description');
  const header = [`Jenkins job ${name}, imported by Cairn.`, ...(description ? description.split('\n') : [])];
  objects.push({
    kind: 'template',
    external_id: name,
    name,
    source,
    draft: bashTemplateDraft(name, bashScript(header, prologue, steps, false), timeout, survey),
    inventory: null,
    project,
    credentials: [],
    step_inventories: {},
    external_job_template_id: null,
    notifications,
    notes,
  });

  const enabled = childText(root, 'disabled') !== 'true';
  elements(child(root, 'triggers')).forEach((trigger, i) => {
    const at = `${source}: triggers[${i}]`;
    if (trigger.tagName !== 'hudson.triggers.TimerTrigger') {
      const why = trigger.tagName === 'hudson.triggers.SCMTrigger' ? 'source polling is not carried: add a forge webhook trigger to the template' : 'only timer triggers are carried';
      return void leftOut.push({ kind: 'schedule', name: `${name}, ${trigger.tagName}`, source: at, reason: why });
    }
    const { timezone, crons } = jenkinsTimerCrons(textOf(child(trigger, 'spec')) ?? '', name);
    crons.forEach((cron, j) => {
      if ('problem' in cron) return void leftOut.push({ kind: 'schedule', name: `${name}, timer ${j + 1}`, source: at, reason: cron.problem });
      const scheduleName = `${name}, ${cron.cron}`;
      objects.push({
        kind: 'schedule',
        external_id: `${name}/timer/${j}`,
        name: scheduleName,
        source: at,
        draft: { name: scheduleName, cron: cron.cron, rrule: null, timezone, enabled },
        template: { kind: 'template', external_id: name },
        notes: cron.notes,
      });
    });
  });
}

/**
 * The git repositories jobs check out, one project per repository and branch (external id
 * `git:<url>#<branch>`), named by the repository's address without its scheme and `.git`, and the
 * branch when one is named.
 */
class JobProjects {
  private readonly projects = new Map<string, PlannedProject>();

  project(url: string, branch: string | null, at: string): ImportRef {
    const externalId = `git:${url}#${branch ?? ''}`;
    if (!this.projects.has(externalId)) {
      const base = url.replace(/^[a-z+]+:\/\//i, '').replace(/^[^@/]+@/, '').replace(/\.git$/, '').replace(/:/, '/');
      const name = `${base.length > 200 ? base.slice(-200) : base}${branch ? ` (${branch})` : ''}`;
      this.projects.set(externalId, { kind: 'project', external_id: externalId, name, source: at, draft: { name, url, branch }, credential: null, notifications: [], notes: [] });
    }
    return { kind: 'project', external_id: externalId };
  }

  objects(): PlannedObject[] {
    return [...this.projects.values()];
  }
}

const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
