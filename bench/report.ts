import os from 'node:os';

export interface Row {
  metric: string;
  value: number;
  baseline: number;
  unit: string;
  /** A ceiling (`max`) or a floor (`min`) the value should keep to; absent for figures with none. */
  budget?: { max?: number; min?: number };
}

export interface Section {
  rows: Row[];
  /** Lines printed under the table that help read the figures (breakdowns, counts). */
  notes: string[];
}

const fmt = (n: number, unit: string) => `${n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2)} ${unit}`;

function budgetText(row: Row): string {
  if (row.budget?.max !== undefined) return `<= ${row.budget.max} ${row.unit}`;
  if (row.budget?.min !== undefined) return `>= ${row.budget.min} ${row.unit}`;
  return '-';
}

function verdict(row: Row): string {
  if (!row.budget) return '';
  const { max, min } = row.budget;
  const ok = (max === undefined || row.value <= max) && (min === undefined || row.value >= min);
  return ok ? 'PASS' : 'OVER';
}

export function machineLine(): string {
  const cpus = os.cpus();
  return `machine: ${cpus.length} cores (${cpus[0]?.model.trim() ?? 'unknown cpu'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ` +
    `${os.platform()} ${os.release()}, node ${process.version}; ${loadLine()}`;
}

/** Other work on the machine moves every figure here, baselines included; the load says how much. */
export function loadLine(): string {
  return `load average ${os.loadavg().map((n) => n.toFixed(2)).join(' ')}`;
}

/**
 * The value over its baseline; `-` where the baseline is zero or less (the bare side's share of a
 * part it does not have, a residual a tick's rounding took below zero), where no ratio means anything.
 */
function ratioText(row: Row): string {
  if (!(row.baseline > 0)) return '-';
  const ratio = row.value / row.baseline;
  return `x${ratio.toFixed(ratio >= 10 ? 0 : 2)}`;
}

/** The table every run ends with: figure, its same-run baseline, the ratio, and the budget verdict. */
export function renderTable(rows: Row[]): string {
  const header = ['metric', 'value', 'baseline', 'ratio', 'budget', 'verdict'];
  const cells = rows.map((row) => [
    row.metric,
    fmt(row.value, row.unit),
    fmt(row.baseline, row.unit),
    ratioText(row),
    budgetText(row),
    verdict(row),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (c: string[]) => c.map((v, i) => (i === 0 ? v.padEnd(widths[i]) : v.padStart(widths[i]))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.map(line)].join('\n');
}
