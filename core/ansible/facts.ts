import { SECRET_NAME } from './inventory';

/**
 * The fact cache as pure rules (spec part A 2.1 `fact_cache`, 2.3, 4.12; part B 8): what a run's
 * spec carries, how cached facts reach `ansible-playbook` and come back from it, the 1 MiB cap,
 * and the masking below admin.
 *
 * Facts travel through Ansible's own `jsonfile` fact cache, kept flat in the run's work dir: one
 * file per host, `<FACTS_PREFIX><host>`. Before the run Cairn writes there the newest kept reading
 * of each host of the run's inventory (younger than the timeout), compact on one line, and a
 * manifest of what it wrote (host -> SHA-256 of the text); `ANSIBLE_GATHERING=smart` then gathers
 * only hosts with nothing cached. At the run's end every file whose text is not what was supplied
 * was written by Ansible during the run: that is a new reading.
 */

/** The run spec's fact cache setting (spec part A 2.1): present only when the fact cache is on. */
export interface FactCacheSpec {
  /** Zero serves cached facts however old. */
  timeout_seconds: number;
}

/** A cached facts document larger than this is not kept (spec part B 8). */
export const MAX_FACTS_BYTES = 1024 * 1024;

export const FACTS_PREFIX = '.cairn-facts.';
export const FACTS_MANIFEST = '.cairn-facts-supplied.json';

/** The masked value a reader below admin sees in place of a secret-looking fact. */
export const FACT_MASK = '[masked]';

/** The run spec's `fact_cache` for a template's setting; undefined when the cache is off or cannot apply. */
export function factCacheOf(template: { use_fact_cache?: boolean; fact_cache_timeout?: number; inventory_id: string | null; tool: string | null; kind?: string }): FactCacheSpec | undefined {
  if (!template.use_fact_cache || !template.inventory_id || template.tool !== 'ansible' || template.kind === 'workflow') return undefined;
  return { timeout_seconds: template.fact_cache_timeout ?? 0 };
}

/** Whether two settings are the same (both off, or on with one timeout). */
export function sameFactCache(a: FactCacheSpec | undefined, b: FactCacheSpec | undefined): boolean {
  return (a?.timeout_seconds ?? null) === (b?.timeout_seconds ?? null);
}

/** Whether a host name can name a cache file: no path separator, NUL or dot-only name. */
export function cacheableHost(host: string): boolean {
  return host.length > 0 && host.length <= 255 && !host.includes('/') && !host.includes('\0') && host !== '.' && host !== '..';
}

/** What a run is given: the supplied facts' texts by host (already chosen by the store). */
export interface FactSupply {
  facts: Record<string, string>;
}

/**
 * The files and environment that turn Ansible's jsonfile fact cache on for a run with `fact_cache`
 * in its spec, holding the supplied facts. Empty for any other run.
 */
export function factCacheInvocation(
  spec: { fact_cache?: FactCacheSpec },
  supply: FactSupply | undefined,
  sha256Hex: (text: string) => string,
): { files: Record<string, string>; env: Record<string, string> } {
  if (!spec.fact_cache) return { files: {}, env: {} };
  const files: Record<string, string> = {};
  const manifest: Record<string, string> = {};
  for (const [host, text] of Object.entries(supply?.facts ?? {})) {
    if (!cacheableHost(host)) continue;
    files[FACTS_PREFIX + host] = text;
    manifest[host] = sha256Hex(text);
  }
  files[FACTS_MANIFEST] = JSON.stringify(manifest);
  return {
    files,
    env: {
      ANSIBLE_CACHE_PLUGIN: 'jsonfile',
      // Relative to the work dir, the tool's working directory.
      ANSIBLE_CACHE_PLUGIN_CONNECTION: '.',
      ANSIBLE_CACHE_PLUGIN_PREFIX: FACTS_PREFIX,
      // Cairn chose what to supply by the run's timeout; Ansible expires nothing itself.
      ANSIBLE_CACHE_PLUGIN_TIMEOUT: '0',
      ANSIBLE_GATHERING: 'smart',
    },
  };
}

/** Why a gathered document is not kept, or undefined when it is. */
export function skipReason(sizeBytes: number, parsed: unknown): string | undefined {
  if (sizeBytes > MAX_FACTS_BYTES) return `the facts document is ${sizeBytes} bytes, over the 1 MiB (${MAX_FACTS_BYTES} bytes) a cached facts document may be`;
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return 'the facts document is not a JSON object';
  return undefined;
}

/** Whether a fact's name looks secret: the rule stored inventories mask by (core/inventory.ts). */
export const secretLookingFact = (name: string) => SECRET_NAME.test(name);

/** Facts as a reader below admin sees them: every value under a secret-looking key, at any depth, masked. */
export function maskFacts(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(maskFacts);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, secretLookingFact(k) ? FACT_MASK : maskFacts(v)]));
}

/** One differing top-level fact of a changed host: its value at each end (null where absent). */
export interface FactChange {
  key: string;
  from: unknown;
  to: unknown;
}
