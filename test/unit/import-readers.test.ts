import { JENKINS_JOB_FILE, readCiserver } from '../../core/imports/ciserver';
import { readCookbook } from '../../core/imports/cookbook';
import { readCrontab } from '../../core/imports/crontab';
import { jenkinsTimerCrons, quartzToCron } from '../../core/imports/job-schedules';
import { readJobsched } from '../../core/imports/jobsched';
import { bashScript, durationSeconds } from '../../core/imports/script';
import { readManifest } from '../../core/imports/manifest';
import { readProjrunner } from '../../core/imports/projrunner';
import { readTmplauto } from '../../core/imports/tmplauto';
import type { PlannedTemplate } from '../../core/imports/plan';
import { credentialInputs, indentedVars, varsOf } from '../../core/imports/values';

/** The import readers (core/imports/): an export's shape into a plan, faults named by field. */

const org = { name: 'Ops', type: 'organization' };
const jt = (name: string, extra: Record<string, unknown> = {}) => ({ name, playbook: `${name}.yml`, natural_key: { name, organization: org, type: 'job_template' }, ...extra });
const node = (identifier: string, ujt: unknown, related: Record<string, unknown> = {}) => ({ identifier, unified_job_template: ujt, related });
const edge = (identifier: string) => ({ identifier, type: 'workflow_job_template_node' });

test('an AWX workflow: success and always edges are dependencies, an approval failure edge its deny path, other failure edges dropped with a note', () => {
  const plan = readTmplauto({
    job_templates: [jt('build'), jt('ship'), jt('cleanup')],
    workflow_job_templates: [
      {
        name: 'flow',
        natural_key: { name: 'flow', organization: org, type: 'workflow_job_template' },
        related: {
          workflow_nodes: [
            node('n1', { name: 'build', organization: org, type: 'job_template' }, { success_nodes: [edge('n2')], failure_nodes: [edge('n4')] }),
            node('n2', { name: 'ok?', type: 'workflow_approval_template' }, { create_approval_template: { name: 'ok?', timeout: 60 }, success_nodes: [edge('n3')], failure_nodes: [edge('n4')] }),
            node('n3', { name: 'ship', organization: org, type: 'job_template' }, { always_nodes: [edge('n5')] }),
            node('n4', { name: 'cleanup', organization: org, type: 'job_template' }),
            node('n5', { name: 'build', organization: org, type: 'job_template' }),
          ],
        },
      },
    ],
  });
  const flow = plan.objects.find((o) => o.name === 'flow') as PlannedTemplate;
  expect(flow.draft.steps).toEqual([
    { name: 'build', type: 'run', depends_on: [], tool: 'ansible', playbook: 'build.yml' },
    { name: 'ok?', type: 'approval', depends_on: ['build'], approval_timeout: 60, if_denied: 'cleanup' },
    { name: 'ship', type: 'run', depends_on: ['ok?'], tool: 'ansible', playbook: 'ship.yml' },
    { name: 'cleanup', type: 'run', depends_on: [], tool: 'ansible', playbook: 'cleanup.yml' },
    { name: 'build (n5)', type: 'run', depends_on: ['ship'], tool: 'ansible', playbook: 'build.yml' },
  ]);
  expect(flow.notes.join('\n')).toMatch(/failure edge from build to cleanup is not carried/);
  expect(flow.notes.join('\n')).toMatch(/always edge from ship is carried as success only/);
});

test('an AWX workflow naming a job template the export lacks is left out; an edge to no node is a 400 naming it', () => {
  const missing = readTmplauto({ workflow_job_templates: [{ name: 'w', related: { workflow_nodes: [node('n1', { name: 'gone', organization: org, type: 'job_template' })] } }] });
  expect(missing.objects).toEqual([]);
  expect(missing.left_out[0]).toMatchObject({ kind: 'template', name: 'w', reason: expect.stringContaining('Ops/gone') });
  expect(() => readTmplauto({ job_templates: [jt('a')], workflow_job_templates: [{ name: 'w', related: { workflow_nodes: [node('n1', { name: 'a', organization: org, type: 'job_template' }, { success_nodes: [edge('n9')] })] } }] })).toThrow(
    expect.objectContaining({ details: expect.objectContaining({ field: 'workflow_job_templates[0].related.workflow_nodes[0].related.success_nodes' }) }),
  );
});

