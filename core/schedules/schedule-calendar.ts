import { Cron } from 'croner';
import { DateTime, Duration, FixedOffsetZone, IANAZone } from 'luxon';
import { Frequency, RRule, type Options as RRuleOptions } from 'rrule';

/**
 * When a schedule fires (spec part A 2.6, 4.3): a `cron` expression or an RFC 5545 `rrule`, read
 * in the schedule's IANA zone. Pure: no I/O, and no clock but the times it is given.
 *
 * The calendar is worked in two steps, each by a library, so no date arithmetic is written here:
 *
 * 1. The rule gives its nominal times as wall-clock times, with no zone (croner for cron, rrule
 *    for RRULE and EXRULE lines). Both are run in UTC on purpose, UTC being a clock with no
 *    daylight-saving shifts: a wall time is carried as the UTC instant with the same fields.
 *    Neither library's own zone handling is used (rrule's depends on the machine's zone).
 * 2. Each wall time becomes an instant in the zone (luxon, with the zone's offsets from the
 *    runtime's time-zone database). A time that exists once is that instant. A time the clocks
 *    repeat (fall back) fires once, at its first occurrence: luxon alone would pick an
 *    occurrence by today's offset. A time the clocks skip (spring forward) follows
 *    `spring_forward`:
 *    - `jump` (cron's default): fires at the moment the clocks jump;
 *    - `later` (rrule's default, and RFC 5545's reading): fires after the change by the length
 *      of the jump, that is the time read with the offset before the change (02:30 in New York
 *      on the spring night fires at 03:30 EDT);
 *    - `skip`: that time does not fire; the rule's other times that day do.
 *    Times that become the same instant fire once (a `jump` of 02:00 and 02:30 to 03:00, a
 *    `later` 02:30 landing on a 03:30 the rule also names).
 *
 * Decisions where RFC 5545 or the spec leave room:
 * - An rrule is content lines separated by line breaks or spaces: exactly one DTSTART, one or
 *   more RRULE, any EXRULE, RDATE and EXDATE (lines are not folded). Other properties are refused.
 * - DTSTART always counts as the first occurrence (RFC 5545 3.8.5.3), and as the first of an
 *   RRULE's COUNT (3.3.10), even when the rule would not produce it; an EXDATE can remove it
 *   (its place in COUNT stays taken). COUNT counts after every BY part (countAsUntil).
 * - Zone: `timezone` when given. Otherwise DTSTART's TZID, UTC for a DTSTART in UTC form (`Z`),
 *   else the fallback (the server's zone, chosen by the caller). A TZID on any line, or a DTSTART
 *   in UTC form, that names another zone than `timezone` is refused: the rule and the schedule
 *   must agree. Zones are compared by their canonical names (`US/Eastern` is America/New_York).
 * - RDATE, EXDATE and UNTIL in UTC form are instants, read as wall times in the zone; without
 *   `Z` they are wall times. A date alone (`20250101`) is midnight.
 * - An EXDATE removes the nominal time it names, before `spring_forward` applies.
 * - It is assumed that a zone changes its offset at most once within two days, true of every
 *   zone in the time-zone database since 1970.
 */

export const SPRING_FORWARD = ['jump', 'later', 'skip'] as const;
export type SpringForward = (typeof SPRING_FORWARD)[number];

/** A rule that cannot be read, naming the schedule field at fault. */
export class CalendarError extends Error {
  constructor(
    message: string,
    readonly field: 'cron' | 'rrule' | 'timezone' | 'spring_forward',
  ) {
    super(message);
  }
}

export interface CalendarRule {
  cron?: string | null;
  rrule?: string | null;
  /** An IANA zone name; absent takes the rule's own (see above), else the fallback. */
  timezone?: string | null;
  /** Absent takes the default for the kind of rule. */
  spring_forward?: SpringForward | null;
}

/** The next night the clocks jump over one of the schedule's times (`GET /v1/schedules/preview`). */
export interface SpringGap {
  /** The local date of the night. */
  date: string;
  /** The wall time at which the clocks jump, and the one they jump to (local, no offset). */
  from: string;
  to: string;
  /** The instant of the jump. */
  at: string;
  /** The schedule's times that night that the clocks skip (local, no offset). */
  times: string[];
  /** When those times fire under the schedule's `spring_forward`; empty for `skip`. */
  fires: string[];
}

