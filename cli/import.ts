import { readFileSync } from 'node:fs';
import { ConfigError } from '../core/config';
import { readCrontab } from '../core/imports/crontab';

const USAGE = `usage: cairn import <format> <file> [--apply] [--name NAME] [--inventory ID] [--server URL]
       cairn import cron <crontab> [--system] [--apply] [--server URL]
formats: tmplauto, projrunner, cookbook, manifest, jobsched, ciserver; cron (a crontab, read here)
the token is read from CAIRN_TOKEN; the server from --server or CAIRN_SERVER (default http://127.0.0.1:8080)`;

type Out = (line: string) => void;

interface Options {
  format: string;
  file: string;
  apply: boolean;
  system: boolean;
  name?: string;
  inventory?: string;
  server: string;
}

function parse(args: string[], env: NodeJS.ProcessEnv): Options {
  const positional: string[] = [];
  const options: Partial<Options> = { apply: false, system: false };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const value = () => {
      const next = args[++i];
      if (next === undefined) throw new ConfigError(`${arg} needs a value\n${USAGE}`);
      return next;
    };
    if (arg === '--apply') options.apply = true;
    else if (arg === '--system') options.system = true;
    else if (arg === '--name') options.name = value();
    else if (arg === '--inventory') options.inventory = value();
    else if (arg === '--server') options.server = value();
    else if (arg.startsWith('--')) throw new ConfigError(`unknown flag ${arg}\n${USAGE}`);
    else positional.push(arg);
  }
  if (positional.length !== 2) throw new ConfigError(`name a format and one file\n${USAGE}`);
  const [format, file] = positional;
  if (format !== 'cron' && options.system) throw new ConfigError(`--system is for cron: it reads a system crontab (a user field before each command)\n${USAGE}`);
  if (format === 'cron' && (options.name !== undefined || options.inventory !== undefined)) throw new ConfigError(`cron takes neither --name nor --inventory\n${USAGE}`);
  return { ...(options as Options), format, file, server: (options.server ?? env.CAIRN_SERVER ?? 'http://127.0.0.1:8080').replace(/\/+$/, '') };
}

/**
 * `cairn import`: an import from the command line, as a client of a running server with an
 * admin's token (CAIRN_TOKEN, never a flag, so it stays out of the process list).
 *
 * `cairn import <format> <file>` sends the file's bytes to `POST /v1/import/{format}` (spec part A
 * 4.14): a preview unless `--apply`, printed as what is (or would be) created, its notes, and what
 * is skipped and why.
 *
 * `cairn import cron <crontab>` (rule 6: a crontab imports only from here) reads the crontab
 * itself (core/imports/crontab.ts) and always previews first: each job line a template and its
 * schedule, in the server's zone unless CRON_TZ names one, and each refused line with its reason.
 * With `--apply` it then creates them through `POST /v1/templates` and `POST /v1/schedules`, each
 * with its own chain entry; a template of the same name (a line imported before) is skipped with
 * its schedule, so running it again creates nothing twice. Exit 0 when done, 1 when the server
 * refused something (its error printed), 2 for a usage fault.
 */
