import { cpuTimed } from '../support/cpu-time';
import { RRule } from 'rrule';
import { CalendarError, canonicalZone, scheduleCalendar, type CalendarRule, type SpringForward } from '../../core/schedules/schedule-calendar';

const fires = (rule: CalendarRule, after: string, count = 3, fallback = 'UTC') =>
  scheduleCalendar(rule, fallback)
    .firesAfter(new Date(after), count)
    .map((fire) => fire.toISOString().replace('.000Z', 'Z'));

/**
 * Each row: a rule read in a zone, the time to look after, and the fires that follow, under each
 * `spring_forward`. Times the clocks skip fire at the jump (`jump`), after the change by the
 * jump's length (`later`) or not at all (`skip`); times the clocks repeat fire once, at their
 * first occurrence, whatever `spring_forward` says.
 */
interface Row {
  name: string;
  rule: CalendarRule;
  after: string;
  count?: number;
  expected: Record<SpringForward, string[]> | string[];
}

const CRON_ROWS: Row[] = [
  {
    name: 'America/New_York spring forward: 02:30 does not exist on 2025-03-09',
    rule: { cron: '30 2 * * *', timezone: 'America/New_York' },
    after: '2025-03-08T12:00:00Z',
    expected: {
      jump: ['2025-03-09T07:00:00Z', '2025-03-10T06:30:00Z', '2025-03-11T06:30:00Z'],
      later: ['2025-03-09T07:30:00Z', '2025-03-10T06:30:00Z', '2025-03-11T06:30:00Z'],
      skip: ['2025-03-10T06:30:00Z', '2025-03-11T06:30:00Z', '2025-03-12T06:30:00Z'],
    },
  },
  {
    name: 'America/New_York spring forward: three times in the gap jump to one fire at 03:00',
    rule: { cron: '*/20 2 * * *', timezone: 'America/New_York' },
    after: '2025-03-09T05:00:00Z',
    expected: {
      jump: ['2025-03-09T07:00:00Z', '2025-03-10T06:00:00Z', '2025-03-10T06:20:00Z'],
      later: ['2025-03-09T07:00:00Z', '2025-03-09T07:20:00Z', '2025-03-09T07:40:00Z'],
      skip: ['2025-03-10T06:00:00Z', '2025-03-10T06:20:00Z', '2025-03-10T06:40:00Z'],
    },
  },
  {
    name: 'America/New_York spring forward: a time moved later that lands on a time of the rule fires once',
    rule: { cron: '30 2,3 * * *', timezone: 'America/New_York' },
    after: '2025-03-09T05:00:00Z',
    expected: {
      jump: ['2025-03-09T07:00:00Z', '2025-03-09T07:30:00Z', '2025-03-10T06:30:00Z'],
      later: ['2025-03-09T07:30:00Z', '2025-03-10T06:30:00Z', '2025-03-10T07:30:00Z'],
      skip: ['2025-03-09T07:30:00Z', '2025-03-10T06:30:00Z', '2025-03-10T07:30:00Z'],
    },
  },
  {
    name: 'America/New_York fall back: 01:30 happens twice on 2025-11-02 and fires once, at the first',
    rule: { cron: '30 1 * * *', timezone: 'America/New_York' },
    after: '2025-11-01T12:00:00Z',
    expected: ['2025-11-02T05:30:00Z', '2025-11-03T06:30:00Z', '2025-11-04T06:30:00Z'],
  },
  {
    name: 'America/New_York fall back: every quarter hour of the repeated hour fires once',
    rule: { cron: '*/15 1 * * *', timezone: 'America/New_York' },
    after: '2025-11-02T04:00:00Z',
    count: 5,
    expected: ['2025-11-02T05:00:00Z', '2025-11-02T05:15:00Z', '2025-11-02T05:30:00Z', '2025-11-02T05:45:00Z', '2025-11-03T06:00:00Z'],
  },
  {
    name: 'America/New_York fall back: during the second pass of 01:00-02:00 nothing fires again',
    rule: { cron: '*/15 * * * *', timezone: 'America/New_York' },
    after: '2025-11-02T06:10:00Z',
    count: 2,
    expected: ['2025-11-02T07:00:00Z', '2025-11-02T07:15:00Z'],
  },
  {
    name: 'Europe/Berlin spring forward: 02:30 does not exist on 2025-03-30',
    rule: { cron: '30 2 * * *', timezone: 'Europe/Berlin' },
    after: '2025-03-29T12:00:00Z',
    expected: {
      jump: ['2025-03-30T01:00:00Z', '2025-03-31T00:30:00Z', '2025-04-01T00:30:00Z'],
      later: ['2025-03-30T01:30:00Z', '2025-03-31T00:30:00Z', '2025-04-01T00:30:00Z'],
      skip: ['2025-03-31T00:30:00Z', '2025-04-01T00:30:00Z', '2025-04-02T00:30:00Z'],
    },
  },
  {
    name: 'Europe/Berlin fall back: 02:30 happens twice on 2025-10-26 and fires once, at the first',
    rule: { cron: '30 2 * * *', timezone: 'Europe/Berlin' },
    after: '2025-10-25T12:00:00Z',
    expected: ['2025-10-26T00:30:00Z', '2025-10-27T01:30:00Z', '2025-10-28T01:30:00Z'],
  },
  {
    name: 'Australia/Lord_Howe spring forward by 30 minutes: 02:15 does not exist on 2025-10-05',
    rule: { cron: '15 2 * * *', timezone: 'Australia/Lord_Howe' },
    after: '2025-10-04T00:00:00Z',
    expected: {
      jump: ['2025-10-04T15:30:00Z', '2025-10-05T15:15:00Z', '2025-10-06T15:15:00Z'],
      later: ['2025-10-04T15:45:00Z', '2025-10-05T15:15:00Z', '2025-10-06T15:15:00Z'],
      skip: ['2025-10-05T15:15:00Z', '2025-10-06T15:15:00Z', '2025-10-07T15:15:00Z'],
    },
  },
  {
    name: 'Australia/Lord_Howe fall back by 30 minutes: 01:45 happens twice on 2025-04-06 and fires once',
    rule: { cron: '45 1 * * *', timezone: 'Australia/Lord_Howe' },
    after: '2025-04-05T00:00:00Z',
    expected: ['2025-04-05T14:45:00Z', '2025-04-06T15:15:00Z', '2025-04-07T15:15:00Z'],
  },
  {
    name: 'Pacific/Apia skipped 2011-12-30 whole: its 09:00 jumps to midnight, or is the 31st’s own 09:00',
    rule: { cron: '0 9 * * *', timezone: 'Pacific/Apia' },
    after: '2011-12-29T00:00:00Z',
    expected: {
      jump: ['2011-12-29T19:00:00Z', '2011-12-30T10:00:00Z', '2011-12-30T19:00:00Z'],
      later: ['2011-12-29T19:00:00Z', '2011-12-30T19:00:00Z', '2011-12-31T19:00:00Z'],
      skip: ['2011-12-29T19:00:00Z', '2011-12-30T19:00:00Z', '2011-12-31T19:00:00Z'],
    },
  },
  {
    name: 'Feb 29: a cron for the 29th of February fires only in leap years',
    rule: { cron: '0 9 29 2 *', timezone: 'Europe/Berlin' },
    after: '2025-01-01T00:00:00Z',
    expected: ['2028-02-29T08:00:00Z', '2032-02-29T08:00:00Z', '2036-02-29T08:00:00Z'],
  },
  {
    name: 'cron with seconds: every 3 seconds',
    rule: { cron: '*/3 * * * * *', timezone: 'UTC' },
    after: '2025-01-01T00:00:01Z',
    expected: ['2025-01-01T00:00:03Z', '2025-01-01T00:00:06Z', '2025-01-01T00:00:09Z'],
  },
];