test('an AWX job template: its AWX id from id or url, references to objects not in the export dropped with a note, callbacks only when bound', () => {
  const plan = readTmplauto({
    job_templates: [
      jt('a', { url: '/api/v2/job_templates/31/', host_config_key: 'k', inventory: { name: 'nowhere', organization: org, type: 'inventory' } }),
      jt('b', { host_config_key: 'k' }),
    ],
  });
  const [a, b] = plan.objects as PlannedTemplate[];
  expect([a.external_job_template_id, a.draft.allow_callbacks, a.draft.external_callback, a.inventory]).toEqual(['31', true, true, null]);
  expect(a.notes.join('\n')).toContain('inventory Ops/nowhere is not in the export');
  expect([b.external_job_template_id, b.draft.allow_callbacks]).toEqual([null, false]);
  expect(b.notes.join('\n')).toContain('no AWX id');
});

test('a malformed export names the field; a document of no known shape says so', () => {
  expect(() => readTmplauto({ job_templates: [jt('a', { playbook: 7 })] })).toThrow(expect.objectContaining({ details: { field: 'job_templates[0].playbook' } }));
  expect(() => readTmplauto({ job_templates: {} })).toThrow(expect.objectContaining({ details: { field: 'job_templates' } }));
  expect(() => readTmplauto([])).toThrow(expect.objectContaining({ details: { field: 'body' } }));
  expect(() => readProjrunner({ meta: { name: 'p' } })).toThrow(expect.objectContaining({ details: { field: 'templates' } }));
  expect(() => readProjrunner({ meta: { name: 'p' }, templates: [{ name: 't', playbook: 'x', survey_vars: [{ name: 'v', type: 'date' }] }] })).toThrow(
    expect.objectContaining({ details: { field: 'templates[0].survey_vars[0].type' } }),
  );
});

test('a Semaphore backup: a key a repository uses is source control, others machine; a template cron and a schedule both become schedules', () => {
  const plan = readProjrunner({
    meta: { name: 'P' },
    keys: [{ name: 'git', type: 'ssh' }, { name: 'root', type: 'login_password' }],
    repositories: [{ name: 'r', git_url: 'https://git.example.net/r.git', ssh_key: 'git' }],
    inventories: [{ name: 'i', inventory: 'h1\n', type: 'static', ssh_key: 'root' }],
    templates: [{ name: 't', playbook: 'site.yml', inventory: 'i', repository: 'r', cron: '0 1 * * *' }],
    schedules: [{ cron_format: '0 2 * * *', template: 't', active: false }],
  });
  expect(plan.objects.map((o) => [o.kind, o.external_id])).toEqual([
    ['credential', 'P/git'],
    ['credential', 'P/root'],
    ['project', 'P/r'],
    ['inventory', 'P/i'],
    ['template', 'P/t'],
    ['schedule', 'P/t/0 1 * * *'],
    ['schedule', 'P/t/0 2 * * *'],
  ]);
  expect(plan.objects.filter((o) => o.kind === 'credential').map((o) => (o.draft as { kind: string }).kind)).toEqual(['scm', 'machine']);
  expect((plan.objects[4] as PlannedTemplate).credentials).toEqual([{ kind: 'credential', external_id: 'P/root' }]);
  expect(plan.objects.filter((o) => o.kind === 'schedule').map((o) => (o.draft as { enabled: boolean }).enabled)).toEqual([true, false]);
});

test('variables: JSON or flat YAML read, nested YAML not; inventory blocks indented; credential inputs never keep a secret', () => {
  expect(varsOf('---\na: 1\nb: "two"\nc: yes\nd: plain text')).toEqual({ a: 1, b: 'two', c: true, d: 'plain text' });
  expect(varsOf('{"a": {"b": 1}}')).toEqual({ a: { b: 1 } });
  expect(varsOf('a:\n  b: 1')).toBeUndefined();
  expect(varsOf('---')).toBeNull();
  expect(indentedVars('a: 1\nb: 2', '    ')).toBe('\n    a: 1\n    b: 2');
  expect(indentedVars('', '  ')).toBe(' {}');
  expect(credentialInputs('machine', { username: 'u', password: 'p', ssh_key_data: '$encrypted$', become_method: 'sudo', region: 'x' })).toEqual({
    inputs: { username: 'u', become_method: 'sudo' },
    dropped: ['region'],
    missing: null,
  });
});