export interface ScheduleCalendar {
  /** The zone the rule is read in (canonical IANA name). */
  zone: string;
  springForward: SpringForward;
  /** Up to `count` fire instants strictly after `after`, in order; fewer when the rule ends. */
  firesAfter(after: Date, count: number): Date[];
  /** The first spring-forward night after `after` (looking ten years ahead) that skips one of the rule's times. */
  springGap(after: Date): SpringGap | null;
}

/** How far ahead a rule is searched for its next fire: a yearly rule that is skipped for ever ends. */
const HORIZON_YEARS = 100;
const GAP_HORIZON_YEARS = 10;
const UTC = FixedOffsetZone.utcInstance;

// Zone names met so far: asking ICU builds a formatter each time, which costs a fire more than its rule.
const canonicalZones = new Map<string, string | undefined>();

/** The canonical name of an IANA zone (`america/new_york`, `US/Eastern` -> America/New_York), or undefined. */
export function canonicalZone(name: string): string | undefined {
  if (canonicalZones.has(name)) return canonicalZones.get(name);
  const canonical = IANAZone.isValidZone(name) ? new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone : undefined;
  // The names a process meets are the zones of its schedules and requests; bounded all the same.
  if (canonicalZones.size < 10_000) canonicalZones.set(name, canonical);
  return canonical;
}

/** Reads a schedule's rule; throws CalendarError naming the field at fault. */
export function scheduleCalendar(rule: CalendarRule, fallbackZone: string): ScheduleCalendar {
  const cron = rule.cron ?? undefined;
  const rrule = rule.rrule ?? undefined;
  if (cron !== undefined && rrule !== undefined) throw new CalendarError('send cron or rrule, not both', 'rrule');
  if (cron === undefined && rrule === undefined) throw new CalendarError('a schedule needs cron or rrule', 'cron');
  let zone: string | undefined;
  if (rule.timezone != null) {
    zone = canonicalZone(rule.timezone);
    if (!zone) throw new CalendarError(`timezone: ${JSON.stringify(rule.timezone)} is not an IANA time zone name (such as Europe/Berlin)`, 'timezone');
  }
  const springForward = rule.spring_forward ?? (cron !== undefined ? 'jump' : 'later');
  if (!SPRING_FORWARD.includes(springForward)) {
    throw new CalendarError(`spring_forward must be one of ${SPRING_FORWARD.join(', ')}`, 'spring_forward');
  }
  let source: NominalSource;
  if (cron !== undefined) {
    zone ??= canonicalZone(fallbackZone) ?? 'UTC';
    source = cronSource(cron);
  } else {
    const parsed = parseRrule(rrule!, zone, fallbackZone);
    zone = parsed.zone;
    source = parsed.source;
  }
  return new ZonedCalendar(source, new ZoneClock(zone), springForward);
}

// ---- Wall times and instants (luxon) ----

/** A zone's clock: wall times (UTC instants with the same fields) to instants and back. */
class ZoneClock {
  private readonly iana: IANAZone;
  constructor(readonly zone: string) {
    this.iana = IANAZone.create(zone);
  }

  /** Minutes east of UTC at an instant. */
  offsetAt(instant: number): number {
    return this.iana.offset(instant);
  }

  /** The wall time the zone's clocks show at an instant. */
  wallAt(instant: number): number {
    return DateTime.fromMillis(instant, { zone: this.iana }).setZone(UTC, { keepLocalTime: true }).toMillis();
  }

  /** The instant at which a wall time is read with a given offset. */
  instantWith(wall: number, offsetMinutes: number): number {
    return DateTime.fromMillis(wall, { zone: UTC }).setZone(FixedOffsetZone.instance(offsetMinutes), { keepLocalTime: true }).toMillis();
  }

  /** The zone's offsets two days either side of a time (wall or instant: the window covers both). */
  offsetsAround(time: number): { before: number; after: number } {
    const at = DateTime.fromMillis(time, { zone: UTC });
    return { before: this.offsetAt(at.minus({ days: 2 }).toMillis()), after: this.offsetAt(at.plus({ days: 2 }).toMillis()) };
  }

  /** How far the clocks jump forward near a time, in milliseconds; zero when they do not. */
  springNear(time: number): number {
    const { before, after } = this.offsetsAround(time);
    return after > before ? Duration.fromObject({ minutes: after - before }).toMillis() : 0;
  }

