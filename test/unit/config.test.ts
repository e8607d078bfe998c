import { ConfigError, loadConfig, parseFlags } from '../../core/config';

test('defaults need nothing configured', () => {
  const config = loadConfig({}, {});
  expect(config).toMatchObject({ listenHost: '127.0.0.1', listenPort: 8080, temporalNamespace: 'default', runTimeout: 86400, leaseSeconds: 30 });
  expect(config.databaseUrl).toBeUndefined();
  expect(config.temporalAddress).toBeUndefined();
});

test('a flag wins over its environment variable, which wins over the default', () => {
  const { values } = parseFlags(['--listen', '0.0.0.0:9000', '--run-timeout=90s']);
  const config = loadConfig(values, { CAIRN_LISTEN: '127.0.0.1:7000', CAIRN_RUN_TIMEOUT: '1h', TEMPORAL_ADDRESS: 'temporal:7233' });
  expect(config).toMatchObject({ listenHost: '0.0.0.0', listenPort: 9000, runTimeout: 90, temporalAddress: 'temporal:7233' });
});

test('a bad value is refused naming the flag and its variable', () => {
  expect(() => loadConfig({ leaseSeconds: '1' }, {})).toThrow(ConfigError);
  expect(() => loadConfig({}, { CAIRN_LISTEN: 'nowhere' })).toThrow('--listen (CAIRN_LISTEN): expected host:port');
  expect(() => parseFlags(['--data-dir'])).toThrow('--data-dir needs a value');
});
