import { extraVarsEnv } from '../../tools/extra-vars';

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