  /**
   * Where a wall time falls: the instants that read it (one, or two when the clocks repeat it,
   * earlier first), or for a time the clocks skip, the jump and the time read with the offset
   * before it.
   */
  locate(wall: number): { readings: number[] } | { gap: { jumpAt: number; later: number } } {
    const { before, after } = this.offsetsAround(wall);
    const readings = [...new Set([before, after])]
      .map((offset) => this.instantWith(wall, offset))
      .filter((instant) => this.wallAt(instant) === wall)
      .sort((a, b) => a - b);
    if (readings.length) return { readings };
    // No offset reads it: the clocks jumped from `before` to `after` over it.
    const later = this.instantWith(wall, before);
    return { gap: { jumpAt: this.changeBetween(this.instantWith(wall, after), later, before), later } };
  }

  /**
   * The first instant in (lo, hi] at which the offset is no longer `from`, to the second: the
   * zone's offset is bisected between two instants either side of a change (the zone database
   * has no transition list to ask).
   */
  changeBetween(lo: number, hi: number, from: number): number {
    let low = DateTime.fromMillis(lo).startOf('second');
    let high = DateTime.fromMillis(hi);
    while (high.diff(low, 'seconds').seconds > 1) {
      const mid = low.plus({ seconds: Math.floor(high.diff(low, 'seconds').seconds / 2) });
      if (this.offsetAt(mid.toMillis()) === from) low = mid;
      else high = mid;
    }
    return high.toMillis();
  }

  /** A wall time as local ISO without offset: `2025-03-09T02:30` (seconds shown when set). */
  formatWall(wall: number): string {
    const time = DateTime.fromMillis(wall, { zone: UTC });
    return time.toFormat(time.second ? "yyyy-MM-dd'T'HH:mm:ss" : "yyyy-MM-dd'T'HH:mm");
  }
}

// ---- The calendar ----

/** A rule's nominal wall times, in order, strictly after `from` and up to `until` (both wall times). */
interface NominalSource {
  walk(from: number, until: number, visit: (wall: number) => boolean): void;
}

class ZonedCalendar implements ScheduleCalendar {
  readonly zone: string;
  constructor(
    private readonly source: NominalSource,
    private readonly clock: ZoneClock,
    readonly springForward: SpringForward,
  ) {
    this.zone = clock.zone;
  }

  /** The instant a nominal wall time fires at, or undefined when `skip` drops it. */
  private fireOf(wall: number): number | undefined {
    const place = this.clock.locate(wall);
    if ('readings' in place) return place.readings[0];
    if (this.springForward === 'skip') return undefined;
    return this.springForward === 'jump' ? place.gap.jumpAt : place.gap.later;
  }

  private horizon(wall: number): number {
    return DateTime.fromMillis(wall, { zone: UTC }).plus({ years: HORIZON_YEARS }).toMillis();
  }

  firesAfter(after: Date, count: number): Date[] {
    const start = this.clock.wallAt(after.getTime());
    // A time the clocks skipped just before `after` may fire after it (`later`, `jump`): start
    // that far back. Past a gap, fires come in the order of their nominal times again.
    const from = DateTime.fromMillis(start - this.clock.springNear(start), { zone: UTC }).minus({ milliseconds: 1 }).toMillis();
    const fires = new Set<number>();
    let lastNeeded: number | undefined;
    this.source.walk(from, this.horizon(start), (wall) => {
      if (lastNeeded !== undefined && wall > lastNeeded) return false;
      const fire = this.fireOf(wall);
      if (fire !== undefined && fire > after.getTime()) fires.add(fire);
      if (lastNeeded === undefined && fires.size >= count) lastNeeded = wall + this.clock.springNear(wall);
      return true;
    });
    return [...fires]
      .sort((a, b) => a - b)
      .slice(0, count)
      .map((fire) => new Date(fire));
  }

