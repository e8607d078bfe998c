import type { AnsibleSpec } from '../runs/run';

/** The ansible fields as a body or template gives them (spec part A 2.1, 2.2). */
export type AnsibleInput = { [K in keyof AnsibleSpec]?: Exclude<AnsibleSpec[K], true> | (K extends 'diff_mode' ? boolean : never) | null };

/** The most verbosity passes on: `-vvvv` (spec part A 2.2: above 4 is clamped to 4). */
export const MAX_VERBOSITY = 4;

/**
 * The ansible fields a run (or template) of `tool` keeps: for ansible, those given (an empty
 * `limit`, empty tag lists, zero forks and verbosity and a false `diff_mode` are left off, as they
 * change nothing; verbosity above 4 is kept as 4); for any other tool none (spec part A 2.2: other
 * tools ignore them), so their specs and digests stay as they were.
 */
export function ansibleSpecOf(tool: string | null, given: AnsibleInput | undefined | null): AnsibleSpec {
  if (tool !== 'ansible' || !given) return {};
  const spec: AnsibleSpec = {};
  if (given.playbook) spec.playbook = given.playbook;
  if (given.inventory_id) spec.inventory_id = given.inventory_id;
  if (given.inventory) spec.inventory = given.inventory;
  if (given.limit) spec.limit = given.limit;
  if (given.tags?.length) spec.tags = given.tags;
  if (given.skip_tags?.length) spec.skip_tags = given.skip_tags;
  if (given.forks) spec.forks = given.forks;
  if (given.verbosity) spec.verbosity = Math.min(given.verbosity, MAX_VERBOSITY);
  if (given.diff_mode) spec.diff_mode = true;
  return spec;
}

/** An ansible spec's fields as a read shows them: each one, with its empty value when not given. */
export function ansibleView(spec: AnsibleSpec) {
  return {
    playbook: spec.playbook ?? null,
    inventory_id: spec.inventory_id ?? null,
    inventory: spec.inventory ?? null,
    limit: spec.limit ?? '',
    tags: spec.tags ?? [],
    skip_tags: spec.skip_tags ?? [],
    forks: spec.forks ?? 0,
    verbosity: spec.verbosity ?? 0,
    diff_mode: spec.diff_mode === true,
  };
}

/**
 * Why a host pattern (a run's `limit`, a smart inventory's `host_filter`) is refused; undefined
 * when it is not. Ansible splits a pattern on `,`, `:` and blanks and reads an element beginning
 * with `@` as a file of host names (`--limit @retry.txt`), a file on the machine running Ansible
 * that no user may choose. Split on every one of those separators, so no way of writing the
 * pattern brings one in; Cairn's own `--limit=@` file (a smart inventory's hosts) is added by
 * tools/ansible.ts, never taken from a user.
 */
export function hostPatternFault(pattern: string): string | undefined {
  if (pattern.split(/[,:\s]/).some((element) => element.startsWith('@'))) {
    return 'must not hold an element beginning with @, which Ansible reads as a file of host names; name the hosts or groups';
  }
  return undefined;
}
