import { createHash } from 'node:crypto';
import { cronProblem } from './job-schedules';

/**
 * A crontab (spec part A 4.14 rule 6: imported only from the command line, `cairn import cron`)
 * as templates and schedules: each job line a bash template running its command as cron would
 * (`/bin/sh -c`, with the environment lines above it and its `%` input), and a schedule firing
 * it in the server's zone (or the zone a `CRON_TZ=` line names).
 *
 * - The user format (`min hour dom month dow command`, as `crontab -l` prints) or, with `system`,
 *   the system format of /etc/crontab and /etc/cron.d (a user field before the command).
 * - Every field form crontab(5) has: `*`, numbers, ranges, lists, steps (`*\/15`, `1-30/5`),
 *   month and day names (`jan`, `mon-fri`), day 7 as Sunday, and the nicknames `@yearly`,
 *   `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight` and `@hourly`.
 * - `@reboot` is refused with its reason (Cairn has no boot to fire at), as is a line Cairn's
 *   calendar cannot read; neither stops the others.
 * - Environment lines (`NAME=value`, `NAME = "value"`) are kept: each job gets those above it.
 *   `CRON_TZ` (or `TZ`) sets the zone of the schedules below it; `MAILTO` is noted (its mail is not
 *   sent: attach a notification target); `SHELL` runs the command with that shell.
 *
 * A template's name is `cron: <command>` (cut to fit) with a digest of its line, so importing the
 * same crontab again finds the templates it made.
 */

export interface CrontabJob {
  line: number;
  /** The template's name, and its key for a re-import. */
  name: string;
  cron: string;
  timezone: string | null;
  user: string | null;
  command: string;
  /** The bash script the template runs. */
  script: string;
  notes: string[];
}

export interface CrontabRefusal {
  line: number;
  text: string;
  reason: string;
}

const NICKNAMES: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

const ENV_LINE = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/;
const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

/** An environment line's value, its quotes (single or double, as cron takes them) removed. */
function envValue(raw: string): string {
  const value = raw.trim();
  return /^(["']).*\1$/.test(value) && value.length >= 2 ? value.slice(1, -1) : value;
}

/** The command and its standard input: an unescaped `%` ends the command, the rest (each `%` a newline) is its input. */
function splitPercent(text: string): { command: string; input: string | null } {
  let command = '';
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\\' && text[i + 1] === '%') {
      command += '%';
      i++;
    } else if (text[i] === '%') {
      return { command, input: text.slice(i + 1).replace(/\\%/g, '\u0000').replace(/%/g, '\n').replace(/\u0000/g, '%') };
    } else command += text[i];
  }
  return { command, input: null };
}

export function readCrontab(text: string, options: { system?: boolean } = {}): { jobs: CrontabJob[]; refused: CrontabRefusal[] } {
  const jobs: CrontabJob[] = [];
  const refused: CrontabRefusal[] = [];
  const env: [string, string][] = [];
  let timezone: string | null = null;
  let shell = '/bin/sh';
  let mailto: string | null = null;
  const names = new Set<string>();
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    const trimmed = raw.replace(/\r$/, '').trim();
    if (trimmed === '' || trimmed.startsWith('#')) return;
    const assignment = ENV_LINE.exec(trimmed);
    // A job line starts with its minute field or a nickname, never with a name and `=`.
    if (assignment) {
      const [, name, value] = assignment;
      const unquoted = envValue(value);
      if (name === 'CRON_TZ' || name === 'TZ') timezone = unquoted || null;
      if (name === 'SHELL') shell = unquoted || '/bin/sh';
      if (name === 'MAILTO') mailto = unquoted;
      if (name !== 'CRON_TZ') env.push([name, unquoted]);
      return;
    }
    let cron: string;
    let rest: string;
    if (trimmed.startsWith('@')) {
      const [nickname] = trimmed.split(/\s+/, 1);
      rest = trimmed.slice(nickname.length).trim();
      if (nickname.toLowerCase() === '@reboot') {
        return void refused.push({ line, text: trimmed, reason: '@reboot runs when the cron daemon starts; Cairn has no boot to fire at: run it from the host\'s own init system' });
      }
      const expanded = NICKNAMES[nickname.toLowerCase()];
      if (!expanded) return void refused.push({ line, text: trimmed, reason: `${nickname} is not a cron nickname` });
      cron = expanded;
    } else {
      const fields = trimmed.split(/\s+/);
      if (fields.length < 6) return void refused.push({ line, text: trimmed, reason: 'a job line has five time fields and a command' });
      cron = fields.slice(0, 5).join(' ');
      rest = trimmed.replace(/^(\S+\s+){5}/, '');
    }
    let user: string | null = null;
    if (options.system) {
      const match = /^(\S+)\s+(.*)$/.exec(rest);
      if (!match) return void refused.push({ line, text: trimmed, reason: 'a system crontab line names a user before its command' });
      [, user, rest] = match;
    }
    if (!rest) return void refused.push({ line, text: trimmed, reason: 'it has no command' });
    const problem = cronProblem(cron);
    if (problem) return void refused.push({ line, text: trimmed, reason: problem });

    const { command, input } = splitPercent(rest);
    const notes: string[] = [];
    if (user && user !== 'root') notes.push(`it ran as ${user}; the template runs as the run account`);
    if (mailto !== null && mailto !== '') notes.push(`its output was mailed to ${mailto}; attach a notification target to the template instead`);
    const digest = createHash('sha256').update(`${user ?? ''}\n${cron}\n${rest}`).digest('hex').slice(0, 8);
    // Names are at most 255 bytes, with room for the schedule's `, <cron>` after them.
    let label = command.replace(/\s+/g, ' ').trim();
    const room = 200 - Buffer.byteLength(` (${digest})`) - Buffer.byteLength('cron: ');
    if (Buffer.byteLength(label) > room) {
      while (Buffer.byteLength(`${label}…`) > room) label = [...label].slice(0, -1).join('');
      label = `${label}…`;
    }
    let name = `cron: ${label} (${digest})`;
    while (names.has(name)) name = `${name}'`;
    names.add(name);
    let delimiter = 'CAIRN_CRON_INPUT';
    while (input !== null && input.split('\n').includes(delimiter)) delimiter += '_';
    const script = [
      '#!/usr/bin/env bash',
      `# crontab line ${line}, imported by Cairn:`,
      `# ${trimmed.replace(/\n/g, ' ')}`,
      ...env.map(([k, v]) => `export ${k}=${shellQuote(v)}`),
      input === null
        ? `exec ${shell} -c ${shellQuote(command)}`
        : `exec ${shell} -c ${shellQuote(command)} <<'${delimiter}'\n${input}\n${delimiter}`,
    ].join('\n') + '\n';
    jobs.push({ line, name, cron, timezone, user, command, script, notes });
  });
  return { jobs, refused };
}
