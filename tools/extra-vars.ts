/**
 * Names a tool process relies on, and variables that change how a shell, an interpreter or the
 * dynamic loader starts: an extra var never sets one of them.
 */
const PROTECTED = new RegExp(
  '^(' +
    [
      'PATH', 'HOME', 'SHELL', 'USER', 'LOGNAME', 'PWD', 'OLDPWD', 'IFS', 'TMPDIR', 'LANG', 'LC_.*', 'TZ', 'CAIRN_.*',
      // shells
      'ENV', 'BASH_ENV', 'BASH_FUNC_.*', 'SHELLOPTS', 'BASHOPTS', 'PROMPT_COMMAND', 'PS4', 'GLOBIGNORE', 'CDPATH', 'FIGNORE', 'HISTFILE', 'INPUTRC',
      // the dynamic loader and the C library
      'LD_.*', 'GCONV_PATH', 'LOCPATH', 'NLSPATH', 'MALLOC_.*', 'GLIBC_TUNABLES',
      // interpreters' startup options and module paths
      'PYTHON.*', 'NODE_.*', 'PERL5OPT', 'PERL5LIB', 'PERLLIB', 'RUBYOPT', 'RUBYLIB', 'JAVA_TOOL_OPTIONS', '_JAVA_OPTIONS', 'JDK_JAVA_OPTIONS',
    ].join('|') +
    ')$',
);
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Whether a variable is one no extra var or injected credential may set. */
export const isProtectedEnvName = (name: string): boolean => PROTECTED.test(name);

/**
 * Extra vars reach script tools two ways: the whole object as JSON in CAIRN_EXTRA_VARS, and each
 * top-level scalar whose key is a shell name as a variable of that name (not protected ones).
 */
export function extraVarsEnv(extraVars: Record<string, unknown>): Record<string, string> {
  const env: Record<string, string> = { CAIRN_EXTRA_VARS: JSON.stringify(extraVars) };
  for (const [key, value] of Object.entries(extraVars)) {
    if (!ENV_NAME.test(key) || PROTECTED.test(key)) continue;
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') env[key] = String(value);
  }
  return env;
}

/** Linux refuses to start a program with one environment string (`NAME=value`) longer than this (MAX_ARG_STRLEN). */
export const ENV_STRING_LIMIT = 128 * 1024 - 1;
/**
 * What a tool's environment and arguments may hold in all: well under the smallest ARG_MAX Linux
 * gives (a quarter of an 8 MiB stack), leaving room for what Cairn adds.
 */
export const ENV_TOTAL_LIMIT = 1024 * 1024;

/** Why a tool could not be started with this environment and argv (`spawn E2BIG`), naming the field at fault; undefined when it fits. */
export function environmentFault(env: Record<string, string>, argv: string[]): { field: string; message: string } | undefined {
  let total = 0;
  for (const arg of argv) total += Buffer.byteLength(arg) + 1;
  // One variable too long is named before the JSON of them all, which it also makes too long.
  const entries = Object.entries(env).sort(([a], [b]) => Number(a === 'CAIRN_EXTRA_VARS') - Number(b === 'CAIRN_EXTRA_VARS'));
  for (const [name, value] of entries) {
    const size = Buffer.byteLength(name) + 1 + Buffer.byteLength(value);
    total += size + 1;
    if (size <= ENV_STRING_LIMIT) continue;
    if (name === 'CAIRN_EXTRA_VARS') {
      return {
        field: 'extra_vars',
        message: `extra_vars are ${size} bytes as JSON; a tool receives them in CAIRN_EXTRA_VARS, which holds at most ${ENV_STRING_LIMIT} bytes`,
      };
    }
    return { field: `extra_vars.${name}`, message: `extra_vars.${name} is ${size} bytes; one variable passed to a tool holds at most ${ENV_STRING_LIMIT} bytes` };
  }
  if (total > ENV_TOTAL_LIMIT) {
    return { field: 'extra_vars', message: `extra_vars make a tool environment of ${total} bytes; a tool's environment holds at most ${ENV_TOTAL_LIMIT} bytes` };
  }
  return undefined;
}