test('a fleet: a Chef body without a node, a node named twice, a PuppetDB body without its nodes list, each a 400 naming the field', () => {
  expect(() => readCookbook({ roles: [{ name: 'r', chef_type: 'role' }] }, {})).toThrow(expect.objectContaining({ details: { field: 'body' } }));
  const node = { name: 'a', chef_type: 'node', run_list: [] };
  expect(() => readCookbook([node, node], {})).toThrow(expect.objectContaining({ details: { field: '[1].name' } }));
  expect(() => readCookbook({ nodes: [{ ...node, run_list: [7] }] }, {})).toThrow(expect.objectContaining({ details: { field: 'nodes[0].run_list[0]' } }));
  expect(() => readManifest({ facts: [] }, {})).toThrow(expect.objectContaining({ details: { field: 'nodes' } }));
  expect(() => readManifest([{ certname: 'x', deactivated: '2024-01-01T00:00:00Z' }], {})).toThrow(expect.objectContaining({ details: { field: 'nodes' } }));
});

test('a Chef fleet: a single node object is read alone; its inventory is named by the request or "Chef nodes"', () => {
  const plan = readCookbook({ name: 'solo', json_class: 'Chef::Node', chef_environment: 'dev', automatic: { ipaddress: '10.0.0.9' }, run_list: ['role[web]'] }, {});
  expect(plan.objects.map((o) => [o.kind, o.name, o.external_id])).toEqual([['inventory', 'Chef nodes', 'fleet/Chef nodes']]);
  const content = (plan.objects[0].draft as { content: string }).content;
  expect(content).toContain('"solo":\n      {"ansible_host":"10.0.0.9"');
  expect(content).toContain('"env_dev":');
  expect(content).toContain('"role_web":');
  expect(readManifest([{ certname: 'p1' }], { name: 'Puppet' }).objects[0].name).toBe('Puppet');
});

const rundeck = (text: string) => readJobsched({ archive: false, files: [{ path: 'body', text }] }, {});

test('Quartz expressions as cron: seconds dropped, Sunday-first day numbers shifted, start/step as a range, a year refused', () => {
  expect(quartzToCron('0 30 2 ? * MON-FRI *')).toEqual({ cron: '30 2 ? * MON-FRI', notes: [] });
  expect(quartzToCron('0 15 3 ? * 1,7 *')).toEqual({ cron: '15 3 ? * 0,6', notes: [] });
  expect(quartzToCron('0 0 9 ? * 2-6')).toEqual({ cron: '0 9 ? * 1-5', notes: [] });
  expect(quartzToCron('0 0/20 * ? * * *')).toEqual({ cron: '0-59/20 * ? * *', notes: [] });
  expect(quartzToCron('30 0 12 * * ? *')).toMatchObject({ cron: '0 12 * * ?', notes: [expect.stringContaining('seconds field 30')] });
  expect(quartzToCron('0 0 1 31 12 ? 2027')).toEqual({ problem: expect.stringContaining('year 2027') });
  expect(quartzToCron('0 0 1')).toEqual({ problem: expect.stringContaining('3 fields') });
  expect(quartzToCron('0 0 99 * * ?')).toEqual({ problem: expect.stringContaining('is not one Cairn reads') });
});

test('Jenkins timer specs: aliases, H hashed from the job name (stable), ranges and steps, TZ and comments', () => {
  const spec = '# nightly\nTZ=Europe/Paris\nH 2 * * 1-5\nH/15 * * * *\n@midnight\nH(0-29) H(8-17) * * *\n';
  const { timezone, crons } = jenkinsTimerCrons(spec, 'folder/job');
  expect(timezone).toBe('Europe/Paris');
  expect(crons).toHaveLength(4);
  const [nightly, quarter, midnight, office] = crons.map((c) => ('cron' in c ? c.cron.split(' ') : []));
  expect(Number(nightly[0])).toBeLessThan(60);
  expect(nightly.slice(1)).toEqual(['2', '*', '*', '1-5']);
  expect(quarter[0]).toMatch(/^\d+-59\/15$/);
  expect(Number(midnight[1])).toBeLessThanOrEqual(2);
  expect(Number(office[0])).toBeLessThan(30);
  expect(Number(office[1])).toBeGreaterThanOrEqual(8);
  expect(jenkinsTimerCrons(spec, 'folder/job')).toEqual({ timezone, crons });
  expect(jenkinsTimerCrons('* * *', 'j').crons[0]).toEqual({ problem: expect.stringContaining('3 fields') });
});

