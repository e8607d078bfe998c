import { CalendarError, scheduleCalendar } from '../schedules/schedule-calendar';

/**
 * The schedules of the `jobsched` and `ciserver` formats as Cairn's five-field cron (spec part A
 * 2.6): Rundeck's Quartz expressions and Jenkins's timer specs. A rule Cairn's calendar does not
 * read is given back with the reason, so the reader leaves that schedule out and says why.
 */

export type CronResult = { cron: string; notes: string[] } | { problem: string };

/**
 * A Quartz expression (`seconds minutes hours day-of-month month day-of-week [year]`) as cron:
 * the seconds are dropped (noted unless 0), a year other than `*` cannot be carried, and
 * Quartz's numeric days of the week (1 is Sunday) become cron's (0 is Sunday).
 */
export function quartzToCron(expression: string): CronResult {
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 6 && fields.length !== 7) return { problem: `Quartz expression ${JSON.stringify(expression)} has ${fields.length} fields, not 6 or 7` };
  const [seconds, minutes, hours, dom, month, dow, year] = fields;
  const notes: string[] = [];
  if (year !== undefined && year !== '*' && year !== '?') return { problem: `it fires only in year ${year}, which a cron schedule cannot say` };
  if (seconds !== '0' && seconds !== '00') notes.push(`its seconds field ${seconds} is not carried: cron fires at the start of the minute`);
  const cron = [minutes, hours, dom, month, quartzDays(dow)].map((field, i) => ranged(field, CRON_MAX[i])).join(' ');
  const problem = cronProblem(cron);
  return problem ? { problem } : { cron, notes };
}

/** The largest value of each cron field: Quartz's `start/step` is cron's `start-max/step`. */
const CRON_MAX = [59, 23, 31, 12, 6];
const ranged = (field: string, max: number) => field.split(',').map((part) => part.replace(/^(\d+)\/(\d+)$/, `$1-${max}/$2`)).join(',');

/** Quartz day-of-week numbers (1–7, Sunday first) as cron's (0–6); names, `?`, `*`, `#n` and `/step` as they are. */
function quartzDays(field: string): string {
  return field
    .split(',')
    .map((part) => {
      const [range, step] = part.split('/');
      const shifted = range.replace(/^(\d+)(?:-(\d+))?/, (_all, a: string, b?: string) => (b === undefined ? `${Number(a) - 1}` : `${Number(a) - 1}-${Number(b) - 1}`));
      return step === undefined ? shifted : `${shifted}/${step}`;
    })
    .join(',');
}

/** Why Cairn's calendar refuses this cron, or null when it reads it. */
export function cronProblem(cron: string): string | null {
  try {
    // A rule with no fire left (`0 0 31 2 *`) is refused by the schedule's create path too.
    if (!scheduleCalendar({ cron }, 'Etc/UTC').firesAfter(new Date(), 1).length) return `cron ${JSON.stringify(cron)} never fires`;
    return null;
  } catch (err) {
    if (err instanceof CalendarError) return `cron ${JSON.stringify(cron)} is not one Cairn reads: ${err.message.replace(/^cron: /, '')}`;
    throw err;
  }
}

/** A deterministic number for Jenkins's `H`, from the job's name (Jenkins hashes the name too, with its own hash). */
function hashOf(name: string): number {
  let h = 0;
  for (const ch of name) h = (Math.imul(h, 31) + ch.codePointAt(0)!) >>> 0;
  return h;
}

const JENKINS_ALIASES: Record<string, string> = {
  '@yearly': 'H H H H *',
  '@annually': 'H H H H *',
  '@monthly': 'H H H * *',
  '@weekly': 'H H * * H',
  '@daily': 'H H * * *',
  '@midnight': 'H H(0-2) * * *',
  '@hourly': 'H * * * *',
};

/** The range each cron field's `H` picks from. */
const FIELD_RANGES: [number, number][] = [[0, 59], [0, 23], [1, 28], [1, 12], [0, 6]];

/**
 * A Jenkins timer spec (`hudson.triggers.TimerTrigger`): one cron per line, `#` comments, a
 * `TZ=` line naming the zone, Jenkins's aliases, and `H` (a value Jenkins picks from a hash of
 * the job's name, here picked the same way from Cairn's hash, so it is stable across imports;
 * the minute may differ from the one Jenkins chose).
 */
export function jenkinsTimerCrons(spec: string, jobName: string): { timezone: string | null; crons: CronResult[] } {
  let timezone: string | null = null;
  const crons: CronResult[] = [];
  let salt = 0;
  for (const raw of spec.split('\n')) {
    const line = raw.replace(/#.*$/, '').trim();
    if (!line) continue;
    const tz = /^TZ\s*=\s*(\S+)$/.exec(line);
    if (tz) {
      timezone = tz[1];
      continue;
    }
    const expanded = JENKINS_ALIASES[line.toLowerCase()] ?? line;
    const fields = expanded.split(/\s+/);
    if (fields.length !== 5) {
      crons.push({ problem: `timer line ${JSON.stringify(line)} has ${fields.length} fields, not 5` });
      continue;
    }
    const notes: string[] = [];
    const hashed = fields.map((field, i) =>
      field.replace(/H(?:\((\d+)-(\d+)\))?(?:\/(\d+))?/g, (_all, lo?: string, hi?: string, step?: string) => {
        const [min, max] = lo !== undefined ? [Number(lo), Number(hi)] : FIELD_RANGES[i];
        const h = hashOf(`${jobName}:${salt}:${i}`);
        if (step !== undefined) {
          const start = min + (h % Math.max(1, Math.min(Number(step), max - min + 1)));
          return `${start}-${max}/${step}`;
        }
        return String(min + (h % (max - min + 1)));
      }),
    );
    salt++;
    if (hashed.join(' ') !== expanded) notes.push(`Jenkins's H in ${JSON.stringify(line)} is carried as ${JSON.stringify(hashed.join(' '))}`);
    const cron = hashed.join(' ');
    const problem = cronProblem(cron);
    crons.push(problem ? { problem } : { cron, notes });
  }
  return { timezone, crons };
}
