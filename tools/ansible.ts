import { readFileSync } from 'node:fs';
import path from 'node:path';
import { MAX_VERBOSITY } from '../core/ansible/ansible-spec';
import { factCacheInvocation } from '../core/ansible/facts';
import { sha256Hex } from '../core/sha256';
import type { RunSpec } from '../core/runs/run';
import type { ComposedRunInventory, MachineSecrets, Tool, ToolInputs } from './types';
import { installRoot } from '../core/install-root';

/**
 * The ansible tool (spec part A 2.1, 2.2): `ansible-playbook` from the system's packages.
 *
 * - The playbook is `playbook`, a path relative to the run's work dir (a project's checkout is
 *   placed there), or the playbook's text given as `command`, written to `playbook.yml`.
 * - The inventory is the stored inventory `inventory_id`, written into the work dir, or the path
 *   `inventory` as given (read inside the sandbox, so only what the sandbox shows); neither leaves
 *   Ansible's own default (the implicit localhost).
 * - Extra vars (with the run's sealed secrets at execution) are written to `extra_vars.json`, 0600,
 *   and passed as `-e @extra_vars.json`, so no environment limit bounds them and they are never in argv.
 * - Controls: `limit`, `tags`, `skip_tags`, `forks` (0 leaves the default), `verbosity` (clamped
 *   to 4), `diff_mode`; a dry run is `--check`. Every value is passed as `--name=value`, so none is
 *   read as an option.
 * - Cairn's callback plugin (tools/ansible/cairn_results.py) is written into the work dir and
 *   enabled; it appends per-host and per-task results to RESULTS_FILE, read once the run exits.
 */
export const RESULTS_FILE = '.cairn-ansible-results.jsonl';
const PLUGIN_FILE = 'cairn_results.py';
const PLUGIN = readFileSync(path.join(installRoot(__dirname, 1), 'tools', 'ansible', PLUGIN_FILE), 'utf8');
export const INLINE_PLAYBOOK = 'playbook.yml';

/** The file a stored inventory is written to: Ansible's YAML plugin needs a YAML extension. */
export const inventoryFile = (format: 'ini' | 'yaml') => (format === 'yaml' ? 'inventory.yml' : 'inventory.ini');

/** The file the i-th input of a smart or constructed inventory is written to. */
export const composedInputFile = (i: number, format: 'ini' | 'yaml') => `input-${i}-${inventoryFile(format)}`;
/** The constructed plugin's file of a constructed inventory. */
export const CONSTRUCTED_FILE = 'constructed.yml';
/** The hosts a smart inventory leaves a run (its filter, within the run's limit), one a line: the run's `--limit=@` file. */
export const SMART_LIMIT_FILE = '.cairn-smart.limit';

/**
 * A constructed inventory's plugin file: block YAML, one option a line as a JSON flow value; a
 * first line `plugin: constructed` is no INI, so only the constructed plugin takes the file.
 */
export function constructedFile(options: Record<string, unknown>): string {
  const lines = Object.entries(options)
    .filter(([key]) => key !== 'plugin')
    .map(([key, value]) => `${JSON.stringify(key)}: ${JSON.stringify(value)}`);
  return ['plugin: constructed', ...lines, ''].join('\n');
}

/** The `--inventory` files of a composed inventory, in order (inputs, then the constructed file). */
export function composedInventoryFiles(composed: ComposedRunInventory): Record<string, string> {
  const files: Record<string, string> = {};
  composed.inputs.forEach((input, i) => (files[composedInputFile(i, input.format)] = input.content));
  if (composed.kind === 'constructed') files[CONSTRUCTED_FILE] = constructedFile(composed.source_vars ?? {});
  return files;
}

/**
 * How a smart inventory is resolved when its run starts, inside the run's sandbox, before
 * ansible-playbook (`exec "$@"`): `ansible all --list-hosts` lists the hosts its filter
 * (CAIRN_HOST_FILTER) reaches over its inputs (CAIRN_SMART_INVENTORIES), then, with a run limit
 * (CAIRN_RUN_LIMIT), those of them the limit reaches; they are the run's `--limit=@` file. No
 * host left, or inputs Ansible cannot read, fails the run with the reason (never an empty limit
 * file, which Ansible would read as no limit at all).
 */
