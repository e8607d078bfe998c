import { ENV_STRING_LIMIT, environmentFault, extraVarsEnv } from '../../tools/extra-vars';

test('every extra var travels as JSON and scalar shell-named ones as variables', () => {
  const env = extraVarsEnv({ region: 'eu-west-1', batch: 3, dry: false, nested: { a: 1 }, 'not-a-name': 'x' });
  expect(JSON.parse(env.CAIRN_EXTRA_VARS)).toEqual({ region: 'eu-west-1', batch: 3, dry: false, nested: { a: 1 }, 'not-a-name': 'x' });
  expect(env).toMatchObject({ region: 'eu-west-1', batch: '3', dry: 'false' });
  expect(env.nested).toBeUndefined();
  expect(env['not-a-name']).toBeUndefined();
});

test('an extra var never overrides a variable the tool process relies on', () => {
  const env = extraVarsEnv({ PATH: '/evil', LD_PRELOAD: '/evil.so', HOME: '/x', CAIRN_RUN_ID: 'forged', BASH_ENV: '/x', PYTHONPATH: '/x' });
  for (const name of ['PATH', 'LD_PRELOAD', 'HOME', 'CAIRN_RUN_ID', 'BASH_ENV', 'PYTHONPATH']) expect(env[name]).toBeUndefined();
});

test('extra vars never set the variables that change how a shell, an interpreter or the loader starts', () => {
  const names = ['SHELLOPTS', 'BASHOPTS', 'PROMPT_COMMAND', 'GLOBIGNORE', 'CDPATH', 'NODE_OPTIONS', 'PYTHONSTARTUP', 'PYTHONHOME', 'PERL5OPT', 'RUBYOPT', 'JAVA_TOOL_OPTIONS', 'GCONV_PATH', 'GLIBC_TUNABLES', 'PS4'];
  const env = extraVarsEnv(Object.fromEntries(names.map((n) => [n, 'x'])));
  for (const name of names) expect(env[name]).toBeUndefined();
  // Still in the JSON, where a tool that wants them can read them.
  expect(Object.keys(JSON.parse(env.CAIRN_EXTRA_VARS))).toEqual(names);
});

describe('environmentFault', () => {
  test('a single variable past the kernel limit is named', () => {
    const env = extraVarsEnv({ BIG: 'x'.repeat(ENV_STRING_LIMIT) });
    expect(environmentFault(env, ['bash', 'script.sh'])).toEqual({ field: 'extra_vars.BIG', message: expect.stringContaining('at most 131071 bytes') });
  });

  test('extra vars whose JSON is past the limit are named as a whole', () => {
    const env = extraVarsEnv({ nested: { text: 'x'.repeat(ENV_STRING_LIMIT) } });
    expect(environmentFault(env, ['bash', 'script.sh'])?.field).toBe('extra_vars');
  });

  test('many variables each within the limit can still be too many together', () => {
    const vars = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`V${i}`, 'x'.repeat(60_000)]));
    const env = extraVarsEnv(vars);
    delete env.CAIRN_EXTRA_VARS;
    expect(environmentFault(env, ['bash'])?.message).toMatch(/at most 1048576 bytes/);
  });

  test('an ordinary environment fits', () => {
    expect(environmentFault(extraVarsEnv({ a: 1, b: 'two' }), ['bash', 'script.sh'])).toBeUndefined();
  });
});