  springGap(after: Date): SpringGap | null {
    const end = DateTime.fromMillis(after.getTime()).plus({ years: GAP_HORIZON_YEARS });
    for (let week = DateTime.fromMillis(after.getTime()); week < end; week = week.plus({ weeks: 1 })) {
      const next = week.plus({ weeks: 1 });
      const before = this.clock.offsetAt(week.toMillis());
      if (this.clock.offsetAt(next.toMillis()) <= before) continue;
      const at = this.clock.changeBetween(week.toMillis(), next.toMillis(), before);
      const gapFrom = DateTime.fromMillis(at, { zone: FixedOffsetZone.instance(before) }).setZone(UTC, { keepLocalTime: true }).toMillis();
      const gapTo = this.clock.wallAt(at);
      const times: number[] = [];
      this.source.walk(gapFrom - 1, gapTo - 1, (wall) => {
        times.push(wall);
        return true;
      });
      if (!times.length) continue;
      const fires = [...new Set(times.map((wall) => this.fireOf(wall)).filter((fire): fire is number => fire !== undefined))];
      return {
        date: DateTime.fromMillis(gapFrom, { zone: UTC }).toISODate()!,
        from: this.clock.formatWall(gapFrom),
        to: this.clock.formatWall(gapTo),
        at: new Date(at).toISOString(),
        times: times.map((wall) => this.clock.formatWall(wall)),
        fires: fires.sort((a, b) => a - b).map((fire) => new Date(fire).toISOString()),
      };
    }
    return null;
  }
}

// ---- cron (croner) ----

/**
 * How the two day fields combine, as Vixie cron and cronie read them (crontab(5)): when both are
 * restricted a day matching either fires; when either starts with `*` (croner's `?` too) a day
 * must match both, so every other day of the month (`*` stepped by 2) with weekday 1 fires on
 * odd-dated Mondays only. croner ORs them unless a field is
 * exactly `*`, so the AND is asked of it whenever a field starts with `*`.
 */
function daysMustBothMatch(expression: string): boolean {
  const fields = expression.trim().split(/\s+/);
  if (fields.length < 5) return false; // a nickname: croner expands it with `*` days
  const [dayOfMonth, dayOfWeek] = fields.length === 6 ? [fields[3], fields[5]] : [fields[2], fields[4]];
  return /^[*?]/.test(dayOfMonth) || /^[*?]/.test(dayOfWeek);
}

function cronSource(expression: string): NominalSource {
  let cron: Cron;
  try {
    // Run in UTC, which has no shifts: the pattern's times are wall times (see the top of the file).
    cron = new Cron(expression.trim(), { timezone: 'Etc/UTC', mode: '5-or-6-parts', paused: true, domAndDow: daysMustBothMatch(expression) });
  } catch (err) {
    throw new CalendarError(`cron: ${(err as Error).message.replace(/^CronPattern: /, '')}`, 'cron');
  }
  return {
    walk(from, until, visit) {
      for (let cursor = new Date(from); ; ) {
        const next = cron.nextRun(cursor);
        if (!next || next.getTime() > until || !visit(next.getTime())) return;
        cursor = next;
      }
    },
  };
}

// ---- RFC 5545 (rrule) ----

const PROPERTIES = ['DTSTART', 'RRULE', 'EXRULE', 'RDATE', 'EXDATE'] as const;
type Property = (typeof PROPERTIES)[number];

interface ContentLine {
  name: Property;
  params: Map<string, string>;
  value: string;
}

/** A DATE-TIME or DATE value: its wall time (UTC fields), or the instant for the UTC form. */
interface TimeValue {
  wall: number;
  utc: boolean;
}

function rruleFault(message: string): CalendarError {
  return new CalendarError(`rrule: ${message}`, 'rrule');
}

function contentLines(text: string): ContentLine[] {
  const tokens = text.split(/\s+/).filter(Boolean);
  if (!tokens.length) throw rruleFault('is empty; send a DTSTART and an RRULE line');
  return tokens.map((token) => {
    const colon = token.indexOf(':');
    if (colon < 0) throw rruleFault(`${JSON.stringify(token)} is not a content line (NAME:VALUE)`);
    const [rawName, ...rawParams] = token.slice(0, colon).split(';');
    const name = rawName.toUpperCase() as Property;
    if (!PROPERTIES.includes(name)) throw rruleFault(`${JSON.stringify(rawName)} is not one of ${PROPERTIES.join(', ')}`);
    const params = new Map<string, string>();
    for (const param of rawParams) {
      const eq = param.indexOf('=');
      if (eq < 1) throw rruleFault(`${name}: the parameter ${JSON.stringify(param)} is not NAME=VALUE`);
      params.set(param.slice(0, eq).toUpperCase(), param.slice(eq + 1));
    }
    for (const param of params.keys()) {
      if (param !== 'TZID' && param !== 'VALUE') throw rruleFault(`${name}: the parameter ${param} is not supported (TZID and VALUE are)`);
    }
    return { name, params, value: token.slice(colon + 1) };
  });
}