export async function runImportCommand(args: string[], env: NodeJS.ProcessEnv = process.env, out: Out = (line) => process.stdout.write(`${line}\n`)): Promise<void> {
  const options = parse(args, env);
  const token = env.CAIRN_TOKEN;
  if (!token) throw new ConfigError(`set CAIRN_TOKEN to an admin's API token\n${USAGE}`);
  let bytes: Buffer;
  try {
    bytes = readFileSync(options.file);
  } catch (err) {
    throw new ConfigError(`cannot read ${options.file}: ${(err as Error).message}`);
  }
  const api = async (method: string, path: string, body?: Buffer | string) => {
    let res: Response;
    try {
      res = await fetch(`${options.server}${path}`, { method, headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': typeof body === 'string' ? 'application/json' : 'application/octet-stream' } : {}) }, body: body as BodyInit | undefined });
    } catch (err) {
      throw new ConfigError(`cannot reach ${options.server}: ${(err as Error).message}`);
    }
    const text = await res.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, json, text };
  };
  if (options.format === 'cron') return importCron(options, bytes, api, out);

  const query = new URLSearchParams();
  if (options.apply) query.set('apply', 'true');
  if (options.name !== undefined) query.set('name', options.name);
  if (options.inventory !== undefined) query.set('inventory', options.inventory);
  const res = await api('POST', `/v1/import/${encodeURIComponent(options.format)}${query.size ? `?${query}` : ''}`, bytes);
  if (res.status !== 200 && res.status !== 201) return refusedBy(res, out);
  const report = res.json as { applied: boolean; created: { kind: string; name: string; id?: string; notes: string[] }[]; skipped: { kind: string; name: string; reason: string }[] };
  out(report.applied ? `imported from ${options.file}:` : `preview of ${options.file} (nothing written; --apply writes it):`);
  for (const o of report.created) {
    out(`  ${report.applied ? 'created' : 'would create'} ${o.kind} ${JSON.stringify(o.name)}${o.id ? ` ${o.id}` : ''}`);
    for (const note of o.notes) out(`    note: ${note}`);
  }
  for (const s of report.skipped) out(`  skipped ${s.kind} ${JSON.stringify(s.name)}: ${s.reason}`);
  out(`${report.created.length} ${report.applied ? 'created' : 'to create'}, ${report.skipped.length} skipped`);
}

type Api = (method: string, path: string, body?: Buffer | string) => Promise<{ status: number; json: any; text: string }>;

function refusedBy(res: { status: number; json: any; text: string }, out: Out): void {
  out(`refused (${res.status}): ${res.json?.error ?? res.text}${res.json?.field ? ` [field ${res.json.field}]` : ''}`);
  process.exitCode = 1;
}

async function importCron(options: Options, bytes: Buffer, api: Api, out: Out): Promise<void> {
  const text = bytes.toString('utf8');
  if (text.includes('\0') || !Buffer.from(text, 'utf8').equals(bytes)) throw new ConfigError(`${options.file} holds NUL or bytes that are not UTF-8: it is not a crontab`);
  const { jobs, refused } = readCrontab(text, { system: options.system });
  // Names taken already: a template this command made from the same line before.
  const taken = new Set<string>();
  for (let offset = 0; ; offset += 1000) {
    const page = await api('GET', `/v1/templates?limit=1000&offset=${offset}`);
    if (page.status !== 200) return refusedBy(page, out);
    for (const t of page.json.templates as { name: string }[]) taken.add(t.name);
    if (!page.json.has_more) break;
  }
  out(`preview of ${options.file}${options.apply ? '' : ' (nothing written; --apply writes it)'}:`);
  const fresh = jobs.filter((job) => !taken.has(job.name));
  for (const job of jobs) {
    const zone = job.timezone ? ` in ${job.timezone}` : " in the server's zone";
    out(`  line ${job.line}: ${taken.has(job.name) ? 'skip, imported before:' : 'template'} ${JSON.stringify(job.name)}, schedule ${JSON.stringify(job.cron)}${zone}`);
    for (const note of job.notes) out(`    note: ${note}`);
  }
  for (const r of refused) out(`  line ${r.line}: refused: ${r.reason}`);
  out(`${fresh.length} to create, ${jobs.length - fresh.length} imported before, ${refused.length} refused`);
  if (!options.apply) return;

  out('applying:');
  let created = 0;
  for (const job of fresh) {
    const template = await api('POST', '/v1/templates', JSON.stringify({ name: job.name, tool: 'bash', command: job.script }));
    if (template.status !== 201) return refusedBy(template, out);
    const schedule = await api('POST', '/v1/schedules', JSON.stringify({ name: `${job.name}, ${job.cron}`, template_id: template.json.id, cron: job.cron, ...(job.timezone ? { timezone: job.timezone } : {}), enabled: true }));
    if (schedule.status !== 201) return refusedBy(schedule, out);
    created++;
    out(`  line ${job.line}: created template ${template.json.id}, schedule ${schedule.json.id}`);
  }
  out(`${created} created`);
}
