import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';
import { tempDir } from '../support/temp';
import { zipOf } from '../support/zip';

/**
 * The `ciserver` import (spec part A 4.14 rules 2, 3 and 5): a Jenkins job's config.xml and a zip
 * of a Jenkins jobs directory (test/fixtures/imports/jenkins-*.xml, in the form Jenkins writes
 * config.xml: a freestyle job, a Pipeline job, a folder), told apart by content; previewed,
 * applied, re-imported, and an imported job launched and run by the bash tool.
 */

let t: TestServer;
/** A local repository standing in for the one the Jenkins job checks out: the test machine has no network. */
let repository: string;
/** A fixture, its repository address pointed at the local repository (the only change made to it). */
const jenkinsJob = () => fixtureText('jenkins-freestyle.xml').replace('https://github.com/example/site.git', repository);
const fixtureText = (name: string) => readFileSync(path.join(__dirname, '../fixtures/imports', name), 'utf8');
const send = (query: string, body: string | Buffer) => t.api.request('POST', `/v1/import/ciserver${query}`, { rawBody: body, headers: { 'content-type': 'application/octet-stream' } });

beforeAll(async () => {
  const root = tempDir('cairn-import-jenkins-git');
  chmodSync(root, 0o755);
  repository = path.join(root, 'site.git');
  const work = path.join(root, 'work');
  const env = { PATH: process.env.PATH, HOME: root, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@e', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@e' };
  execFileSync('git', ['init', '-q', '--bare', '-b', 'main', repository]);
  mkdirSync(work);
  const git = (...args: string[]) => execFileSync('git', args, { cwd: work, env });
  git('init', '-q', '-b', 'main');
  writeFileSync(path.join(work, 'VERSION'), '2.1-src\n');
  git('add', '-A');
  git('commit', '-q', '-m', 'version');
  git('push', '-q', repository, 'HEAD:main');
  t = await startTestServer({ CAIRN_PROJECT_LOCAL_ROOTS: root, SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'), SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url') });
}, 60_000);
afterAll(() => t?.stop());

function answered(res: { status: number; text: string }, status: number): void {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${res.text}`);
}

test('a freestyle config.xml: named by the request; shell steps, parameters and timer triggers carried, polling left out; a launch runs the steps in order and stops at a failure', async () => {
  const unnamed = await send('', jenkinsJob());
  expect([unnamed.status, unnamed.body.field]).toEqual([400, 'name']);

  const preview = await send('?name=site/build', jenkinsJob());
  answered(preview, 200);
  expect(preview.body.created.map((o: any) => `${o.kind}:${o.name}`)).toEqual([`project:${repository.replace(/\.git$/, '')} (main)`, 'notification_target:email web@example.com', 'template:site/build', expect.stringMatching(/^schedule:site\/build, \d+ 2 \* \* 1-5$/), expect.stringMatching(/^schedule:site\/build, /)]);
  expect(preview.body.skipped).toEqual([expect.objectContaining({ name: 'site/build, hudson.triggers.SCMTrigger', reason: expect.stringContaining('source polling is not carried') })]);

  const applied = await send('?name=site/build&apply=true', jenkinsJob());
  answered(applied, 201);
  const created = applied.body.created[2];
  expect(created.notes.join('\n')).toMatch(/bundle\.zip[\s\S]*BUILD_NUMBER[\s\S]*git checkout is the project for [\s\S]*email target told of failures/);
  // The mailer's recipients: an email target attached for failures.
  expect(created.attachments).toEqual([{ target_id: applied.body.created[1].id, event: 'failure' }]);
  // The git checkout: a project the template runs in a copy of, updated before the launch.
  const projectId = applied.body.created[0].id;
  expect((await t.api.get(`/v1/projects/${projectId}`)).body).toMatchObject({ url: repository, branch: 'main' });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const project = (await t.api.get(`/v1/projects/${projectId}`)).body;
    if (project.status === 'successful' && !project.update_pending) break;
    if (project.status === 'failed' || Date.now() > deadline) throw new Error(`project did not update: ${JSON.stringify(project)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const template = (await t.api.get(`/v1/templates/${created.id}`)).body;
  expect(template).toMatchObject({ name: 'site/build', tool: 'bash', timeout: 2700, project_id: projectId });
  expect(template.survey.map((f: any) => [f.var, f.type, f.default])).toEqual([
    ['RELEASE', 'text', '1.0'],
    ['TARGET', 'choice', 'staging'],
    ['DRY_RUN', 'bool', true],
    ['PUBLISH_TOKEN', 'secret', undefined],
  ]);
  const schedules = (await t.api.get('/v1/schedules?limit=200')).body.schedules.filter((s: any) => s.template_id === created.id);
  expect(schedules.map((s: any) => s.timezone)).toEqual(['Europe/Berlin', 'Europe/Berlin']);
  expect(schedules[0].cron).toMatch(/^\d+ 2 \* \* 1-5$/);

  const launch = await t.api.post(`/v1/templates/${created.id}/launch`, { answers: { RELEASE: '2.1', TARGET: 'production', PUBLISH_TOKEN: 'tok' } });
  answered(launch, 201);
  const run = await waitForRunEnd(t.api, launch.body.id);
  const log = (await t.api.get(`/v1/runs/${launch.body.id}/logs`)).text;
  expect(run.status).toBe('failed');
  expect(log).toContain('building 2.1 for production (dry run: true) in site/build');
  expect(log).toContain('source at 2.1-src');
  expect(log).toContain('publishing build ? from');
  expect(log).toContain('step 2 failed with exit code 4');
  expect(log).not.toContain('never reached');

  const again = await send('?name=site/build&apply=true', jenkinsJob());
  answered(again, 200);
  expect(again.body.created).toEqual([]);
}, 60_000);