const SMART_SCRIPT = [
  'F=.cairn-smart',
  'if ! ansible all $CAIRN_SMART_INVENTORIES --list-hosts --limit="$CAIRN_HOST_FILTER" >$F.out 2>$F.err; then',
  `  if grep -qiE 'no hosts matched|no hosts to target' $F.err; then : >$F.out; else echo '[cairn] the smart inventory could not be resolved at run start:' >&2; cat $F.err >&2; exit 1; fi`,
  'fi',
  'sed -n "s/^    //p" $F.out >$F.hosts',
  'if [ -n "$CAIRN_RUN_LIMIT" ] && [ -s $F.hosts ]; then',
  '  ansible all $CAIRN_SMART_INVENTORIES --list-hosts --limit="$CAIRN_RUN_LIMIT" >$F.out 2>$F.err || : >$F.out',
  `  sed -n "s/^    //p" $F.out | grep -Fx -f $F.hosts >${SMART_LIMIT_FILE} || :`,
  `else cp $F.hosts ${SMART_LIMIT_FILE}; fi`,
  `if [ ! -s ${SMART_LIMIT_FILE} ]; then echo "[cairn] the smart inventory reaches no host (host filter: $CAIRN_HOST_FILTER\${CAIRN_RUN_LIMIT:+, run limit: $CAIRN_RUN_LIMIT}); nothing was run" >&2; exit 1; fi`,
  'rm -f $F.out $F.err $F.hosts',
  'exec "$@"',
].join('\n');

export function ansibleArgs(spec: RunSpec, inputs?: ToolInputs): string[] {
  const argv = ['ansible-playbook'];
  const composed = spec.inventory_id ? inputs?.inventory?.composed : undefined;
  if (composed) for (const file of Object.keys(composedInventoryFiles(composed))) argv.push(`--inventory=${file}`);
  else if (spec.inventory_id) argv.push(`--inventory=${inventoryFile(inputs?.inventory?.format ?? 'ini')}`);
  else if (spec.inventory) argv.push(`--inventory=${spec.inventory}`);
  if (composed?.kind === 'smart') argv.push(`--limit=@${SMART_LIMIT_FILE}`);
  else if (spec.limit) argv.push(`--limit=${spec.limit}`);
  if (spec.tags?.length) argv.push(`--tags=${spec.tags.join(',')}`);
  if (spec.skip_tags?.length) argv.push(`--skip-tags=${spec.skip_tags.join(',')}`);
  if (spec.forks) argv.push(`--forks=${spec.forks}`);
  const verbosity = Math.min(spec.verbosity ?? 0, MAX_VERBOSITY);
  if (verbosity > 0) argv.push(`-${'v'.repeat(verbosity)}`);
  if (spec.diff_mode) argv.push('--diff');
  if (spec.dry_run) argv.push('--check');
  argv.push('-e', '@extra_vars.json', '--', spec.playbook || INLINE_PLAYBOOK);
  return argv;
}

export const ansibleTool: Tool = {
  name: 'ansible',
  binary: 'ansible-playbook',
  // --check still runs tasks that opt out of check mode: a dry run is matched as the real run.
  dryRunChangeFree: false,
  invocation: (spec, inputs) => {
    const machine = machineCredential(spec.extra_vars, inputs?.machine);
    const files: Record<string, string> = {
      [PLUGIN_FILE]: PLUGIN,
      'extra_vars.json': JSON.stringify(machine.extraVars),
      [RESULTS_FILE]: '',
      ...machine.files,
    };
    if (!spec.playbook) files[INLINE_PLAYBOOK] = spec.command;
    const composed = spec.inventory_id ? inputs?.inventory?.composed : undefined;
    if (composed) Object.assign(files, composedInventoryFiles(composed));
    else if (spec.inventory_id && inputs?.inventory) files[inventoryFile(inputs.inventory.format)] = inputs.inventory.content;
    // The fact cache (core/facts.ts): Ansible's jsonfile cache in the work dir, holding the facts supplied.
    const factCache = factCacheInvocation(spec, inputs?.facts, sha256Hex);
    Object.assign(files, factCache.files);
    let argv = ansibleArgs(spec, inputs);
    // A smart or constructed inventory is resolved as the run starts (see SMART_SCRIPT): only the
    // static plugins and the constructed one read its files, and an input that does not parse fails the run.
    const composedEnv: Record<string, string> = composed
      ? { ANSIBLE_INVENTORY_ENABLED: composed.kind === 'constructed' ? 'ini,yaml,constructed' : 'ini,yaml', ANSIBLE_INVENTORY_UNPARSED_FAILED: 'true', ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED: 'true' }
      : {};
    if (composed?.kind === 'smart') {
      argv = ['sh', '-c', SMART_SCRIPT, 'cairn-smart-inventory', ...argv];
      Object.assign(composedEnv, {
        CAIRN_SMART_INVENTORIES: composed.inputs.map((input, i) => `-i ${composedInputFile(i, input.format)}`).join(' '),
        CAIRN_HOST_FILTER: composed.host_filter ?? '',
        CAIRN_RUN_LIMIT: spec.limit ?? '',
      });
    }
    return {
      argv: machine.wrap(argv),
      files,
      env: {
        // Relative to the work dir, which is the tool's working directory and its HOME (so
        // Ansible's ~/.ansible, its local temp, is in the work dir too).
        ANSIBLE_CALLBACK_PLUGINS: '.',
        ANSIBLE_CALLBACKS_ENABLED: 'cairn_results',
        CAIRN_ANSIBLE_RESULTS: RESULTS_FILE,
        ANSIBLE_RETRY_FILES_ENABLED: 'false',
        PYTHONUNBUFFERED: '1',
        ...factCache.env,
        ...composedEnv,
      },
    };
  },
};

