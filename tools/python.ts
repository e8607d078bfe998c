import { extraVarsEnv } from './extra-vars';
import type { Tool } from './types';

/**
 * `command` is a Python 3 program; -u keeps its output unbuffered so the log follows it live.
 * A dry run only parses it, which runs none of its code.
 */
const PARSE_ONLY = 'import ast, sys; ast.parse(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1])';

export const pythonTool: Tool = {
  name: 'python',
  binary: 'python3',
  dryRunChangeFree: true,
  invocation: (spec) => ({
    argv: spec.dry_run ? ['python3', '-c', PARSE_ONLY, 'script.py'] : ['python3', '-u', 'script.py'],
    files: { 'script.py': spec.command },
    env: extraVarsEnv(spec.extra_vars),
  }),
};
