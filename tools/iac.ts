import { badRequest } from '../core/errors';
import type { RunSpec } from '../core/runs/run';
import { extraVarsEnv } from './extra-vars';
import type { IacInputs, Tool, ToolInvocation } from './types';

/** Files a terraform or opentofu run leaves in its work dir for Cairn to read: the saved plan and its JSON. */
export const PLAN_FILE = 'cairn.tfplan';
export const PLAN_JSON_FILE = 'cairn-plan.json';
/** Left instead of a plan when fetching the configuration's modules ran out of time; holds the timeout in seconds. */
export const MODULE_FETCH_TIMED_OUT_FILE = 'cairn-module-fetch-timed-out';
/** --module-fetch-timeout's default, seconds. */
export const DEFAULT_MODULE_FETCH_TIMEOUT = 120;
/** The driver script and the CLI configuration Cairn writes into the work dir. */
const DRIVER = 'cairn-iac.sh';
const CLI_CONFIG = 'cairn-cli.tfrc';
/** The second process of a run whose plan the gate passed: apply exactly the saved plan file. */
export const IAC_APPLY_ARGV = ['bash', DRIVER, 'apply'];
/** The configuration written from a run's `command` when it has no project. */
const MAIN_TF = 'main.tf';

/**
 * The driver a terraform or opentofu run's sandbox runs: `init`, then either `plan` saved to
 * cairn.tfplan with its JSON (`show -json`) beside it, or `apply` of exactly that saved plan file.
 * Without a backend of the configuration's own (a `backend` or `cloud` block in a .tf file of its
 * directory), state goes to the local backend Cairn keeps for the run's template
 * (CAIRN_IAC_STATE); a configuration that names its own backend keeps it.
 *
 * A configuration calling modules (a `module` block) has them fetched first with `get`, within
 * --module-fetch-timeout (CAIRN_IAC_MODULE_FETCH_TIMEOUT seconds), inside the sandbox and under
 * the run's network like the rest. `timeout` runs the fetch in a process group of its own and ends
 * it whole (git and other helpers with it). A plan whose fetch ran out of time leaves the
 * timed-out marker instead of a plan and exits 0: the gate then holds it unclassified
 * (activities/iac.ts readSavedPlan); an apply's fetch that runs out of time fails the run.
 */
const DRIVER_SCRIPT = `#!/bin/bash
set -uo pipefail
phase="$1"
tf="$CAIRN_IAC_BINARY"
out="$PWD"
export TF_CLI_CONFIG_FILE="$out/${CLI_CONFIG}" TF_IN_AUTOMATION=1 TF_INPUT=0 CHECKPOINT_DISABLE=1
cd -- "$CAIRN_IAC_DIR" || { echo "[cairn] the configuration directory $CAIRN_IAC_DIR is not in the run's tree"; exit 2; }
if [ -n "\${CAIRN_IAC_STATE:-}" ] && ! grep -Eqs '^[[:space:]]*(backend[[:space:]]+"|cloud[[:space:]]*[{])' -- *.tf; then
  printf 'terraform {\\n  backend "local" {\\n    path = "%s"\\n  }\\n}\\n' "$CAIRN_IAC_STATE" > cairn_backend.tf
fi
echo "[cairn] $phase with $("$tf" version | head -n 1)"
if grep -Eqs '^[[:space:]]*module[[:space:]]+"' -- *.tf || grep -Eqs '"module"[[:space:]]*:' -- *.tf.json; then
  limit="\${CAIRN_IAC_MODULE_FETCH_TIMEOUT:-${DEFAULT_MODULE_FETCH_TIMEOUT}}"
  echo "[cairn] fetching the configuration's modules (at most \${limit}s, --module-fetch-timeout)"
  timeout -k 2 "$limit" "$tf" get -no-color
  rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "[cairn] the module fetch ran out of time after \${limit}s (--module-fetch-timeout)"
    [ "$phase" = plan ] || exit 124
    printf '%s' "$limit" > "$out/${MODULE_FETCH_TIMED_OUT_FILE}"
    exit 0
  fi
  [ "$rc" -eq 0 ] || exit "$rc"
fi
"$tf" init -input=false -no-color || exit $?
case "$phase" in
  plan)
    "$tf" plan -input=false -no-color -lock-timeout=300s -out="$out/${PLAN_FILE}" || exit $?
    "$tf" show -json "$out/${PLAN_FILE}" > "$out/${PLAN_JSON_FILE}" || exit $?
    ;;
  apply)
    "$tf" apply -input=false -no-color -lock-timeout=300s -auto-approve "$out/${PLAN_FILE}"
    ;;
  *)
    echo "[cairn] unknown phase $phase"; exit 2
    ;;
esac
`;

/** The provider installation Cairn allows: a filesystem mirror the operator fills, and downloads only when allowed. */
function cliConfig(iac: Pick<IacInputs, 'providerMirror' | 'providerDownloads'>): string {
  const blocks: string[] = [];
  if (iac.providerMirror) blocks.push(`  filesystem_mirror {\n    path = ${JSON.stringify(iac.providerMirror)}\n  }`);
  if (iac.providerDownloads) blocks.push('  direct {}');
  // With neither, no provider can be installed; the built-in terraform_data needs none.
  if (blocks.length === 0) blocks.push('  direct {\n    exclude = ["*/*/*"]\n  }');
  return `provider_installation {\n${blocks.join('\n')}\n}\n`;
}