const DATE_TIME = /^(\d{8})(T\d{6})?(Z)?$/i;

function timeValue(text: string, property: string): TimeValue {
  const match = DATE_TIME.exec(text);
  const time = match ? DateTime.fromFormat(match[1] + (match[2] ?? 'T000000').toUpperCase(), "yyyyMMdd'T'HHmmss", { zone: UTC }) : undefined;
  if (!match || !time?.isValid) throw rruleFault(`${property}: ${JSON.stringify(text)} is not a date-time such as 20250301T090000 or 20250301T090000Z`);
  return { wall: time.toMillis(), utc: Boolean(match[3]) };
}

/** The zone a TZID names, which must agree with the schedule's when it has one. */
function tzidZone(line: ContentLine, zone: string | undefined): string | undefined {
  const tzid = line.params.get('TZID');
  if (tzid === undefined) return undefined;
  const named = canonicalZone(tzid);
  if (!named) throw rruleFault(`${line.name}: TZID ${JSON.stringify(tzid)} is not an IANA time zone name`);
  if (zone !== undefined && named !== zone) {
    throw rruleFault(`${line.name} names the time zone ${tzid}, which disagrees with timezone ${zone}; send one zone`);
  }
  return named;
}

function parseRrule(text: string, asked: string | undefined, fallbackZone: string): { zone: string; source: NominalSource } {
  const lines = contentLines(text);
  const starts = lines.filter((line) => line.name === 'DTSTART');
  if (starts.length !== 1) throw rruleFault(starts.length ? 'has more than one DTSTART' : 'needs a DTSTART line, such as DTSTART;TZID=Europe/Berlin:20250301T090000');
  if (!lines.some((line) => line.name === 'RRULE')) throw rruleFault('needs at least one RRULE line, such as RRULE:FREQ=DAILY');

  const dtstartLine = starts[0];
  const dtstartValue = timeValue(dtstartLine.value, 'DTSTART');
  let zone = tzidZone(dtstartLine, asked) ?? asked;
  if (dtstartValue.utc) {
    if (dtstartLine.params.has('TZID')) throw rruleFault('DTSTART: a time in UTC form (ending in Z) takes no TZID');
    if (zone !== undefined && zone !== 'UTC') throw rruleFault(`DTSTART is in UTC (it ends in Z), which disagrees with timezone ${zone}; send one zone`);
    zone = 'UTC';
  }
  zone ??= canonicalZone(fallbackZone) ?? 'UTC';
  const clock = new ZoneClock(zone);
  const wallOf = (value: TimeValue) => (value.utc ? clock.wallAt(value.wall) : value.wall);

  const rules = (name: 'RRULE' | 'EXRULE') =>
    lines.filter((line) => line.name === name).map((line) => ruleOf(line, wallOf(dtstartValue), clock));
  const dates = (name: 'RDATE' | 'EXDATE') =>
    lines
      .filter((line) => line.name === name)
      .flatMap((line) => {
        tzidZone(line, zone);
        const kind = line.params.get('VALUE')?.toUpperCase();
        if (kind !== undefined && kind !== 'DATE' && kind !== 'DATE-TIME') throw rruleFault(`${name}: VALUE=${kind} is not supported (DATE and DATE-TIME are)`);
        return line.value.split(',').map((item) => wallOf(timeValue(item, name)));
      });
  return {
    zone,
    source: new RruleSource(wallOf(dtstartValue), rules('RRULE'), rules('EXRULE'), dates('RDATE'), new Set(dates('EXDATE'))),
  };
}

/** RRULE numbers and their ranges (RFC 5545 3.3.10); a leap second (BYSECOND=60) never fires here. */
const RANGES: Partial<Record<keyof RRuleOptions, { name: string; min: number; max: number; nonZero?: boolean }>> = {
  count: { name: 'COUNT', min: 1, max: 100_000 },
  interval: { name: 'INTERVAL', min: 1, max: Number.MAX_SAFE_INTEGER },
  bysecond: { name: 'BYSECOND', min: 0, max: 59 },
  byminute: { name: 'BYMINUTE', min: 0, max: 59 },
  byhour: { name: 'BYHOUR', min: 0, max: 23 },
  bymonth: { name: 'BYMONTH', min: 1, max: 12 },
  bymonthday: { name: 'BYMONTHDAY', min: -31, max: 31, nonZero: true },
  byyearday: { name: 'BYYEARDAY', min: -366, max: 366, nonZero: true },
  byweekno: { name: 'BYWEEKNO', min: -53, max: 53, nonZero: true },
  bysetpos: { name: 'BYSETPOS', min: -366, max: 366, nonZero: true },
};

