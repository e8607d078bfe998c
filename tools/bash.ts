import { extraVarsEnv } from './extra-vars';
import type { Tool } from './types';

/**
 * `command` is a bash script, written to a file so its size is not bound by the argv limit.
 * A dry run only parses it (`bash -n`), which executes nothing.
 */
export const bashTool: Tool = {
  name: 'bash',
  binary: 'bash',
  dryRunChangeFree: true,
  invocation: (spec) => ({
    argv: spec.dry_run ? ['bash', '-n', 'script.sh'] : ['bash', 'script.sh'],
    files: { 'script.sh': spec.command },
    env: extraVarsEnv(spec.extra_vars),
  }),
};
