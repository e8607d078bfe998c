import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { person } from '../support/access';
import { runImportCommand } from '../../cli/import';
import { ConfigError } from '../../core/config';
import { serverZone } from '../../services/schedules/schedules';
import { startTestServer, waitForRunEnd, type TestServer } from '../support/server';

/**
 * `cairn import` (spec part A 1.3 rule 8, 4.14 rule 6): the command line as a client of a running
 * server. An export previewed and applied through `POST /v1/import/{format}`; a crontab of every
 * field form read by the command, previewed, applied as templates and schedules in the server's
 * zone (or CRON_TZ's), run, and imported again without creating anything twice.
 */

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..');
const FIXTURES = path.join(__dirname, '../fixtures/imports');
let t: TestServer;

/** Runs the command in this process, with its output and exit code. */
async function inProcess(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  // The jest worker's exit code may already be set by a file it ran earlier: start from none.
  const before = process.exitCode;
  process.exitCode = undefined;
  try {
    await runImportCommand(args, env, (line) => lines.push(line));
    return { code: Number(process.exitCode ?? 0), out: lines.join('\n') };
  } finally {
    process.exitCode = before;
  }
}

/** Runs `cairn import …` as a separate process against the test server; never throws. */
async function cairn(args: string[], token: string | null = t.adminToken): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [path.join(ROOT, 'bin/cairn.js'), 'import', ...args], {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...(token ? { CAIRN_TOKEN: token } : {}), CAIRN_SERVER: t.url },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

beforeAll(async () => {
  t = await startTestServer();
}, 60_000);
afterAll(() => t?.stop());

test('an export: previewed, then applied; usage faults exit 2 naming the fault; a refusal exits 1 with the server\'s error', async () => {
  const env = { CAIRN_TOKEN: t.adminToken, CAIRN_SERVER: t.url };
  const preview = await inProcess(['jobsched', path.join(FIXTURES, 'rundeck-jobs.yaml')], env);
  expect(preview.code).toBe(0);
  expect(preview.out).toContain('preview of');
  expect(preview.out).toContain('would create template "app/Restart service"');
  expect(preview.out).toContain('skipped template "Nightly report": step 2 fetches its script');
  // Applied by the command as its own process.
  const applied = await cairn(['jobsched', path.join(FIXTURES, 'rundeck-jobs.yaml'), '--apply']);
  expect(applied.stdout).toMatch(/created template "app\/Restart service" tpl_/);
  expect(applied.stdout).toContain('2 created, 1 skipped');

  // Usage faults are ConfigErrors (exit 2); a server's refusal sets exit code 1 and prints its error.
  await expect(runImportCommand(['jobsched', path.join(FIXTURES, 'rundeck-jobs.yaml')], { CAIRN_SERVER: t.url }, () => {})).rejects.toThrow(/set CAIRN_TOKEN/);
  await expect(runImportCommand(['jobsched'], env, () => {})).rejects.toThrow(ConfigError);
  await expect(runImportCommand(['jobsched', '/nonexistent/file'], env, () => {})).rejects.toThrow(/cannot read \/nonexistent\/file/);
  await expect(runImportCommand(['jobsched', 'f', '--bogus'], env, () => {})).rejects.toThrow(/unknown flag --bogus/);
  const viewer = await person(t.api, 'viewer');
  expect(await inProcess(['ciserver', path.join(FIXTURES, 'jenkins-freestyle.xml'), '--name', 'x'], { ...env, CAIRN_TOKEN: viewer.token })).toEqual({ code: 1, out: expect.stringContaining('refused (403)') });
  expect(await inProcess(['ciserver', path.join(FIXTURES, 'jenkins-freestyle.xml')], env)).toEqual({ code: 1, out: expect.stringContaining('[field name]') });
}, 120_000);

test('cron: every field form previewed first, @reboot and a bad line refused with reasons, applied in the server\'s zone or CRON_TZ\'s, run, and not imported twice', async () => {
  const file = path.join(FIXTURES, 'crontab');
  const env = { CAIRN_TOKEN: t.adminToken, CAIRN_SERVER: t.url };
  const preview = await inProcess(['cron', file], env);
  expect(preview.code).toBe(0);
  const previewed = { stdout: preview.out };
  expect(previewed.stdout).toContain('nothing written');
  expect(previewed.stdout).toContain('line 14: refused: @reboot runs when the cron daemon starts');
  expect(previewed.stdout).toContain('line 17: refused: cron "61 * * * *" is not one Cairn reads');
  expect(previewed.stdout).toContain('8 to create, 0 imported before, 2 refused');
  expect(previewed.stdout).toContain('note: its output was mailed to ops@example.com');
  expect((await t.api.get('/v1/templates?limit=1000')).body.templates.filter((x: any) => x.name.startsWith('cron: '))).toEqual([]);

  const applied = await cairn(['cron', file, '--apply']);
  expect(applied.code).toBe(0);
  expect(applied.stdout).toContain('8 created');
  const templates = (await t.api.get('/v1/templates?limit=1000')).body.templates.filter((x: any) => x.name.startsWith('cron: '));
  expect(templates).toHaveLength(8);
  const schedules = (await t.api.get('/v1/schedules?limit=1000')).body.schedules.filter((s: any) => s.name.startsWith('cron: '));
  expect(schedules.map((s: any) => s.cron).sort()).toEqual(['*/15 * * * *', '0 0 * * *', '0 2 * * mon-fri', '0 22 * * *', '0 8 * * *', '0-30/10 9-17 * * 1-5', '30 4 1,15 jan,jul *', '5 0 * * 7'].sort());
  const zoneOf = (cron: string) => schedules.find((s: any) => s.cron === cron).timezone;
  expect(zoneOf('0 8 * * *')).toBe('America/New_York');
  expect(zoneOf('0 0 * * *')).toBe(serverZone());

  // A job runs as cron ran it: its environment lines, its shell, its % input.
  const byCommand = (text: string) => templates.find((x: any) => x.name.includes(text));
  for (const [name, expected] of [['GREETING', 'hello from cron every quarter hour'], ['cat', 'first line\nsecond line']] as const) {
    const launch = await t.api.post(`/v1/templates/${byCommand(name).id}/launch`, {});
    expect((await waitForRunEnd(t.api, launch.body.id)).status).toBe('succeeded');
    expect((await t.api.get(`/v1/runs/${launch.body.id}/logs`)).text).toBe(`${expected}\n`);
  }

  const again = await inProcess(['cron', file, '--apply'], env);
  expect(again.out).toContain('0 to create, 8 imported before, 2 refused');
  expect(again.out).toContain('0 created');

  const system = await inProcess(['cron', path.join(FIXTURES, 'crontab-system'), '--system'], env);
  expect(system.out).toContain('"cron: echo nightly backup (');
  expect(system.out).toContain('note: it ran as backup; the template runs as the run account');
  await expect(runImportCommand(['cron', file, '--name', 'x'], env, () => {})).rejects.toThrow(/cron takes neither --name nor --inventory/);
}, 120_000);
