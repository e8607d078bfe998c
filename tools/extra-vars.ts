/** Names a tool process relies on; an extra var never overrides one of them. */
const PROTECTED = /^(PATH|HOME|SHELL|USER|LOGNAME|PWD|IFS|ENV|BASH_ENV|BASH_FUNC_.*|LD_.*|PYTHON.*|TMPDIR|LANG|LC_.*|CAIRN_.*)$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

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
