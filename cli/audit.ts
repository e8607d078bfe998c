import { readFileSync } from 'node:fs';
import { verifyAuditDocument, type OfflineReport } from '../core/audit/audit-offline';
import { ConfigError } from '../core/config';
import { lendMerkleThreads } from '../services/audit/merkle-threads';

const USAGE = 'usage: cairn audit verify --seal <seal.json> <bundle-or-receipt-file>';

/**
 * `cairn audit verify --seal <seal.json> <file>`: checks an audit bundle or a run receipt offline
 * against the key pinned in a seal document (`GET /.well-known/seal.json`) or a bare JWK. Needs no
 * server and no database. Prints what it checked; exits 0 when everything holds, 1 naming each
 * problem and where it is, 2 for a usage fault (ConfigError, see cli/main.ts).
 */
export async function runAuditCommand(args: string[], out: (line: string) => void = (line) => process.stdout.write(`${line}\n`)): Promise<void> {
  const [sub, ...rest] = args;
  if (sub !== 'verify') throw new ConfigError(USAGE);
  let sealPath: string | undefined;
  const files: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === '--seal') {
      sealPath = rest[++i];
      if (sealPath === undefined) throw new ConfigError(`--seal needs a file\n${USAGE}`);
    } else if (arg.startsWith('--seal=')) {
      sealPath = arg.slice('--seal='.length);
    } else if (arg.startsWith('--')) {
      throw new ConfigError(`unknown flag ${arg}\n${USAGE}`);
    } else {
      files.push(arg);
    }
  }
  if (!sealPath) throw new ConfigError(`--seal is required: the seal document (GET /.well-known/seal.json) or a JWK pinned for the install\n${USAGE}`);
  if (files.length !== 1) throw new ConfigError(`name exactly one bundle or receipt file\n${USAGE}`);

  const seal = readJson(sealPath, 'seal');
  const document = readText(files[0], 'document');
  lendMerkleThreads();
  const report = await verifyAuditDocument(document, seal);
  printReport(files[0], report, out);
  if (!report.ok) process.exitCode = 1;
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read the ${what} file ${path}: ${(err as Error).message}`);
  }
}

function readJson(path: string, what: string): unknown {
  const text = readText(path, what);
  try {
    return JSON.parse(text);
  } catch {
    throw new ConfigError(`the ${what} file ${path} is not JSON (expected a seal document or a JWK)`);
  }
}

function printReport(file: string, report: OfflineReport, out: (line: string) => void): void {
  out(`${file}: ${report.kind === 'unknown' ? 'audit document' : report.kind === 'bundle' ? 'audit bundle' : 'run receipt'}`);
  for (const line of report.checked) out(`  ok    ${line}`);
  for (const problem of report.problems) out(`  FAIL  ${problem.where}: ${problem.detail}`);
  out(report.summary);
}