const RRULE_ROWS: Row[] = [
  {
    name: 'America/New_York spring forward: a daily 02:30 rule on 2025-03-09',
    rule: { rrule: 'DTSTART;TZID=America/New_York:20250301T023000\nRRULE:FREQ=DAILY' },
    after: '2025-03-08T12:00:00Z',
    expected: {
      jump: ['2025-03-09T07:00:00Z', '2025-03-10T06:30:00Z', '2025-03-11T06:30:00Z'],
      later: ['2025-03-09T07:30:00Z', '2025-03-10T06:30:00Z', '2025-03-11T06:30:00Z'],
      skip: ['2025-03-10T06:30:00Z', '2025-03-11T06:30:00Z', '2025-03-12T06:30:00Z'],
    },
  },
  {
    name: 'America/New_York fall back: an hourly rule fires 01:00 once, then 02:00 EST',
    rule: { rrule: 'DTSTART;TZID=America/New_York:20251101T000000 RRULE:FREQ=HOURLY' },
    after: '2025-11-02T04:30:00Z',
    expected: ['2025-11-02T05:00:00Z', '2025-11-02T07:00:00Z', '2025-11-02T08:00:00Z'],
  },
  {
    name: 'Europe/Berlin spring forward: a weekly Sunday 02:30 rule on 2025-03-30',
    rule: { rrule: 'DTSTART;TZID=Europe/Berlin:20250302T023000 RRULE:FREQ=WEEKLY;BYDAY=SU' },
    after: '2025-03-29T00:00:00Z',
    expected: {
      jump: ['2025-03-30T01:00:00Z', '2025-04-06T00:30:00Z', '2025-04-13T00:30:00Z'],
      later: ['2025-03-30T01:30:00Z', '2025-04-06T00:30:00Z', '2025-04-13T00:30:00Z'],
      skip: ['2025-04-06T00:30:00Z', '2025-04-13T00:30:00Z', '2025-04-20T00:30:00Z'],
    },
  },
  {
    name: 'Europe/Berlin fall back: a daily 02:30 rule on 2025-10-26 fires once',
    rule: { rrule: 'DTSTART;TZID=Europe/Berlin:20251020T023000 RRULE:FREQ=DAILY' },
    after: '2025-10-25T12:00:00Z',
    expected: ['2025-10-26T00:30:00Z', '2025-10-27T01:30:00Z', '2025-10-28T01:30:00Z'],
  },
  {
    name: 'Australia/Lord_Howe spring forward by 30 minutes: a daily 02:15 rule',
    rule: { rrule: 'DTSTART;TZID=Australia/Lord_Howe:20251001T021500 RRULE:FREQ=DAILY' },
    after: '2025-10-04T00:00:00Z',
    expected: {
      jump: ['2025-10-04T15:30:00Z', '2025-10-05T15:15:00Z', '2025-10-06T15:15:00Z'],
      later: ['2025-10-04T15:45:00Z', '2025-10-05T15:15:00Z', '2025-10-06T15:15:00Z'],
      skip: ['2025-10-05T15:15:00Z', '2025-10-06T15:15:00Z', '2025-10-07T15:15:00Z'],
    },
  },
  {
    name: 'Australia/Lord_Howe fall back by 30 minutes: a daily 01:45 rule fires once',
    rule: { rrule: 'DTSTART;TZID=Australia/Lord_Howe:20250401T014500 RRULE:FREQ=DAILY' },
    after: '2025-04-05T00:00:00Z',
    expected: ['2025-04-05T14:45:00Z', '2025-04-06T15:15:00Z', '2025-04-07T15:15:00Z'],
  },
  {
    name: 'Pacific/Apia skipped 2011-12-30: a daily 09:00 rule',
    rule: { rrule: 'DTSTART;TZID=Pacific/Apia:20111201T090000 RRULE:FREQ=DAILY' },
    after: '2011-12-29T00:00:00Z',
    expected: {
      jump: ['2011-12-29T19:00:00Z', '2011-12-30T10:00:00Z', '2011-12-30T19:00:00Z'],
      later: ['2011-12-29T19:00:00Z', '2011-12-30T19:00:00Z', '2011-12-31T19:00:00Z'],
      skip: ['2011-12-29T19:00:00Z', '2011-12-30T19:00:00Z', '2011-12-31T19:00:00Z'],
    },
  },
  {
    name: 'EXDATE removes the times it names (in the zone, or in UTC form)',
    rule: {
      rrule: 'DTSTART;TZID=Europe/Berlin:20250301T090000 RRULE:FREQ=DAILY;COUNT=6 EXDATE;TZID=Europe/Berlin:20250302T090000,20250304T090000 EXDATE:20250305T080000Z',
    },
    after: '2025-02-28T00:00:00Z',
    count: 5,
    expected: ['2025-03-01T08:00:00Z', '2025-03-03T08:00:00Z', '2025-03-06T08:00:00Z'],
  },
  {
    name: 'RDATE adds times, in order with the rule’s',
    rule: { rrule: 'DTSTART;TZID=Europe/Berlin:20250301T090000 RRULE:FREQ=WEEKLY;COUNT=2 RDATE;TZID=Europe/Berlin:20250305T120000 RDATE:20250310T120000Z' },
    after: '2025-02-28T00:00:00Z',
    count: 5,
    expected: ['2025-03-01T08:00:00Z', '2025-03-05T11:00:00Z', '2025-03-08T08:00:00Z', '2025-03-10T12:00:00Z'],
  },
  {
    name: 'RDATE in a spring-forward gap follows spring_forward',
    rule: { rrule: 'DTSTART;TZID=Europe/Berlin:20250301T090000 RRULE:FREQ=DAILY;COUNT=1 RDATE;TZID=Europe/Berlin:20250330T023000' },
    after: '2025-03-02T00:00:00Z',
    expected: { jump: ['2025-03-30T01:00:00Z'], later: ['2025-03-30T01:30:00Z'], skip: [] },
  },
  {
    name: 'EXRULE removes the times its rule gives',
    rule: { rrule: 'DTSTART:20250106T090000Z RRULE:FREQ=DAILY;COUNT=7 EXRULE:FREQ=WEEKLY;BYDAY=SA,SU' },
    after: '2025-01-01T00:00:00Z',
    count: 10,
    expected: ['2025-01-06T09:00:00Z', '2025-01-07T09:00:00Z', '2025-01-08T09:00:00Z', '2025-01-09T09:00:00Z', '2025-01-10T09:00:00Z'],
  },
  {
    name: 'COUNT runs out: fewer fires than asked for',
    rule: { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY;COUNT=3' },
    after: '2024-12-31T00:00:00Z',
    count: 5,
    expected: ['2025-01-01T09:00:00Z', '2025-01-02T09:00:00Z', '2025-01-03T09:00:00Z'],
  },
  {
    name: 'COUNT already spent: no fire left',
    rule: { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY;COUNT=3' },
    after: '2025-01-03T09:00:00Z',
    expected: [],
  },
  {
    name: 'UNTIL in UTC form ends the rule at that instant, read in the zone',
    rule: { rrule: 'DTSTART;TZID=America/New_York:20250101T090000 RRULE:FREQ=DAILY;UNTIL=20250103T140000Z' },
    after: '2024-12-31T00:00:00Z',
    count: 5,
    expected: ['2025-01-01T14:00:00Z', '2025-01-02T14:00:00Z', '2025-01-03T14:00:00Z'],
  },
  {
    name: 'UNTIL just before a time leaves it out',
    rule: { rrule: 'DTSTART;TZID=America/New_York:20250101T090000 RRULE:FREQ=DAILY;UNTIL=20250103T135959Z' },
    after: '2024-12-31T00:00:00Z',
    count: 5,
    expected: ['2025-01-01T14:00:00Z', '2025-01-02T14:00:00Z'],
  },
  {
    name: 'Feb 29: a yearly rule from a 29 February fires only in leap years',
    rule: { rrule: 'DTSTART:20240229T090000Z\r\nRRULE:FREQ=YEARLY' },
    after: '2024-03-01T00:00:00Z',
    expected: ['2028-02-29T09:00:00Z', '2032-02-29T09:00:00Z', '2036-02-29T09:00:00Z'],
  },
  {
    name: 'Feb 29: a monthly rule on the 29th skips February outside leap years',
    rule: { rrule: 'DTSTART;TZID=Europe/Berlin:20250129T090000 RRULE:FREQ=MONTHLY;BYMONTHDAY=29' },
    after: '2025-01-01T00:00:00Z',
    expected: ['2025-01-29T08:00:00Z', '2025-03-29T08:00:00Z', '2025-04-29T07:00:00Z'],
  },
  {
    name: 'Feb 29: the last day of February is the 29th in a leap year',
    rule: { rrule: 'DTSTART:20270228T090000Z RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=-1' },
    after: '2027-03-01T00:00:00Z',
    expected: ['2028-02-29T09:00:00Z', '2029-02-28T09:00:00Z', '2030-02-28T09:00:00Z'],
  },
  {
    name: 'DTSTART is the first occurrence even when the rule would not give it, and the first of COUNT',
    rule: { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=WEEKLY;BYDAY=MO;COUNT=2' },
    after: '2024-12-31T00:00:00Z',
    count: 5,
    expected: ['2025-01-01T09:00:00Z', '2025-01-06T09:00:00Z'],
  },
  {
    name: 'a secondly rule with INTERVAL=3, a year after its DTSTART',
    rule: { rrule: 'DTSTART:20240101T000000Z RRULE:FREQ=SECONDLY;INTERVAL=3' },
    after: '2025-03-01T00:00:01Z',
    expected: ['2025-03-01T00:00:03Z', '2025-03-01T00:00:06Z', '2025-03-01T00:00:09Z'],
  },
];

function table(kind: string, rows: Row[]) {
  describe(kind, () => {
    for (const row of rows) {
      if (Array.isArray(row.expected)) {
        const expected = row.expected;
        test.each(['jump', 'later', 'skip'] as const)(`${row.name} (spring_forward %s)`, (springForward) => {
          expect(fires({ ...row.rule, spring_forward: springForward }, row.after, row.count)).toEqual(expected);
        });
      } else {
        const byPolicy = row.expected;
        test.each(['jump', 'later', 'skip'] as const)(`${row.name} (spring_forward %s)`, (springForward) => {
          expect(fires({ ...row.rule, spring_forward: springForward }, row.after, row.count)).toEqual(byPolicy[springForward]);
        });
      }
    }
  });
}

table('cron, read in the schedule’s zone', CRON_ROWS);
table('rrule (RFC 5545)', RRULE_ROWS);

describe('defaults and zones', () => {
  test('cron jumps and rrule runs later by default', () => {
    expect(scheduleCalendar({ cron: '0 9 * * *' }, 'UTC').springForward).toBe('jump');
    expect(scheduleCalendar({ rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY' }, 'UTC').springForward).toBe('later');
  });

  test('a rule naming no zone is read in the fallback (the server’s) zone', () => {
    const calendar = scheduleCalendar({ cron: '0 9 * * *' }, 'Europe/Berlin');
    expect(calendar.zone).toBe('Europe/Berlin');
    expect(calendar.firesAfter(new Date('2025-01-01T00:00:00Z'), 1)).toEqual([new Date('2025-01-01T08:00:00Z')]);
  });

  test('a TZID on DTSTART sets the zone when none is sent', () => {
    expect(scheduleCalendar({ rrule: 'DTSTART;TZID=Asia/Tokyo:20250101T090000 RRULE:FREQ=DAILY' }, 'Europe/Berlin').zone).toBe('Asia/Tokyo');
  });

  test('a DTSTART in UTC form reads the rule in UTC when no zone is sent', () => {
    expect(scheduleCalendar({ rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY' }, 'Europe/Berlin').zone).toBe('UTC');
  });

  test('a floating DTSTART is read in the zone sent', () => {
    expect(fires({ rrule: 'DTSTART:20250101T090000 RRULE:FREQ=DAILY', timezone: 'Asia/Tokyo' }, '2024-12-31T00:00:00Z', 1)).toEqual(['2025-01-01T00:00:00Z']);
  });

  test('zones are named canonically: US/Eastern is America/New_York, and a TZID that says the same agrees', () => {
    expect(canonicalZone('us/eastern')).toBe('America/New_York');
    expect(scheduleCalendar({ rrule: 'DTSTART;TZID=US/Eastern:20250101T090000 RRULE:FREQ=DAILY', timezone: 'America/New_York' }, 'UTC').zone).toBe('America/New_York');
  });

  test('a rule in UTC shows no spring gap; a 09:00 rule in Berlin never meets one', () => {
    expect(scheduleCalendar({ cron: '30 2 * * *', timezone: 'UTC' }, 'UTC').springGap(new Date('2025-01-01T00:00:00Z'))).toBeNull();
    expect(scheduleCalendar({ cron: '0 9 * * *', timezone: 'Europe/Berlin' }, 'UTC').springGap(new Date('2025-01-01T00:00:00Z'))).toBeNull();
  });
});

describe('spring gap: the next night the clocks skip one of the schedule’s times', () => {
  test('America/New_York, later', () => {
    const calendar = scheduleCalendar({ cron: '30 2 * * *', timezone: 'America/New_York', spring_forward: 'later' }, 'UTC');
    expect(calendar.springGap(new Date('2025-01-01T00:00:00Z'))).toEqual({
      date: '2025-03-09',
      from: '2025-03-09T02:00',
      to: '2025-03-09T03:00',
      at: '2025-03-09T07:00:00.000Z',
      times: ['2025-03-09T02:30'],
      fires: ['2025-03-09T07:30:00.000Z'],
    });
  });

  test('Australia/Lord_Howe, whose clocks jump 30 minutes; skip fires nothing', () => {
    const calendar = scheduleCalendar({ cron: '*/10 2 * * *', timezone: 'Australia/Lord_Howe', spring_forward: 'skip' }, 'UTC');
    expect(calendar.springGap(new Date('2025-06-01T00:00:00Z'))).toEqual({
      date: '2025-10-05',
      from: '2025-10-05T02:00',
      to: '2025-10-05T02:30',
      at: '2025-10-04T15:30:00.000Z',
      times: ['2025-10-05T02:00', '2025-10-05T02:10', '2025-10-05T02:20'],
      fires: [],
    });
  });

  test('Pacific/Apia skipped a whole day', () => {
    const calendar = scheduleCalendar({ cron: '0 9 * * *', timezone: 'Pacific/Apia' }, 'UTC');
    expect(calendar.springGap(new Date('2011-12-01T00:00:00Z'))).toMatchObject({
      date: '2011-12-30',
      from: '2011-12-30T00:00',
      to: '2011-12-31T00:00',
      at: '2011-12-30T10:00:00.000Z',
      times: ['2011-12-30T09:00'],
      fires: ['2011-12-30T10:00:00.000Z'],
    });
  });

  test('a night that skips none of the rule’s times is passed over for one that does', () => {
    // The 10th at 02:30 New York time meets the gap only when the clocks change on the 10th: in 2030.
    const calendar = scheduleCalendar({ rrule: 'DTSTART;TZID=America/New_York:20250110T023000 RRULE:FREQ=MONTHLY;BYMONTHDAY=10' }, 'UTC');
    expect(calendar.springGap(new Date('2025-01-01T00:00:00Z'))).toMatchObject({ date: '2030-03-10', times: ['2030-03-10T02:30'], fires: ['2030-03-10T07:30:00.000Z'] });
  });
});

describe('rules refused, naming the field', () => {
  const refused = (rule: CalendarRule): CalendarError => {
    try {
      scheduleCalendar(rule, 'UTC');
    } catch (err) {
      if (err instanceof CalendarError) return err;
      throw err;
    }
    throw new Error('the rule was accepted');
  };

  test.each([
    ['both cron and rrule', { cron: '0 9 * * *', rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY' }, 'rrule', /not both/],
    ['neither', {}, 'cron', /needs cron or rrule/],
    ['a zone that is not IANA', { cron: '0 9 * * *', timezone: 'Mars/Olympus' }, 'timezone', /not an IANA/],
    ['a TZID that disagrees with timezone', { rrule: 'DTSTART;TZID=Europe/Berlin:20250101T090000 RRULE:FREQ=DAILY', timezone: 'America/New_York' }, 'rrule', /disagrees with timezone America\/New_York/],
    ['an EXDATE TZID that disagrees', { rrule: 'DTSTART;TZID=Europe/Berlin:20250101T090000 RRULE:FREQ=DAILY EXDATE;TZID=Asia/Tokyo:20250102T090000' }, 'rrule', /disagrees/],
    ['a DTSTART in UTC form with another timezone', { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY', timezone: 'Europe/Berlin' }, 'rrule', /UTC .*disagrees/],
    ['a bad cron', { cron: '61 * * * *' }, 'cron', /minute/],
    ['a cron with too few fields', { cron: '* * *' }, 'cron', /cron/],
    ['no DTSTART', { rrule: 'RRULE:FREQ=DAILY' }, 'rrule', /DTSTART/],
    ['no RRULE', { rrule: 'DTSTART:20250101T090000Z RDATE:20250102T090000Z' }, 'rrule', /RRULE/],
    ['two DTSTARTs', { rrule: 'DTSTART:20250101T090000Z DTSTART:20250102T090000Z RRULE:FREQ=DAILY' }, 'rrule', /more than one DTSTART/],
    ['an unknown property', { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY SUMMARY:x' }, 'rrule', /SUMMARY/],
    ['a date that does not exist', { rrule: 'DTSTART:20250230T090000Z RRULE:FREQ=DAILY' }, 'rrule', /DTSTART/],
    ['an unknown RRULE part', { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY;FOO=1' }, 'rrule', /FOO/],
    ['COUNT that is not a number', { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY;COUNT=x' }, 'rrule', /COUNT/],
    ['a day that is not a day', { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY;BYDAY=XX' }, 'rrule', /BYDAY/],
    ['an hour out of range', { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=MINUTELY;BYHOUR=25' }, 'rrule', /BYHOUR/],
    ['a leap second', { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=SECONDLY;BYSECOND=60' }, 'rrule', /BYSECOND/],
    ['an INTERVAL that never reaches BYHOUR', { rrule: 'DTSTART:20250101T000000Z RRULE:FREQ=HOURLY;INTERVAL=2;BYHOUR=3' }, 'rrule', /never reaches/],
    ['a PERIOD RDATE', { rrule: 'DTSTART:20250101T090000Z RRULE:FREQ=DAILY RDATE;VALUE=PERIOD:20250102T090000Z/PT1H' }, 'rrule', /PERIOD/],
    ['a bad spring_forward', { cron: '0 9 * * *', spring_forward: 'sideways' as SpringForward }, 'spring_forward', /spring_forward/],
  ])('%s', (_name, rule, field, message) => {
    const err = refused(rule as CalendarRule);
    expect(err.field).toBe(field);
    expect(err.message).toMatch(message);
  });

  test('an INTERVAL whose steps do reach BYHOUR is accepted', () => {
    expect(fires({ rrule: 'DTSTART:20250101T010000Z RRULE:FREQ=HOURLY;INTERVAL=2;BYHOUR=3' }, '2025-01-01T01:00:00Z', 2)).toEqual(['2025-01-01T03:00:00Z', '2025-01-02T03:00:00Z']);
  });
});

describe('rules with no fire left answer quickly', () => {
  test.each([
    ['a day that never comes', 'DTSTART:20250101T000000Z RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30'],
    ['a yearly 30 February', 'DTSTART:20250101T000000Z RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30'],
    ['an EXRULE that removes every time', 'DTSTART:20250101T000000Z RRULE:FREQ=SECONDLY EXRULE:FREQ=SECONDLY'],
  ])('%s', (_name, rrule) => {
    const { value, ms } = cpuTimed(() => fires({ rrule }, '2025-03-01T00:00:00Z', 1));
    expect(value).toEqual([]);
    // Bounded by the walk's 50,000 times (about 2 s of CPU on a quiet machine, 26 s seen on a slow
    // VM beside the rest of the suite); unbounded it would never end, so any finite bound tells.
    expect(ms).toBeLessThan(60_000);
  });

  test('a cron for 30 February has no fire', () => {
    expect(fires({ cron: '0 0 30 2 *' }, '2025-03-01T00:00:00Z', 1)).toEqual([]);
  });
});

describe('long-running rules', () => {
  test('a minutely rule a year old finds its next fire without walking the year', () => {
    const { value, ms } = cpuTimed(() => fires({ rrule: 'DTSTART:20240101T000000Z RRULE:FREQ=MINUTELY' }, '2025-03-01T00:00:30Z', 2));
    expect(value).toEqual(['2025-03-01T00:01:00Z', '2025-03-01T00:02:00Z']);
    expect(ms).toBeLessThan(500);
  });

  test('BYHOUR limits a minutely rule to its hours, keeping DTSTART’s beat (RFC 5545)', () => {
    // Every 13 minutes from 04:05:06 on 3 January: on 20 July, 09:03:06 is 22,066 steps on.
    expect(fires({ rrule: 'DTSTART:20240103T040506Z RRULE:FREQ=MINUTELY;INTERVAL=13;BYHOUR=9,10' }, '2024-07-19T11:00:00Z', 6)).toEqual([
      '2024-07-20T09:03:06Z',
      '2024-07-20T09:16:06Z',
      '2024-07-20T09:29:06Z',
      '2024-07-20T09:42:06Z',
      '2024-07-20T09:55:06Z',
      '2024-07-20T10:08:06Z',
    ]);
  });

  test('BYHOUR and BYMINUTE limit a secondly rule, keeping DTSTART’s beat', () => {
    expect(fires({ rrule: 'DTSTART:20240101T000001Z RRULE:FREQ=SECONDLY;INTERVAL=7;BYHOUR=12;BYMINUTE=30' }, '2024-01-01T12:00:00Z', 3)).toEqual([
      '2024-01-01T12:30:04Z',
      '2024-01-01T12:30:11Z',
      '2024-01-01T12:30:18Z',
    ]);
  });

  // Starting a rule nearer than its DTSTART must not change its times: checked against rrule
  // walking from DTSTART, for rules of each fixed-length frequency with BY parts and intervals.
  test.each([
    ['FREQ=SECONDLY;INTERVAL=7', '2024-01-09T11:00:00Z'],
    ['FREQ=MINUTELY;INTERVAL=13;BYMINUTE=5,18,31', '2024-07-19T11:00:00Z'],
    ['FREQ=HOURLY;INTERVAL=5', '2024-07-19T11:00:00Z'],
    ['FREQ=DAILY;INTERVAL=3;BYHOUR=6,18;BYMINUTE=15', '2024-07-19T11:00:00Z'],
    ['FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH;WKST=SU', '2024-07-19T11:00:00Z'],
    ['FREQ=WEEKLY;BYDAY=MO,TU,WE;BYSETPOS=-1', '2024-07-19T11:00:00Z'],
  ])('%s gives the times rrule gives from DTSTART', (rule, afterText) => {
    const dtstart = new Date('2024-01-03T04:05:06Z');
    const after = new Date(afterText);
    // The first six of the window: rrule stops walking once the iterator says so.
    const reference = new RRule({ ...RRule.parseString(rule), dtstart, tzid: null }).between(after, new Date(after.getTime() + 60 * 24 * 3600_000), false, (_, count) => count < 6);
    expect(reference).toHaveLength(6);
    expect(fires({ rrule: `DTSTART:20240103T040506Z RRULE:${rule}` }, after.toISOString(), 6)).toEqual(
      reference.map((d) => d.toISOString().replace('.000Z', 'Z')),
    );
  });
});

/**
 * A cron matcher written from crontab(5) as Vixie cron and cronie read a five-field line, one
 * minute at a time: each field a comma-separated list of `*`, a number, or a range `a-b`, each
 * optionally stepped `/n`; month and weekday names; 0 and 7 are Sunday. The day is told by two
 * fields: when both are restricted (neither starts with `*`), a day matching either runs; when
 * either starts with `*`, a day must match both (cron's DOM_STAR and DOW_STAR flags).
 */
function vixieMatcher(expression: string): (time: Date) => boolean {
  const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
  const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
  const field = (text: string, first: number, last: number, names: string[] = [], base = 0): Set<number> => {
    const values = new Set<number>();
    const number = (word: string) => {
      const named = names.indexOf(word.toLowerCase());
      return named >= 0 ? named + base : Number(word);
    };
    for (const element of text.split(',')) {
      const [range, stepText] = element.split('/');
      const step = stepText === undefined ? 1 : Number(stepText);
      const [low, high] = range === '*' ? [first, last] : range.includes('-') ? range.split('-').map(number) : [number(range), stepText === undefined ? number(range) : last];
      for (let v = low; v <= high; v += step) values.add(v);
    }
    return values;
  };
  const [minute, hour, dom, month, dow] = expression.trim().split(/\s+/);
  const minutes = field(minute, 0, 59);
  const hours = field(hour, 0, 23);
  const days = field(dom, 1, 31);
  const months = field(month, 1, 12, MONTHS, 1);
  const weekdays = field(dow, 0, 7, DAYS);
  if (weekdays.has(7)) weekdays.add(0);
  const eitherStar = dom.startsWith('*') || dow.startsWith('*');
  return (time) => {
    const dayOfMonth = days.has(time.getUTCDate());
    const dayOfWeek = weekdays.has(time.getUTCDay());
    const day = eitherStar ? dayOfMonth && dayOfWeek : dayOfMonth || dayOfWeek;
    return minutes.has(time.getUTCMinutes()) && hours.has(time.getUTCHours()) && months.has(time.getUTCMonth() + 1) && day;
  };
}

/** The first `count` minutes after `after` (UTC) a matcher accepts, looking up to `days` ahead. */
function matchedMinutes(matches: (time: Date) => boolean, after: string, count: number, days = 2200): string[] {
  const found: string[] = [];
  const start = Math.floor(Date.parse(after) / 60_000) * 60_000 + 60_000;
  for (let t = start; found.length < count && t < start + days * 86_400_000; t += 60_000) {
    const time = new Date(t);
    if (matches(time)) found.push(time.toISOString().replace('.000Z', 'Z'));
  }
  return found;
}

describe('cron day fields as Vixie cron and cronie read them (crontab(5))', () => {
  test.each([
    // Either day field starting with `*`: both must match.
    ['0 12 */2 * 1', 'odd days that are Mondays'],
    ['0 0 1 * */3', 'the first of the month when it is a Sunday, Wednesday or Saturday'],
    ['0 0 */10 * 0-2', 'days 1, 11, 21, 31 that fall Sunday to Tuesday'],
    ['0 0 * * */2', 'Sundays, Tuesdays, Thursdays and Saturdays'],
    ['0 12 */2 * *', 'odd days'],
    ['15 6 *,15 * 5', 'a day field starting with * that lists more'],
    // Both restricted: either matches.
    ['0 12 1-7 * 1', 'the first seven days, and every Monday'],
    ['0 0 13 * 5', 'the 13th, and every Friday'],
    ['30 4 1,15 * 5', 'the 1st and 15th, and every Friday'],
    ['0 0 31 * 7', 'the 31st, and every Sunday (7)'],
    ['0 0 29 2 1', 'in February: the 29th, and every Monday'],
    ['0 0 1-31/2 * 1', 'a stepped range that is no star: odd days, or Mondays'],
    // One day field alone, and the other fields.
    ['0 12 * * 1', 'Mondays'],
    ['0 12 15 * *', 'the 15th'],
    ['*/15 9-17 * * 1-5', 'quarter hours of office hours on weekdays'],
    ['23 0-20/2 * * *', 'every other hour from midnight to 20:00'],
    ['0 9 * jul mon', 'Mondays in July, by name'],
    ['5 4 * * sun', 'Sundays, by name'],
  ])('%s: %s', (expression) => {
    const after = '2027-01-01T00:00:00Z';
    const expected = matchedMinutes(vixieMatcher(expression), after, 16);
    expect(expected).toHaveLength(16);
    expect(fires({ cron: expression, timezone: 'UTC' }, after, 16)).toEqual(expected);
  });

  test('the matcher itself: 0 12 */2 * 1 fires on odd-dated Mondays only', () => {
    expect(matchedMinutes(vixieMatcher('0 12 */2 * 1'), '2027-01-01T00:00:00Z', 3)).toEqual(['2027-01-11T12:00:00Z', '2027-01-25T12:00:00Z', '2027-02-01T12:00:00Z']);
  });
});

/**
 * COUNT against python-dateutil 2.9's rrule (an independent RFC 5545 reading), recorded here so the
 * test needs no Python: each row's times are what
 *   python3 -c 'from dateutil.rrule import rrulestr; print([d.isoformat() for d in rrulestr(TEXT)])'
 * prints for the row's TEXT. COUNT counts the times the whole rule gives, after BYHOUR, BYMINUTE
 * and BYSECOND have limited a MINUTELY or SECONDLY rule.
 */
const DATEUTIL_COUNTED: [string, string, string[]][] = [
  [
    "the example: every 13 minutes in hours 9 and 10",
    "DTSTART:20270105T090500Z\nRRULE:FREQ=MINUTELY;INTERVAL=13;BYHOUR=9,10;COUNT=20",
    [
      "2027-01-05T09:05:00Z", "2027-01-05T09:18:00Z", "2027-01-05T09:31:00Z", "2027-01-05T09:44:00Z",
      "2027-01-05T09:57:00Z", "2027-01-05T10:10:00Z", "2027-01-05T10:23:00Z", "2027-01-05T10:36:00Z",
      "2027-01-05T10:49:00Z", "2027-01-06T09:08:00Z", "2027-01-06T09:21:00Z", "2027-01-06T09:34:00Z",
      "2027-01-06T09:47:00Z", "2027-01-06T10:00:00Z", "2027-01-06T10:13:00Z", "2027-01-06T10:26:00Z",
      "2027-01-06T10:39:00Z", "2027-01-06T10:52:00Z", "2027-01-07T09:11:00Z", "2027-01-07T09:24:00Z",
    ],
  ],
  [
    "every 7 seconds in minute 30 of hours 12 and 13",
    "DTSTART:20270101T123000Z\nRRULE:FREQ=SECONDLY;INTERVAL=7;BYHOUR=12,13;BYMINUTE=30;COUNT=15",
    [
      "2027-01-01T12:30:00Z", "2027-01-01T12:30:07Z", "2027-01-01T12:30:14Z", "2027-01-01T12:30:21Z",
      "2027-01-01T12:30:28Z", "2027-01-01T12:30:35Z", "2027-01-01T12:30:42Z", "2027-01-01T12:30:49Z",
      "2027-01-01T12:30:56Z", "2027-01-01T13:30:05Z", "2027-01-01T13:30:12Z", "2027-01-01T13:30:19Z",
      "2027-01-01T13:30:26Z", "2027-01-01T13:30:33Z", "2027-01-01T13:30:40Z",
    ],
  ],
  [
    "every 25 minutes in hours 6 and 18, starting in one",
    "DTSTART:20270301T061000Z\nRRULE:FREQ=MINUTELY;INTERVAL=25;BYHOUR=6,18;COUNT=12",
    [
      "2027-03-01T06:10:00Z", "2027-03-01T06:35:00Z", "2027-03-01T18:15:00Z", "2027-03-01T18:40:00Z",
      "2027-03-02T06:20:00Z", "2027-03-02T06:45:00Z", "2027-03-02T18:00:00Z", "2027-03-02T18:25:00Z",
      "2027-03-02T18:50:00Z", "2027-03-03T06:05:00Z", "2027-03-03T06:30:00Z", "2027-03-03T06:55:00Z",
    ],
  ],
  [
    "every 5 hours on the half hour",
    "DTSTART:20270101T013000Z\nRRULE:FREQ=HOURLY;INTERVAL=5;BYMINUTE=30;COUNT=10",
    [
      "2027-01-01T01:30:00Z", "2027-01-01T06:30:00Z", "2027-01-01T11:30:00Z", "2027-01-01T16:30:00Z",
      "2027-01-01T21:30:00Z", "2027-01-02T02:30:00Z", "2027-01-02T07:30:00Z", "2027-01-02T12:30:00Z",
      "2027-01-02T17:30:00Z", "2027-01-02T22:30:00Z",
    ],
  ],
  [
    "daily at 09:00 and 17:00",
    "DTSTART:20270101T090000Z\nRRULE:FREQ=DAILY;BYHOUR=9,17;COUNT=7",
    [
      "2027-01-01T09:00:00Z", "2027-01-01T17:00:00Z", "2027-01-02T09:00:00Z", "2027-01-02T17:00:00Z",
      "2027-01-03T09:00:00Z", "2027-01-03T17:00:00Z", "2027-01-04T09:00:00Z",
    ],
  ],
  [
    "the 31st of each month",
    "DTSTART:20270131T100000Z\nRRULE:FREQ=MONTHLY;BYMONTHDAY=31;COUNT=4",
    [
      "2027-01-31T10:00:00Z", "2027-03-31T10:00:00Z", "2027-05-31T10:00:00Z", "2027-07-31T10:00:00Z",
    ],
  ],
];

/**
 * A DTSTART the rule would not give is the first of its COUNT occurrences (RFC 5545 3.3.10: "The
 * DTSTART property value always counts as the first occurrence"). dateutil leaves such a DTSTART
 * out, so the rest is its answer for COUNT - 1, recorded as above for `DTSTART` + `RRULE;COUNT=<COUNT - 1>`.
 */
const DATEUTIL_OFF_PATTERN: [string, string, string, number, string[]][] = [
  [
    "a Monday DTSTART for Tuesdays and Thursdays",
    "DTSTART:20270104T090000Z",
    "RRULE:FREQ=WEEKLY;BYDAY=TU,TH",
    5,
    [
      "2027-01-05T09:00:00Z", "2027-01-07T09:00:00Z", "2027-01-12T09:00:00Z", "2027-01-14T09:00:00Z",
    ],
  ],
  [
    "an 08:00 DTSTART for every 13 minutes in hours 9 and 10",
    "DTSTART:20270105T080000Z",
    "RRULE:FREQ=MINUTELY;INTERVAL=13;BYHOUR=9,10",
    10,
    [
      "2027-01-05T09:05:00Z", "2027-01-05T09:18:00Z", "2027-01-05T09:31:00Z", "2027-01-05T09:44:00Z",
      "2027-01-05T09:57:00Z", "2027-01-05T10:10:00Z", "2027-01-05T10:23:00Z", "2027-01-05T10:36:00Z",
      "2027-01-05T10:49:00Z",
    ],
  ],
  [
    "a DTSTART on the 15th for the last day of each month",
    "DTSTART:20270115T120000Z",
    "RRULE:FREQ=MONTHLY;BYMONTHDAY=-1",
    4,
    [
      "2027-01-31T12:00:00Z", "2027-02-28T12:00:00Z", "2027-03-31T12:00:00Z",
    ],
  ],
];

describe('RRULE COUNT, compared with python-dateutil', () => {
  test.each(DATEUTIL_COUNTED)('%s', (_name, text, expected) => {
    expect(fires({ rrule: text }, '2026-12-31T00:00:00Z', expected.length + 5)).toEqual(expected);
  });

  test.each(DATEUTIL_OFF_PATTERN)('%s: DTSTART is the first of COUNT', (_name, dtstart, rule, count, rest) => {
    const first = `${dtstart.slice('DTSTART:'.length, 'DTSTART:'.length + 4)}-${dtstart.slice(12, 14)}-${dtstart.slice(14, 16)}T${dtstart.slice(17, 19)}:${dtstart.slice(19, 21)}:${dtstart.slice(21, 23)}Z`;
    const expected = [first, ...rest];
    expect(expected).toHaveLength(count);
    expect(fires({ rrule: `${dtstart}\n${rule};COUNT=${count}` }, '2026-12-31T00:00:00Z', count + 5)).toEqual(expected);
    // An EXDATE removes DTSTART from the fires, not from the count.
    expect(fires({ rrule: `${dtstart}\n${rule};COUNT=${count}\nEXDATE:${dtstart.slice('DTSTART:'.length)}` }, '2026-12-31T00:00:00Z', count + 5)).toEqual(rest);
  });

  test('the preview says a COUNT rule finished only when its COUNT times are spent', () => {
    const text = DATEUTIL_COUNTED[0][1];
    const all = fires({ rrule: text }, '2026-12-31T00:00:00Z', 50);
    expect(all).toHaveLength(20);
    expect(fires({ rrule: text }, all[14], 50)).toEqual(all.slice(15));
  });
});
