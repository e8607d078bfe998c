import type { FactSupply } from '../core/ansible/facts';
import type { RunSpec } from '../core/runs/run';

/** How to start a tool for one run: the argv, files to write into the run's work dir first, extra env. */
export interface ToolInvocation {
  argv: string[];
  /** Text, or bytes (a terraform run's saved plan). */
  files: Record<string, string | Buffer>;
  env: Record<string, string>;
}

export interface Tool {
  name: string;
  /** The executable the server needs on PATH for this tool. */
  binary: string;
  /**
   * Whether a dry run of this tool is known to change nothing (it only checks the input), so
   * policies with `exclude_dry_run` let it through. Extension tools never claim this.
   */
  dryRunChangeFree: boolean;
  /**
   * How the server gets the binary: from its PATH (the default), or `built` from a Go module into
   * the machine cache when first used (terraform, opentofu: embedded/iac-binaries.ts), so PATH is
   * not required of it.
   */
  installed?: 'path' | 'built' | 'plugin';
  /** A plugin tool's executable (absolute), handed read-only to the run's sandbox. */
  pluginExecutable?: string;
  invocation(spec: RunSpec, inputs?: ToolInputs): ToolInvocation;
}

/**
 * What execution resolves for a run before its tool starts (services/inventories.ts
 * runToolInputs): the stored inventory an ansible run names. Absent at submission, when the
 * invocation is built only to check that it can start.
 */
export interface ToolInputs {
  inventory?: { format: 'ini' | 'yaml'; content: string; composed?: ComposedRunInventory };
  /** The cached facts supplied to a run with `fact_cache` (services/facts.ts suppliedFacts). */
  facts?: FactSupply;
  /**
   * The run's machine credential as the ansible tool hands it to ansible
   * (tools/credential-injection.ts ansibleToolCredentials): the key file's path in the work
   * dir (written 0600 by the run's credential files), its passphrase, the connection and become
   * passwords. Other tools get credentials only through the generic injection.
   */
  machine?: MachineSecrets;
  /** A terraform or opentofu run's binary, state and phase, as its worker resolved them (activities/runs.ts). */
  iac?: IacInputs;
  /** A go run's caches: the install's own module and build caches. */
  go?: { modCache: string; buildCache: string; goPath: string };
}

export interface IacInputs {
  /** The binary's path as the run sees it. */
  binary: string;
  /** `plan` saves a plan (and its JSON); `apply` applies `savedPlan`, the plan file the gate judged. */
  phase: 'plan' | 'apply';
  savedPlan?: Buffer;
  /** The local backend's state file Cairn keeps for the run's template (or the run); used when the configuration names no backend. */
  stateFile?: string;
  /** The filesystem mirror providers are installed from (--iac-provider-mirror), when it exists. */
  providerMirror?: string;
  /** Whether providers may also be downloaded from their registries (--iac-provider-downloads). */
  providerDownloads?: boolean;
  /** How long (seconds) fetching the configuration's modules may take (--module-fetch-timeout). */
  moduleFetchTimeout?: number;
}

export interface MachineSecrets {
  sshKeyFile?: string;
  sshKeyPassphrase?: string;
  password?: string;
  becomePassword?: string;
}

/**
 * A smart or constructed inventory as a run resolves it at its start (tools/ansible.ts): its input
 * inventories' contents, in order, and its host filter or constructed-plugin options.
 */
export interface ComposedRunInventory {
  kind: 'smart' | 'constructed';
  inputs: { format: 'ini' | 'yaml'; content: string }[];
  host_filter?: string;
  source_vars?: Record<string, unknown>;
}