const list = <T>(value: T | T[] | null | undefined): T[] => (value == null ? [] : Array.isArray(value) ? value : [value]);

/**
 * What rrule parses without complaint but cannot run: a part it could not read (`COUNT=x`,
 * `BYDAY=XX`), a number out of range, or a sub-daily rule whose INTERVAL never reaches its
 * BYHOUR, BYMINUTE or BYSECOND (rrule would loop for ever looking).
 */
function requireRunnable(options: Partial<RRuleOptions>, line: string, dtstart: number): void {
  if (options.freq === undefined) throw rruleFault(`${line}: FREQ is required`);
  if (options.byeaster != null) throw rruleFault(`${line}: BYEASTER is not part of RFC 5545`);
  if (list(options.byweekday).some((day) => day === undefined) || options.wkst === undefined && 'wkst' in options) {
    throw rruleFault(`${line}: BYDAY or WKST has a day that is not understood (use MO, TU, WE, TH, FR, SA, SU, with an optional number such as 1MO or -1FR)`);
  }
  for (const [key, range] of Object.entries(RANGES)) {
    for (const value of list(options[key as keyof RRuleOptions] as unknown)) {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < range.min || value > range.max || (range.nonZero && value === 0)) {
        throw rruleFault(`${line}: ${range.name} must be a whole number from ${range.min} to ${range.max}${range.nonZero ? ', not 0' : ''}`);
      }
    }
  }
  const unitSeconds = { [Frequency.HOURLY]: 3600, [Frequency.MINUTELY]: 60, [Frequency.SECONDLY]: 1 }[options.freq as number];
  if (unitSeconds === undefined) return;
  // rrule steps a sub-daily rule by INTERVAL from DTSTART's time of day until the BY parts
  // match: the times of day it reaches are those DTSTART's differs from by a multiple of the
  // step's greatest common divisor with a day.
  const start = DateTime.fromMillis(dtstart, { zone: UTC });
  const checks = (values: unknown, all: number, own: number, checked: boolean) => (!checked ? [own] : list(values as number[]).length ? list(values as number[]) : [...Array(all).keys()]);
  const hours = checks(options.byhour, 24, start.hour, true);
  const minutes = checks(options.byminute, 60, start.minute, options.freq !== Frequency.HOURLY);
  const seconds = checks(options.bysecond, 60, start.second, options.freq === Frequency.SECONDLY);
  const step = greatestCommonDivisor((options.interval ?? 1) * unitSeconds, 24 * 3600);
  const own = start.hour * 3600 + start.minute * 60 + start.second;
  const reachable = hours.some((h) => minutes.some((m) => seconds.some((s) => (h * 3600 + m * 60 + s - own) % step === 0)));
  if (!reachable) throw rruleFault(`${line}: with this INTERVAL from DTSTART's time of day, the rule never reaches its BYHOUR, BYMINUTE or BYSECOND`);
}

function greatestCommonDivisor(a: number, b: number): number {
  return b === 0 ? a : greatestCommonDivisor(b, a % b);
}

/**
 * An RRULE or EXRULE: rrule's rule, and the BY parts this module applies itself. RFC 5545 has
 * BYHOUR limit a minutely rule, and BYHOUR and BYMINUTE a secondly one: they keep the times, every
 * INTERVAL from DTSTART, that fall in them. rrule instead steps into the next allowed hour or
 * minute, which moves the times off DTSTART's beat (every 13 minutes from 04:05 between 09:00 and
 * 11:00 should be 09:03, 09:16, …). So those parts are taken off the rule and applied here.
 */
interface Recurrence {
  rule: RRule;
  keeps(wall: number): boolean;
}

const LIMITS_APPLIED_HERE: Partial<Record<Frequency, ('byhour' | 'byminute')[]>> = {
  [Frequency.MINUTELY]: ['byhour'],
  [Frequency.SECONDLY]: ['byhour', 'byminute'],
};

