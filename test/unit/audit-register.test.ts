import { registerChanges, registerPeriod, renderRegister } from '../../core/audit/register';

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

test('the document escapes everything a user wrote, holds no script and links nothing outside itself', () => {
  const at = new Date('2026-01-01T00:00:00Z');
  const html = renderRegister({
    install_id: 'ins_1',
    generated_at: at,
    generated_by: 'admin',
    period: { from: at, to: new Date('2026-01-02T00:00:00Z'), defaulted: false },
    chain_head: { seq: 3, hash: 'a'.repeat(64) },
    total_runs: 2,
    runs: [
      { id: 'run_1', kind: 'run', tool: 'bash', status: 'failed', change_label: '<script>alert(1)</script>', requested_by: '"><img src=x onerror=alert(2)>', template_id: null, template_name: null, parent_run_id: null, step_name: null, created_at: at, finished_at: at, error: '</td><script>x</script>' },
    ],
    decisions: [
      { id: 'd1', run_id: 'run_1', kind: 'approve', decision_id: null, actor: 'a', actor_kind: 'agent', reason: '<b>ok</b>\u001b[31m', commitment: 'sha256:x', at, redacted_at: null, redacted_by: null, redaction_category: null, seq: 2, redaction_seq: null },
    ],
    entries: [],
  });
  expect(html).not.toMatch(/<script|<img|onerror=alert\(2\)>/i);
  expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
  expect(html).toContain('&lt;b&gt;ok&lt;/b&gt;\u241b[31m');
  expect(html).not.toMatch(/(src|href)=["']?(https?:)?\/\//i);
  expect(html).toContain('The period holds 2 runs; this register lists the first 1.');
  expect(html).toContain('Approved by <code>a</code> (agent)');
});
