import { registerChanges, registerPeriod } from '../../core/audit/register';

/** The change register's period and grouping (core/audit/register.ts). */

const now = new Date('2026-11-26T12:00:00Z');

test('the period: the last 90 days by default; dates cover whole UTC days; RFC 3339 with its offset; one bound alone', () => {
  expect(registerPeriod({}, now)).toEqual({ from: new Date('2026-08-28T12:00:00Z'), to: now, defaulted: true });
  expect(registerPeriod({ from: '2026-01-01', to: '2026-01-01' }, now)).toEqual({ from: new Date('2026-01-01T00:00:00Z'), to: new Date('2026-01-02T00:00:00Z'), defaulted: false });
  expect(registerPeriod({ from: '2026-01-01T09:00:00+01:00', to: '2026-01-01T10:00:00.5Z' }, now)).toMatchObject({ from: new Date('2026-01-01T08:00:00Z'), to: new Date('2026-01-01T10:00:00.500Z') });
  expect(registerPeriod({ from: '2026-11-01' }, now)).toMatchObject({ from: new Date('2026-11-01T00:00:00Z'), to: now });
  expect(registerPeriod({ to: '2026-03-31' }, now)).toMatchObject({ from: new Date('2026-01-01T00:00:00Z'), to: new Date('2026-04-01T00:00:00Z') });
  for (const [query, field] of [
    [{ from: '2026-02-29' }, 'from'],
    [{ to: '26-01-01' }, 'to'],
    [{ from: '2026-01-01 10:00:00Z' }, 'from'],
    [{ from: '2026-01-01T10:00:00' }, 'from'],
    [{ from: '2026-01-02', to: '2026-01-01' }, 'to'],
    [{ from: '2030-01-01' }, 'to'],
  ] as const) {
    expect(() => registerPeriod(query, now)).toThrow(expect.objectContaining({ details: { field } }));
  }
});

test('changes: grouped by label, oldest first, unlabelled last, each with its outcome and actors', () => {
  const run = (id: string, label: string | null, status: string, at: string, by = 'alice') =>
    ({ id, kind: 'run', tool: 'bash', status, change_label: label, requested_by: by, template_id: null, template_name: null, parent_run_id: null, step_name: null, created_at: new Date(at), finished_at: new Date(at), error: null }) as never;
  const changes = registerChanges([
    run('r1', null, 'succeeded', '2026-01-01T00:00:00Z'),
    run('r2', 'B', 'failed', '2026-01-02T00:00:00Z', 'bob'),
    run('r3', 'A', 'succeeded', '2026-01-03T00:00:00Z'),
    run('r4', 'B', 'succeeded', '2026-01-04T00:00:00Z'),
  ]);
  expect(changes.map((c) => [c.label, c.outcome, c.runs.map((r) => r.id), c.actors])).toEqual([
    ['B', 'partial', ['r2', 'r4'], ['alice', 'bob']],
    ['A', 'succeeded', ['r3'], ['alice']],
    [null, 'succeeded', ['r1'], ['alice']],
  ]);
});
