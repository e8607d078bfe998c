import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, SETTINGS } from '../../core/config';
import { newId } from '../../core/ids';
import { parsePolicyFile, PolicyFileError, type PolicyFileEntry, type RegoDescription } from '../../core/runs/policy-file';
import type { RegoEvaluator, RegoOutcome } from '../../core/runs/policy-gate';
import { buildRegoBundle, findOpa, OpaError, parseRegoModule, startOpaServer, type OpaAnswer, type OpaServer } from '../../embedded/opa';
import { IacBinaryUnavailable } from '../../embedded/iac-binaries';
import type { Sql } from '../../store/db';
import { replaceFilePolicies, type FilePolicy } from '../../store/policies';
import { recordMutation, serviceOrigin, unchanged } from '../audit/audit';

/**
 * The policy file's policies (`--policy-file`; the format is core/runs/policy-file.ts), loaded once
 * at start: each policy's modules parsed and built into a bundle by Open Policy Agent
 * (embedded/opa.ts), one `opa run --server` on a private unix socket serving every bundle, and the
 * policies written as rows of `policies` (with `rego`) so that the one gate and GET /v1/policies
 * read them. Any fault stops the start with a message naming the file and what is wrong.
 *
 * Each submission's facts (core/runs/policy-gate.ts SubmissionFacts, exactly) are the input of
 * every policy, evaluated at once; `data.<package>.hold` and `.warn` are read from the answer.
 */
export interface PolicyFileSet extends RegoEvaluator {
  /** The OPA sidecar's process id now (for a test that ends it to see it supervised). */
  opaPid(): number | undefined;
  stop(): Promise<void>;
}

interface LoadedPolicy {
  id: string;
  name: string;
  entry: PolicyFileEntry;
  pkg: string;
}

const where = () => `${SETTINGS.policyFile.flag} (${SETTINGS.policyFile.env})`;