/** The files an encrypted machine key's passphrase reaches ssh-add through (both 0600, removed before ansible starts). */
export const KEY_PASSPHRASE_FILE = '.cairn-ssh-key-passphrase';
export const ASKPASS_FILE = '.cairn-ssh-askpass';
// Answers once: a wrong passphrase makes ssh-add ask again, and the second answer is a refusal.
const ASKPASS = `#!/bin/sh
f="$(dirname "$0")/${KEY_PASSPHRASE_FILE}"
[ -e "$f.asked" ] && exit 1
: > "$f.asked"
exec cat "$f"
`;
// Run under `ssh-agent`: the key is added through the askpass program, the passphrase files go, then ansible.
const AGENT_SCRIPT = [
  `chmod 700 ${ASKPASS_FILE}`,
  `SSH_ASKPASS="$PWD/${ASKPASS_FILE}" SSH_ASKPASS_REQUIRE=force DISPLAY=cairn ssh-add -q "$1" </dev/null; added=$?`,
  `rm -f ${ASKPASS_FILE} ${KEY_PASSPHRASE_FILE} ${KEY_PASSPHRASE_FILE}.asked`,
  `[ "$added" = 0 ] || { echo "[cairn] the machine credential's SSH key could not be unlocked with its passphrase" >&2; exit 1; }`,
  'shift',
  'exec "$@"',
].join('\n');

/**
 * A machine credential handed to ansible (spec part B 5.3): the connection and become passwords as
 * `ansible_password` and `ansible_become_password` in the 0600 extra-vars file (never argv or the
 * environment); the key file is `ansible_ssh_private_key_file` (set by the injection). A key with a
 * passphrase is instead loaded into an `ssh-agent` started inside the sandbox for this run alone:
 * `ssh-add` reads the passphrase through a one-shot askpass program from a 0600 file, both removed
 * before ansible starts, and ssh finds the key in the agent. A connection password over the `ssh`
 * connection needs `sshpass`, which Cairn does not install: keys are the supported way.
 */
function machineCredential(
  extraVars: Record<string, unknown>,
  machine: MachineSecrets | undefined,
): { extraVars: Record<string, unknown>; files: Record<string, string>; wrap: (argv: string[]) => string[] } {
  const vars: Record<string, unknown> = { ...extraVars };
  const files: Record<string, string> = {};
  let wrap = (argv: string[]) => argv;
  if (machine?.password) vars.ansible_password = machine.password;
  if (machine?.becomePassword) vars.ansible_become_password = machine.becomePassword;
  if (machine?.sshKeyFile && machine.sshKeyPassphrase) {
    files[KEY_PASSPHRASE_FILE] = machine.sshKeyPassphrase;
    files[ASKPASS_FILE] = ASKPASS;
    delete vars.ansible_ssh_private_key_file;
    const keyFile = machine.sshKeyFile;
    wrap = (argv) => ['ssh-agent', 'sh', '-c', AGENT_SCRIPT, 'cairn-ssh-agent', keyFile, ...argv];
  }
  return { extraVars: vars, files, wrap };
}

/** The most of the results file read back: a run writing more is summarized from what fits. */
export const MAX_RESULTS_BYTES = 64 * 1024 * 1024;