test('a zip of a jobs directory: nested folders name their jobs, a Pipeline job and a folder left out with the reason', async () => {
  const shell = (command: string) => `<?xml version='1.1' encoding='UTF-8'?><project><builders><hudson.tasks.Shell><command>${command}</command></hudson.tasks.Shell></builders></project>`;
  const archive = zipOf([
    { name: 'jobs/platform/config.xml', data: fixtureText('jenkins-folder.xml') },
    { name: 'jobs/platform/jobs/lint/config.xml', data: shell('echo lint') },
    { name: 'jobs/platform/jobs/tools/jobs/rebuild/config.xml', data: shell('echo rebuild') },
    { name: 'jobs/platform/jobs/lint/builds/1/build.xml', data: '<build/>' },
    { name: 'jobs/pipeline/config.xml', data: fixtureText('jenkins-pipeline.xml') },
    { name: 'jobs/windows/config.xml', data: "<project><builders><hudson.tasks.BatchFile><command>dir</command></hudson.tasks.BatchFile></builders></project>" },
  ]);
  const named = await send('?name=x', archive);
  expect([named.status, named.body.field]).toEqual([400, 'name']);
  const applied = await send('?apply=true', archive);
  answered(applied, 201);
  expect(applied.body.created.map((o: any) => o.name)).toEqual(['platform/lint', 'platform/tools/rebuild']);
  const reasons = Object.fromEntries(applied.body.skipped.map((s: any) => [s.name, s.reason]));
  expect(reasons.platform).toContain('a folder is not an object in Cairn');
  expect(reasons.pipeline).toContain('a Pipeline job');
  expect(reasons.windows).toContain('hudson.tasks.BatchFile');
  const rebuild = await t.api.post(`/v1/templates/${applied.body.created[1].id}/launch`, {});
  expect((await waitForRunEnd(t.api, rebuild.body.id)).status).toBe('succeeded');
  expect((await t.api.get(`/v1/runs/${rebuild.body.id}/logs`)).text).toContain('rebuild');

  const notJenkins = await send('', zipOf([{ name: 'config.xml', data: '<project/>' }]));
  expect(notJenkins.body.error).toContain('not a Jenkins jobs directory');
  const traversal = await send('', zipOf([{ name: 'jobs/../../config.xml', data: '<project/>' }]));
  expect([traversal.status, traversal.body.field]).toEqual([400, 'body']);
  // NUL (a character reference XML lets through) is refused naming the object and the field.
  const nul = await send('?name=n', shell('echo a&#0;b'));
  expect([nul.status, nul.body.field]).toEqual([400, 'config.xml.command']);
  expect(nul.body.error).toContain('template "n" holds NUL');
}, 60_000);