/**
 * What of a terraform or opentofu invocation the executing side's own site decides: the binary,
 * the state file Cairn keeps, the provider installation. A relay worker lays these over the
 * invocation its server resolved (workers/relay-worker.ts), since only it knows its own paths.
 */
export function iacSiteInvocation(iac: Pick<IacInputs, 'binary' | 'stateFile' | 'providerMirror' | 'providerDownloads' | 'moduleFetchTimeout'>): { env: Record<string, string>; files: Record<string, string> } {
  return {
    env: {
      CAIRN_IAC_BINARY: iac.binary,
      ...(iac.stateFile ? { CAIRN_IAC_STATE: iac.stateFile } : {}),
      CAIRN_IAC_MODULE_FETCH_TIMEOUT: String(iac.moduleFetchTimeout ?? DEFAULT_MODULE_FETCH_TIMEOUT),
    },
    files: { [CLI_CONFIG]: cliConfig(iac) },
  };
}

/**
 * Where a run's configuration is: with a project, its root or the directory `command` names in it;
 * without one, `command` is the text of main.tf.
 */
export function configurationDir(spec: RunSpec): string {
  if (!spec.project) return '.';
  const dir = spec.command.trim();
  return dir === '' ? '.' : dir;
}

/** A project run's `command` names a directory of the project: relative, inside it. */
export function configurationFault(spec: RunSpec): string | undefined {
  if (!spec.project) return spec.command.trim() === '' ? 'command must hold the configuration (main.tf) of a run without a project' : undefined;
  const dir = spec.command.trim();
  if (dir === '') return undefined;
  if (dir.startsWith('/') || dir.split('/').some((s) => s === '..') || /[\0\n]/.test(dir)) {
    return 'command of a run with a project names the configuration directory within the project: a relative path without ..';
  }
  return undefined;
}

/** Terraform variables from extra vars: each top-level one as TF_VAR_<name>, strings as they are and other values as JSON. */
function terraformVars(extraVars: Record<string, unknown>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(extraVars)) {
    if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)) continue;
    env[`TF_VAR_${key}`] = typeof value === 'string' ? value : JSON.stringify(value);
  }
  return env;
}

function iacTool(name: 'terraform' | 'opentofu', binary: string): Tool {
  return {
    name,
    binary,
    installed: 'built',
    // A plan reads providers' data sources, and some run programs (the external data source): a
    // dry run is not known to change nothing.
    dryRunChangeFree: false,
    invocation: (spec, inputs): ToolInvocation => {
      const fault = configurationFault(spec);
      if (fault) throw badRequest(fault, { field: 'command' });
      const iac = inputs?.iac;
      const phase = spec.dry_run ? 'plan' : (iac?.phase ?? 'plan');
      const site = iacSiteInvocation(iac ?? { binary, phase });
      const files: ToolInvocation['files'] = { [DRIVER]: DRIVER_SCRIPT };
      if (!spec.project) files[MAIN_TF] = spec.command;
      if (iac) Object.assign(files, site.files);
      if (iac?.savedPlan) files[PLAN_FILE] = iac.savedPlan;
      return {
        argv: ['bash', DRIVER, phase],
        files,
        env: {
          ...extraVarsEnv(spec.extra_vars),
          ...terraformVars(spec.extra_vars),
          CAIRN_IAC_DIR: configurationDir(spec),
          ...site.env,
        },
      };
    },
  };
}

export const opentofuTool = iacTool('opentofu', 'tofu');
export const terraformTool = iacTool('terraform', 'terraform');

/**
 * `command` is a Go program, written as main.go and run with `go run`; a dry run compiles and
 * vets it (`go vet`), which runs none of it. The module and build caches are the install's own
 * (ToolInputs.go), shared by its runs.
 */
export const goTool: Tool = {
  name: 'go',
  binary: 'go',
  dryRunChangeFree: true,
  invocation: (spec, inputs) => ({
    argv: spec.dry_run ? ['go', 'vet', 'main.go'] : ['go', 'run', 'main.go'],
    files: { 'main.go': spec.command },
    env: {
      ...extraVarsEnv(spec.extra_vars),
      GOTOOLCHAIN: 'local',
      GOFLAGS: '-mod=mod',
      ...(inputs?.go ? { GOMODCACHE: inputs.go.modCache, GOCACHE: inputs.go.buildCache, GOPATH: inputs.go.goPath } : {}),
    },
  }),
};

/** `command` is a PowerShell script run by `pwsh`; a dry run only parses it. */
const PARSE_ONLY =
  '$e = $null; [void][System.Management.Automation.Language.Parser]::ParseFile((Resolve-Path ./script.ps1), [ref]$null, [ref]$e); ' +
  'if ($e) { $e | ForEach-Object { Write-Output $_.ToString() }; exit 1 }';

export const powershellTool: Tool = {
  name: 'powershell',
  binary: 'pwsh',
  dryRunChangeFree: true,
  invocation: (spec) => ({
    argv: spec.dry_run
      ? ['pwsh', '-NoLogo', '-NoProfile', '-NonInteractive', '-Command', PARSE_ONLY]
      : ['pwsh', '-NoLogo', '-NoProfile', '-NonInteractive', '-File', 'script.ps1'],
    files: { 'script.ps1': spec.command },
    env: extraVarsEnv(spec.extra_vars),
  }),
};

/** Whether a tool is one whose real runs plan, pass the plan gate, then apply the saved plan. */
export const isPlanTool = (name: string): name is 'terraform' | 'opentofu' => name === 'terraform' || name === 'opentofu';
