import type { FactSupply } from '../core/ansible/facts';
import type { RunSpec } from '../core/runs/run';

/** How to start a tool for one run: the argv, files to write into the run's work dir first, extra env. */
export interface ToolInvocation {
  argv: string[];
  files: Record<string, string>;
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