test('durations and the script a sequence becomes', () => {
  expect([durationSeconds('90'), durationSeconds('30m'), durationSeconds('1h30m'), durationSeconds('2d'), durationSeconds('${option.t}')]).toEqual([90, 1800, 5400, 172800, null]);
  const script = bashScript(['job'], [], [{ label: 'a', kind: 'script', text: 'echo hi\nCAIRN_STEP_1\n', args: 'x "y"', interpreter: 'sudo -u app', quoted: true }], false);
  // A script holding the heredoc's delimiter gets a longer one.
  expect(script).toContain("<<'CAIRN_STEP_1_'");
  expect(script).toContain('sudo -u app "\\"$cairn_step\\" x \\"y\\""');
});

test('Rundeck jobs: options to a survey, step tokens to Rundeck variables, a job reference or plugin step leaves the job out', () => {
  const plan = rundeck(`<joblist>
    <job><uuid>a</uuid><name>one</name><context><options>
      <option name="app.name" value="web" values="web,db" enforcedvalues="true" required="true"><description>which</description></option>
      <option name="pw" secure="true" value="x" storagePath="keys/db/password"/>
      <option name="upload" type="file"/>
      <option name="look" regex="(?=a)b"/>
    </options></context>
    <sequence><command><exec>deploy \${option.app.name} on \${node.name}</exec></command></sequence></job>
    <job><uuid>b</uuid><name>two</name><sequence><command><step-plugin type="export-var"/></command></sequence></job>
    <job><uuid>c</uuid><name>three</name><sequence><command><scriptfile>/opt/x.sh</scriptfile></command></sequence></job>
    <job><uuid>a</uuid><name>again</name><sequence><command><exec>true</exec></command></sequence></job>
  </joblist>`);
  const one = plan.objects[0] as PlannedTemplate;
  expect(one.draft.survey).toEqual([
    { var: 'app_name', type: 'choice', required: true, help: 'which', choices: ['web', 'db'], default: 'web' },
    { var: 'pw', type: 'secret', required: false },
    { var: 'look', type: 'text', required: false },
  ]);
  expect(one.draft.command).toContain('export RD_OPTION_APP_NAME="${app_name-}"');
  expect(one.draft.command).toContain('deploy ${RD_OPTION_APP_NAME} on ${node.name}');
  expect(one.notes.join('\n')).toMatch(/secure default is not carried[\s\S]*key storage \(keys\/db\/password\)[\s\S]*file option[\s\S]*regex uses Java syntax[\s\S]*\$\{node\.name\} are not set/);
  expect(plan.left_out.map((l) => [l.name, l.reason])).toEqual([
    ['two', expect.stringContaining('export-var plugin step')],
    ['three', expect.stringContaining('/opt/x.sh')],
    ['again', expect.stringContaining('appears twice')],
  ]);
});

test('Rundeck YAML: older option maps, the simple schedule form, and a malformed document named', () => {
  const plan = rundeck(`- name: j
  uuid: u
  options:
    level: { value: '3', required: true }
  schedule: { time: { hour: '4', minute: '5' }, weekday: { day: '*' }, month: '*' }
  sequence: { commands: [ { exec: 'echo $RD_OPTION_LEVEL' } ] }
`);
  expect((plan.objects[0] as PlannedTemplate).draft.survey).toEqual([{ var: 'level', type: 'text', required: true, default: '3' }]);
  expect(plan.objects[1]).toMatchObject({ kind: 'schedule', draft: { cron: '5 4 ? * *' } });
  expect(() => rundeck('- [1, 2]')).toThrow(expect.objectContaining({ details: { field: '[0]' } }));
  expect(() => rundeck('a: [')).toThrow(expect.objectContaining({ details: { field: 'body' } }));
  expect(() => readJobsched({ archive: true, files: [{ path: 'x.txt', text: '' }] }, {})).toThrow(/not a Rundeck project archive/);
});

const jenkins = (text: string, name = 'job') => readCiserver({ archive: false, files: [{ path: 'body', text }] }, { name });

