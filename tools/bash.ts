import { extraVarsEnv } from './extra-vars';
import type { Tool } from './types';

/** `command` is a bash script, written to a file so its size is not bound by the argv limit. */
export const bashTool: Tool = {
  name: 'bash',
  binary: 'bash',
  invocation: (spec) => ({
    argv: ['bash', 'script.sh'],
    files: { 'script.sh': spec.command },
    env: extraVarsEnv(spec.extra_vars),
  }),
};