function ruleOf(line: ContentLine, dtstart: number, clock: ZoneClock): Recurrence {
  let options: Partial<RRuleOptions>;
  try {
    options = RRule.parseString(line.value);
  } catch (err) {
    throw rruleFault(`${line.name}: ${(err as Error).message}`);
  }
  if (options.dtstart || options.tzid) throw rruleFault(`${line.name}: DTSTART and TZID go on the DTSTART line`);
  requireRunnable(options, line.name, dtstart);
  // UNTIL in UTC form is an instant: read as the zone's wall time, as every other time here is.
  const until = options.until ? (/UNTIL=[^;]*Z/i.test(line.value) ? clock.wallAt(options.until.getTime()) : options.until.getTime()) : undefined;
  const limits = options.bysetpos == null ? (LIMITS_APPLIED_HERE[options.freq!] ?? []).filter((part) => list(options[part]).length) : [];
  const hours = new Set(limits.includes('byhour') ? list(options.byhour) : []);
  const minutes = new Set(limits.includes('byminute') ? list(options.byminute) : []);
  const rule = new RRule({
    ...options,
    ...Object.fromEntries(limits.map((part) => [part, null])),
    dtstart: new Date(dtstart),
    tzid: null,
    count: null,
    until: until === undefined ? null : new Date(until),
  });
  const keeps = (wall: number) => {
    if (!limits.length) return true;
    const time = DateTime.fromMillis(wall, { zone: UTC });
    return (!hours.size || hours.has(time.hour)) && (!minutes.size || minutes.has(time.minute));
  };
  if (options.count == null) return { rule, keeps };
  return { rule: countAsUntil(rule, keeps, options.count, line.name === 'RRULE' ? dtstart : undefined), keeps };
}

/** The units of frequencies whose occurrences repeat exactly every INTERVAL units of wall time. */
const EVEN_UNITS: Partial<Record<Frequency, 'seconds' | 'minutes' | 'hours' | 'days' | 'weeks'>> = {
  [Frequency.SECONDLY]: 'seconds',
  [Frequency.MINUTELY]: 'minutes',
  [Frequency.HOURLY]: 'hours',
  [Frequency.DAILY]: 'days',
  [Frequency.WEEKLY]: 'weeks',
};

/**
 * rrule walks every occurrence from DTSTART on, so a minutely rule a year old would take a second
 * to find its next time. A rule whose frequency is a fixed length of wall time (seconds to weeks)
 * has the same occurrences after any start moved on by whole intervals, so each window of a walk
 * starts the rule from the last such start at or before the window. Months and years vary in
 * length: those rules walk from DTSTART, which costs little at their pace.
 */
function startingNear(rule: RRule, from: number): RRule {
  const unit = EVEN_UNITS[rule.options.freq];
  const dtstart = rule.options.dtstart.getTime();
  if (!unit || rule.options.count != null || from <= dtstart) return rule;
  const interval = rule.options.interval;
  const start = DateTime.fromMillis(dtstart, { zone: UTC });
  const periods = Math.floor(DateTime.fromMillis(from, { zone: UTC }).diff(start, unit).as(unit) / interval);
  if (periods < 1) return rule;
  return new RRule({ ...rule.origOptions, dtstart: start.plus({ [unit]: periods * interval }).toJSDate() });
}

/**
 * COUNT as the UNTIL of the rule's last time, so the rule can start anywhere (startingNear) and
 * every walk gives the same times. COUNT counts the times the rule gives after the BY parts applied
 * here (`keeps`), and an RRULE's DTSTART is always the first of them (RFC 5545 3.3.10), so a
 * DTSTART the rule would not give leaves it COUNT - 1 times of its own. One walk of at most COUNT
 * kept times, run as near the year 9999 as the calendar allows (Shift) so that a rule with fewer
 * times than COUNT gives up soon.
 */
function countAsUntil(rule: RRule, keeps: (wall: number) => boolean, count: number, dtstart: number | undefined): RRule {
  const shift = new Shift(rule.options.dtstart.getTime());
  let left = count;
  let last: number | undefined;
  let first = true;
  shift.rule(rule).all((date) => {
    const wall = shift.back(date.getTime());
    if (!keeps(wall)) return true;
    // DTSTART, which the walk adds by itself, took the first place.
    if (first && dtstart !== undefined && wall !== dtstart) left--;
    first = false;
    if (left <= 0) return false;
    last = wall;
    left--;
    return left > 0;
  });
  // No time of its own left: an UNTIL before DTSTART gives none.
  const until = last ?? rule.options.dtstart.getTime() - 1;
  return new RRule({ ...rule.origOptions, count: null, until: new Date(until) });
}

