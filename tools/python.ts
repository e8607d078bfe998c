import { extraVarsEnv } from './extra-vars';
import type { Tool } from './types';

/** `command` is a Python 3 program; -u keeps its output unbuffered so the log follows it live. */
export const pythonTool: Tool = {
  name: 'python',
  binary: 'python3',
  invocation: (spec) => ({
    argv: ['python3', '-u', 'script.py'],
    files: { 'script.py': spec.command },
    env: extraVarsEnv(spec.extra_vars),
  }),
};
