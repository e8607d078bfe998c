import { renderTable } from '../../bench/report';

/** The ratio column of the table's one row. */
function ratioOf(value: number, baseline: number): string {
  const table = renderTable([{ metric: 'figure', value, baseline, unit: 'ms' }]);
  const row = table.split('\n')[2];
  return row.trim().split(/\s{2,}/)[3];
}

describe("the benchmark table's ratio", () => {
  test('is the value over its baseline', () => {
    expect(ratioOf(84.4, 53.1)).toBe('x1.59');
    expect(ratioOf(609, 8)).toBe('x76');
  });

  test('is "-" where the baseline is zero or below it, where no ratio means anything', () => {
    expect(ratioOf(13.6, 0)).toBe('-');
    expect(ratioOf(13.6, -0.0001)).toBe('-');
    expect(ratioOf(8.08, -0.19)).toBe('-');
  });
});