test('Jenkins jobs: the job files of a jobs directory, parameters to a survey, older choice lists, a builder other than shell leaves the job out', () => {
  const names = ['jobs/a/config.xml', 'home/jobs/f/jobs/b/config.xml', 'jobs/a/builds/1/config.xml', 'jobs/a/branches/main/config.xml', 'config.xml'].map((p) => JENKINS_JOB_FILE.exec(p)?.[1] ?? null);
  expect(names).toEqual(['a', 'f/jobs/b', null, null, null]);
  const plan = jenkins(`<project><properties><hudson.model.ParametersDefinitionProperty><parameterDefinitions>
    <hudson.model.ChoiceParameterDefinition><name>ENV</name><choices>dev
prod</choices></hudson.model.ChoiceParameterDefinition>
    <hudson.model.StringParameterDefinition><name>my-param</name></hudson.model.StringParameterDefinition>
    <hudson.model.TextParameterDefinition><name>NOTES</name><defaultValue>a
b</defaultValue></hudson.model.TextParameterDefinition>
  </parameterDefinitions></hudson.model.ParametersDefinitionProperty></properties>
  <disabled>true</disabled>
  <triggers><hudson.triggers.TimerTrigger><spec>@hourly</spec></hudson.triggers.TimerTrigger></triggers>
  <builders><hudson.tasks.Shell><command>echo $ENV</command></hudson.tasks.Shell></builders></project>`);
  const template = plan.objects[0] as PlannedTemplate;
  expect(template.draft.survey).toEqual([
    { var: 'ENV', type: 'choice', required: false, choices: ['dev', 'prod'], default: 'dev' },
    { var: 'NOTES', type: 'multiline', required: false, default: 'a\nb' },
  ]);
  expect(template.notes.join('\n')).toMatch(/my-param is not a shell variable name[\s\S]*disabled in Jenkins/);
  expect(plan.objects[1]).toMatchObject({ kind: 'schedule', draft: { enabled: false } });
  expect(jenkins('<project><builders><hudson.tasks.Maven/></builders></project>').left_out[0].reason).toContain('hudson.tasks.Maven');
  expect(jenkins('<matrix-project/>').left_out[0].reason).toContain('matrix');
  expect(() => jenkins('<project>')).toThrow(expect.objectContaining({ details: { field: 'body' } }));
});

test('a crontab: environment lines apply to the jobs below them, % is input (\\% a percent), nicknames expand, @reboot and bad lines are refused', () => {
  const { jobs, refused } = readCrontab(['A=1', '0 1 * * * echo $A', "B = 'two words'", 'CRON_TZ=Asia/Tokyo', '@hourly printf 50\\%%x%y', '@reboot boot', '@often x', '1 2 3'].join('\n'));
  expect(jobs.map((j) => [j.line, j.cron, j.timezone])).toEqual([[2, '0 1 * * *', null], [5, '0 * * * *', 'Asia/Tokyo']]);
  expect(jobs[0].script).toContain("export A='1'\nexec /bin/sh -c 'echo $A'");
  expect(jobs[0].script).not.toContain('export B');
  expect(jobs[1].script).toContain("export B='two words'");
  expect(jobs[1].script).toContain("exec /bin/sh -c 'printf 50%' <<'CAIRN_CRON_INPUT'\nx\ny\nCAIRN_CRON_INPUT");
  expect(refused.map((r) => [r.line, r.reason])).toEqual([
    [6, expect.stringContaining('@reboot')],
    [7, '@often is not a cron nickname'],
    [8, expect.stringContaining('five time fields')],
  ]);
  // The system format: a user before the command; a line with no command is refused.
  const system = readCrontab('* * * * * root\n5 * * * * backup echo hi', { system: true });
  expect(system.refused[0]).toMatchObject({ line: 1, reason: expect.stringContaining('names a user') });
  expect(system.jobs[0]).toMatchObject({ user: 'backup', command: 'echo hi', notes: [expect.stringContaining('ran as backup')] });
  // A long command is cut so the name (and the schedule's, which adds the cron) fits 255 bytes.
  const long = readCrontab(`0 1 * * * echo ${'é'.repeat(400)}`).jobs[0].name;
  expect(Buffer.byteLength(long)).toBeLessThanOrEqual(200);
  expect(long).toMatch(/^cron: echo é+… \([0-9a-f]{8}\)$/);
  // The same line gives the same name, so a re-import finds it.
  expect(readCrontab('0 1 * * * echo $A').jobs[0].name).toBe(readCrontab('# x\n0 1 * * * echo $A').jobs[0].name);
});

test('XML exports: entities a DTD declares are never expanded (no billion laughs, no external entity)', () => {
  const laughs = '<?xml version="1.0"?><!DOCTYPE j [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><joblist><job><name>&b;</name></job></joblist>';
  expect(() => rundeck(laughs)).toThrow(/not well-formed XML: entity not found/);
  const external = '<?xml version="1.0"?><!DOCTYPE j [<!ENTITY x SYSTEM "file:///etc/passwd">]><project><builders/></project>';
  expect(() => jenkins(external.replace('<builders/>', '<description>&x;</description>'))).toThrow(/not well-formed XML/);
});