/**
 * rrule looks for a rule's next time until the year 9999, however far that is: a rule with no
 * time left (`BYMONTH=2;BYMONTHDAY=30`) would take seconds. The Gregorian calendar, weekdays
 * included, repeats every 400 years, so a walk runs its rules that many years ahead, as close to
 * 9999 as its end allows: rrule then gives up within 400 years of the walk's end.
 */
const CYCLE_YEARS = 400;
const LAST_YEAR = 9999;

class Shift {
  private readonly years: number;
  constructor(until: number) {
    this.years = Math.max(0, Math.floor((LAST_YEAR - DateTime.fromMillis(until, { zone: UTC }).year) / CYCLE_YEARS)) * CYCLE_YEARS;
  }
  private move(time: number, years: number): number {
    return DateTime.fromMillis(time, { zone: UTC }).plus({ years }).toMillis();
  }
  ahead(time: number): number {
    return this.move(time, this.years);
  }
  back(time: number): number {
    return this.move(time, -this.years);
  }
  rule(rule: RRule): RRule {
    const { dtstart, until } = rule.options;
    return new RRule({ ...rule.origOptions, dtstart: new Date(this.ahead(dtstart.getTime())), until: until ? new Date(this.ahead(until.getTime())) : null });
  }
}

/** Times a window may gather before it stops widening, and times a walk may read in all. */
const WINDOW_TIMES = 1000;
const WALK_TIMES = 50_000;

/**
 * The RRULE and RDATE times, less the EXRULE and EXDATE ones, in order and each once. rrule's own
 * RRuleSet is not used: its callback sees each rule's times one rule after another, not in order.
 * Times are gathered a window at a time, from a minute wide, doubling while a window holds few,
 * so a secondly rule and a yearly one both cost little. A walk reads at most 50,000 times: a
 * rule whose next time lies further (an EXRULE that removes nearly all of them) has none in reach.
 */
class RruleSource implements NominalSource {
  constructor(
    private readonly dtstart: number,
    private readonly rules: Recurrence[],
    private readonly exrules: Recurrence[],
    private readonly rdates: number[],
    private readonly exdates: Set<number>,
  ) {}

  walk(from: number, until: number, visit: (wall: number) => boolean): void {
    const shift = new Shift(until);
    const prepare = ({ rule, keeps }: Recurrence): Recurrence => ({ rule: shift.rule(rule), keeps });
    const rules = this.rules.map(prepare);
    const exrules = this.exrules.map(prepare);
    const timesIn = ({ rule }: Recurrence, low: number, high: number) =>
      startingNear(rule, shift.ahead(low))
        .between(new Date(shift.ahead(low)), new Date(shift.ahead(high)), true)
        .map((time) => shift.back(time.getTime()))
        .filter((time) => time > low);
    const ended = ({ rule }: Recurrence, after: number) => startingNear(rule, shift.ahead(after)).after(new Date(shift.ahead(after))) === null;
    const extra = [this.dtstart, ...this.rdates];
    let read = 0;
    let width = Duration.fromObject({ minutes: 1 }).toMillis();
    for (let low = from; low < until && read < WALK_TIMES; ) {
      // Checked before each window, the first included: a rule with no time after `low` (30
      // February) ends the walk at once instead of after windows widening across the centuries.
      if (extra.every((t) => t <= low) && rules.every((rule) => ended(rule, low))) return;
      const high = Math.min(until, low + width);
      const gathered = rules.map((rule) => ({ rule, times: timesIn(rule, low, high) }));
      const found = gathered.flatMap(({ rule, times }) => times.filter((time) => rule.keeps(time)));
      const excluded = new Set(exrules.flatMap((rule) => timesIn(rule, low, high).filter((time) => rule.keeps(time))));
      const times = [...new Set([...found, ...extra.filter((t) => t > low && t <= high)])]
        .filter((t) => !this.exdates.has(t) && !excluded.has(t))
        .sort((a, b) => a - b);
      for (const time of times) if (!visit(time)) return;
      const count = gathered.reduce((sum, { times }) => sum + times.length, 0);
      read += count;
      if (count < WINDOW_TIMES) width *= 2;
      low = high;
    }
  }
}