export async function loadPolicyFile(file: string | undefined, sql: Sql, logger: Logger): Promise<PolicyFileSet | undefined> {
  if (!file) {
    // A start without the option ends the policies an earlier start loaded from one.
    await writeFilePolicies(sql, undefined, []);
    return undefined;
  }
  const fault = (message: string) => new ConfigError(`${where()}: ${file}: ${message}`);
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${where()}: cannot read ${file}: ${(err as Error).message}`);
  }
  let entries: PolicyFileEntry[];
  try {
    entries = parsePolicyFile(text);
  } catch (err) {
    if (err instanceof PolicyFileError) throw fault(err.message);
    throw err;
  }
  let opa: string;
  try {
    opa = await findOpa((line) => logger.info(line));
  } catch (err) {
    if (err instanceof IacBinaryUnavailable) throw fault(`Open Policy Agent is needed to evaluate it: ${err.message}`);
    throw err;
  }
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-opa-'));
  let server: OpaServer | undefined;
  try {
    const base = path.dirname(path.resolve(file));
    const described: { entry: PolicyFileEntry; pkg: string; rego: RegoDescription }[] = [];
    const rootsOf = new Map<string, string>();
    for (const [i, entry] of entries.entries()) {
      const modules: { file: string; as: string; sha256: string; pkg: string; rules: string[] }[] = [];
      for (const [j, named] of entry.modules.entries()) {
        const field = `policies[${i}].modules[${j}]`;
        const full = path.resolve(base, named);
        let source: Buffer;
        try {
          source = await fs.readFile(full);
        } catch (err) {
          throw fault(`${field}: cannot read ${named}: ${(err as Error).message}`);
        }
        let parsed: { package: string; rules: string[] };
        try {
          parsed = await parseRegoModule(opa, full, entry.syntax);
        } catch (err) {
          if (err instanceof OpaError) throw fault(`${field}: ${named} is not Rego ${entry.syntax}: ${err.message}`);
          throw err;
        }
        modules.push({ file: full, as: named, sha256: createHash('sha256').update(source).digest('hex'), pkg: parsed.package, rules: parsed.rules });
      }
      const pkg = modules[0].pkg;
      const entryRules = modules.filter((m) => m.pkg === pkg).flatMap((m) => m.rules);
      if (!entryRules.includes('hold') && !entryRules.includes('warn')) {
        throw fault(`policies[${i}] (${entry.name}): package ${pkg} of its first module defines neither a hold nor a warn rule, so it could never hold a run`);
      }
      // Each policy is its own bundle; OPA serves bundles whose packages do not overlap.
      const packages = [...new Set(modules.map((m) => m.pkg))];
      const roots = packages.filter((p) => !packages.some((q) => p.startsWith(`${q}.`)));
      for (const root of roots) {
        for (const [other, owner] of rootsOf) {
          if (root === other || root.startsWith(`${other}.`) || other.startsWith(`${root}.`)) {
            throw fault(`policies[${i}] (${entry.name}): package ${root} overlaps package ${other} of policy ${owner}; each policy's packages must be its own`);
          }
        }
      }
      for (const root of roots) rootsOf.set(root, entry.name);
      let sha: string;
      try {
        sha = await buildRegoBundle(opa, modules, roots, entry.syntax, path.join(work, `${i}.tar.gz`));
      } catch (err) {
        if (err instanceof OpaError) throw fault(`policies[${i}] (${entry.name}): opa build refused it: ${err.message}`);
        throw err;
      }
      described.push({
        entry,
        pkg,
        rego: {
          package: pkg,
          syntax: entry.syntax,
          bundle_sha256: sha,
          modules: modules.map((m) => ({ path: m.as, sha256: m.sha256 })),
          warn: entry.warn,
          timeout: entry.timeout / 1000,
        },
      });
    }
    try {
      server = await startOpaServer(opa, entries.map((_, i) => path.join(work, `${i}.tar.gz`)), work, (line) => logger.warn(line));
    } catch (err) {
      if (err instanceof OpaError) throw fault(`Open Policy Agent would not serve it: ${err.message}`);
      throw err;
    }
    const rows = await writeFilePolicies(
      sql,
      path.resolve(file),
      described.map((d) => ({ name: d.entry.name, require_reason: d.entry.require_reason, require_distinct_approver: d.entry.require_distinct_approver, rego: d.rego })),
    );
    const loaded: LoadedPolicy[] = described.map((d, i) => ({ id: rows[i].id, name: d.entry.name, entry: d.entry, pkg: d.pkg }));
    logger.info({ policyFile: path.resolve(file), policies: loaded.map((p) => `${p.name} (data.${p.pkg})`) }, 'policy-file policies loaded (--policy-file)');
    const opaServer = server;
    return {
      opaPid: () => opaServer.pid(),
      evaluate: (facts) => Promise.all(loaded.map(async (policy) => outcomeOf(policy, await opaServer.evaluate(policy.pkg, facts, policy.entry.timeout)))),
      async stop() {
        await opaServer.stop();
        await fs.rm(work, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await server?.stop();
    await fs.rm(work, { recursive: true, force: true });
    throw err;
  }
}

/** Makes the policy set's file rows the file's policies (none without a file), in one audited transaction when anything changes. */
async function writeFilePolicies(sql: Sql, file: string | undefined, wanted: FilePolicy[]) {
  return recordMutation(sql, serviceOrigin('SERVE', SETTINGS.policyFile.flag), 200, async (tx, audit) => {
    const result = await replaceFilePolicies(tx, wanted, () => newId('pol'));
    const { added, changed, removed } = result;
    if (!added.length && !changed.length && !removed.length) return unchanged(result.rows);
    audit.body = { kind: 'policy.file_loaded', file: file ?? null, added, changed, removed };
    return result.rows;
  });
}

/** What a policy's answer says: its `hold` (and with `warn: hold`, its `warn`) reasons hold; any fault holds too. */
export function outcomeOf(policy: { id: string; name: string; pkg: string; entry: Pick<PolicyFileEntry, 'warn'> }, answer: OpaAnswer): RegoOutcome {
  const base = { policy: policy.id, name: policy.name, notes: [] as string[] };
  if (!answer.ok) return { ...base, outcome: answer.timeout ? 'timeout' : 'error', reasons: [`policy ${policy.name} could not decide: ${answer.error}`] };
  const document = answer.result;
  if (document === undefined || document === null || typeof document !== 'object' || Array.isArray(document)) {
    return { ...base, outcome: 'error', reasons: [`policy ${policy.name} could not decide: data.${policy.pkg} is undefined`] };
  }
  const hold = reasonsOf((document as Record<string, unknown>).hold, `data.${policy.pkg}.hold`);
  const warn = reasonsOf((document as Record<string, unknown>).warn, `data.${policy.pkg}.warn`);
  const broken = [hold, warn].find((r): r is { error: string } => 'error' in r);
  if (broken) return { ...base, outcome: 'error', reasons: [`policy ${policy.name} could not decide: ${broken.error}`] };
  const reasons = [...(hold as { reasons: string[] }).reasons];
  const warnings = (warn as { reasons: string[] }).reasons;
  if (policy.entry.warn === 'hold') reasons.push(...warnings);
  const notes = policy.entry.warn === 'note' ? warnings : [];
  return { ...base, notes, outcome: reasons.length > 0 ? 'hold' : 'pass', reasons };
}

/** A rule's value as reasons: undefined or false none; true one; a string, or a set (array) of strings, those. */
function reasonsOf(value: unknown, rule: string): { reasons: string[] } | { error: string } {
  if (value === undefined || value === null || value === false) return { reasons: [] };
  if (value === true) return { reasons: [`${rule} is true`] };
  if (typeof value === 'string') return { reasons: [value] };
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return { reasons: value as string[] };
  return { error: `${rule} is ${JSON.stringify(value).slice(0, 200)}, not a boolean, a string or a set of strings` };
}
