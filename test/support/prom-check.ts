import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { machineCacheDir } from '../../embedded/machine-cache';
import { goBuildInto, isExecutable, onPath } from '../../embedded/temporal-binary';

/**
 * A Prometheus text exposition read by the Prometheus project's own parser and linter, not by
 * Cairn's code: test/support/prom-check (Go) parses it with github.com/prometheus/common/expfmt
 * and lints it with promlint, the rules `promtool check metrics` applies. It is built from its Go
 * module once per machine, into the machine cache (embedded/machine-cache.ts) under a hash of its
 * sources, as the Temporal CLI is.
 */

const SOURCE_DIR = path.join(__dirname, 'prom-check');
const SOURCES = ['main.go', 'go.mod', 'go.sum'];

export interface PromSample {
  labels: Record<string, string>;
  /** A counter's, gauge's or untyped sample's value; absent for +Inf, -Inf and NaN. */
  value?: number;
  /** A histogram's. */
  count?: number;
  sum?: number;
  buckets?: { le: string; count: number }[];
}

export interface PromFamily {
  name: string;
  /** `COUNTER`, `GAUGE`, `HISTOGRAM`, `SUMMARY` or `UNTYPED`. */
  type: string;
  help: string;
  samples: PromSample[];
}

export interface PromReport {
  families: PromFamily[];
  /** What promlint finds wrong, one per metric and rule. */
  problems: { metric: string; text: string }[];
}

async function checkerPath(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of SOURCES) hash.update(`${file}\0`).update(await fs.readFile(path.join(SOURCE_DIR, file))).update('\0');
  const target = path.join(machineCacheDir(), 'prom-check', hash.digest('hex').slice(0, 16), 'prom-check');
  if (await isExecutable(target)) return target;
  const go = (await onPath('go')) ?? ((await isExecutable('/usr/local/go/bin/go')) ? '/usr/local/go/bin/go' : undefined);
  if (!go) throw new Error('checking /metrics needs the Go toolchain to build test/support/prom-check');
  return goBuildInto(go, SOURCE_DIR, '.', target, { ...process.env, GOFLAGS: `${process.env.GOFLAGS ?? ''} -buildvcs=false`.trim() });
}

/** Parses and lints `text`; rejects naming the parser's error when it does not parse. */
export async function checkExposition(text: string): Promise<PromReport> {
  const checker = await checkerPath();
  return new Promise((resolve, reject) => {
    const child = execFile(checker, [], { maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(stderr.trim() || err.message));
      else resolve(JSON.parse(stdout) as PromReport);
    });
    child.stdin!.end(text);
  });
}

/** The samples of one family, or a failure naming what the exposition holds instead. */
export function familyOf(report: PromReport, name: string): PromFamily {
  const found = report.families.find((f) => f.name === name);
  if (!found) throw new Error(`no ${name} in the exposition; it holds ${report.families.map((f) => f.name).join(', ')}`);
  return found;
}
