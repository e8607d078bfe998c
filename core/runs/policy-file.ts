import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/**
 * The policy file (`cairn serve --policy-file PATH`, spec part A 2.10, 4.13): policy-language
 * policies, each a set of Rego modules that Open Policy Agent evaluates for every submission.
 * YAML (JSON is YAML too):
 *
 *   policies:
 *     - name: prod-needs-a-person      # unique; shown as the policy's name
 *       modules: [prod.rego, lib.rego] # Rego files, relative to the policy file; the first is the entry
 *       syntax: v1                     # v1 (default) or v0: the Rego syntax the modules are written in
 *       warn: hold                     # hold (default) or note: what the entry package's `warn` does
 *       timeout: 500ms                 # one evaluation's bound: seconds or 250ms/2s (default 1s, at most 30s)
 *       require_reason: false          # an approver of a run it holds must give a reason
 *       require_distinct_approver: false
 *
 * Pure: the caller reads the file; every fault names its field, such as `policies[1].timeout`.
 */

export const DEFAULT_REGO_TIMEOUT_MS = 1000;
export const MAX_REGO_TIMEOUT_MS = 30_000;

/** A timeout: a number of seconds, or a string of whole milliseconds (`250ms`) or seconds (`2s`, `1.5s`). */
const timeoutMs = z
  .union([z.number(), z.string()])
  .transform((value, ctx) => {
    const text = String(value).trim();
    const match = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(text);
    const ms = match ? Number(match[1]) * (match[2] === 'ms' ? 1 : 1000) : NaN;
    if (!Number.isFinite(ms) || ms < 1 || ms > MAX_REGO_TIMEOUT_MS) {
      ctx.addIssue({ code: 'custom', message: `"${text}" is not a timeout from 1ms to 30s (try 500ms or 2s)` });
      return z.NEVER;
    }
    return Math.round(ms);
  });

const policyEntry = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'expected 1 to 100 letters, digits, dots, dashes or underscores, starting with a letter or digit'),
  modules: z.array(z.string().min(1, 'expected a file path')).min(1, 'expected at least one Rego module').max(64),
  syntax: z.enum(['v1', 'v0'], { message: 'expected v1 or v0' }).default('v1'),
  warn: z.enum(['hold', 'note'], { message: 'expected hold or note' }).default('hold'),
  timeout: timeoutMs.default(DEFAULT_REGO_TIMEOUT_MS),
  require_reason: z.boolean().default(false),
  require_distinct_approver: z.boolean().default(false),
});

const policyFileSchema = z.strictObject({
  policies: z.array(policyEntry).max(100, 'expected at most 100 policies'),
});

export type PolicyFileEntry = z.output<typeof policyEntry>;

export class PolicyFileError extends Error {}

/** Parses the policy file's text: its entries, each checked, with names unique. */
export function parsePolicyFile(text: string): PolicyFileEntry[] {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new PolicyFileError(`not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
  }
  const parsed = policyFileSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('') || 'the file';
    const message = issue.code === 'unrecognized_keys' ? `unknown field ${issue.keys.map((k) => `"${k}"`).join(', ')}` : issue.message;
    throw new PolicyFileError(`${where}: ${message}`);
  }
  const seen = new Set<string>();
  parsed.data.policies.forEach((entry, i) => {
    if (seen.has(entry.name)) throw new PolicyFileError(`policies[${i}].name: "${entry.name}" names two policies`);
    seen.add(entry.name);
  });
  return parsed.data.policies;
}

/** The read-only `rego` object of a policy-file policy (spec part A 2.10), as stored and shown. */
export interface RegoDescription {
  /** The entry module's package, dotted (`cairn.prod`). */
  package: string;
  syntax: 'v1' | 'v0';
  /** sha256 (hex) of the bundle OPA built from the modules. */
  bundle_sha256: string;
  /** The modules' paths as the file names them, and each one's sha256. */
  modules: { path: string; sha256: string }[];
  warn: 'hold' | 'note';
  /** Seconds (fractional: 0.25 is 250 ms). */
  timeout: number;
}
