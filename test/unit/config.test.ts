import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, loadConfig, parseFlags, SETTINGS, settingsHelp } from '../../core/config';

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

test('--temporal-run-status is tracked unless set off; anything else is refused', () => {
  expect(loadConfig({}, {}).temporalRunStatus).toBe('tracked');
  expect(loadConfig({}, { CAIRN_TEMPORAL_RUN_STATUS: 'off' }).temporalRunStatus).toBe('off');
  expect(loadConfig(parseFlags(['--temporal-run-status=tracked']).values, { CAIRN_TEMPORAL_RUN_STATUS: 'off' }).temporalRunStatus).toBe('tracked');
  expect(() => loadConfig({ temporalRunStatus: 'false' }, {})).toThrow('--temporal-run-status (CAIRN_TEMPORAL_RUN_STATUS): expected tracked or off');
});

test('the run bounds default to 2 GiB of memory, 512 processes, 4 GiB of disk and one core', () => {
  expect(loadConfig({}, {})).toMatchObject({ runMemory: 2 * 1024 ** 3, runPids: 512, runDisk: 4 * 1024 ** 3, runCpu: 1 });
});

test('a run bound is read from its flag or variable: sizes with k, m or g, cores as a fraction', () => {
  const { values } = parseFlags(['--run-memory', '64m', '--run-pids=32', '--run-cpu', '0.5']);
  const config = loadConfig(values, { CAIRN_RUN_DISK: '1.5G', CAIRN_RUN_MEMORY: '8g' });
  expect(config).toMatchObject({ runMemory: 64 * 1024 ** 2, runPids: 32, runDisk: 1.5 * 1024 ** 3, runCpu: 0.5 });
  expect(loadConfig({ runMemory: '524288k', runDisk: '10485760' }, {})).toMatchObject({ runMemory: 512 * 1024 ** 2, runDisk: 10 * 1024 ** 2 });
  expect(loadConfig({ runMemory: '512MiB' }, {}).runMemory).toBe(512 * 1024 ** 2);
});

test('a bad run bound is refused at start naming its flag and variable', () => {
  expect(() => loadConfig({ runMemory: 'lots' }, {})).toThrow('--run-memory (CAIRN_RUN_MEMORY): "lots" is not a size (try 512m or 2g');
  expect(() => loadConfig({ runMemory: '1m' }, {})).toThrow('--run-memory (CAIRN_RUN_MEMORY): "1m" is below the least a run can start with, 16 MiB');
  expect(() => loadConfig({}, { CAIRN_RUN_DISK: '-4g' })).toThrow('--run-disk (CAIRN_RUN_DISK): "-4g" is not a size');
  expect(() => loadConfig({ runDisk: '100k' }, {})).toThrow('--run-disk (CAIRN_RUN_DISK): "100k" is below the least a run can start with, 1 MiB');
  expect(() => loadConfig({ runPids: '2.5' }, {})).toThrow('--run-pids (CAIRN_RUN_PIDS): expected a whole number of processes');
  expect(() => loadConfig({ runPids: '4' }, {})).toThrow('--run-pids (CAIRN_RUN_PIDS): expected at least 8 processes');
  expect(() => loadConfig({ runPids: 'many' }, {})).toThrow('--run-pids (CAIRN_RUN_PIDS): expected a whole number of processes');
  expect(() => loadConfig({ runCpu: '0' }, {})).toThrow('--run-cpu (CAIRN_RUN_CPU): expected at least 0.01 cores');
  expect(() => loadConfig({}, { CAIRN_RUN_CPU: 'half' })).toThrow('--run-cpu (CAIRN_RUN_CPU): expected a number of cores, such as 1 or 0.5');
});

test('cairn help lists the run bounds with their variables', () => {
  const help = settingsHelp();
  for (const [flag, env] of [['--run-memory', 'CAIRN_RUN_MEMORY'], ['--run-pids', 'CAIRN_RUN_PIDS'], ['--run-disk', 'CAIRN_RUN_DISK'], ['--run-cpu', 'CAIRN_RUN_CPU']]) {
    expect(help).toMatch(new RegExp(`^  ${flag} +${env} +\\S`, 'm'));
  }
});

test('every setting cairn help lists has a row in the flag table of docs/operations.md, by its flag and its variable', () => {
  const doc = readFileSync(path.join(__dirname, '../../docs/operations.md'), 'utf8');
  const lines = doc.slice(doc.indexOf('| flag | variable | default | accepted values and meaning |')).split('\n');
  const table = lines.slice(2, lines.findIndex((line) => !line.startsWith('|'))).join('\n');
  const missing = Object.values(SETTINGS).flatMap(({ flag, env }) => [flag, env].filter((name) => !table.includes(`\`${name}\``)));
  expect(missing).toEqual([]);
});

test('--federation-issuer is an https URL (http for a loopback host), kept without a trailing slash', () => {
  expect(loadConfig({}, {}).federationIssuer).toBeUndefined();
  expect(loadConfig({ federationIssuer: 'https://cairn.example.com/' }, {}).federationIssuer).toBe('https://cairn.example.com');
  expect(loadConfig({}, { CAIRN_FEDERATION_ISSUER: 'https://example.com/cairn' }).federationIssuer).toBe('https://example.com/cairn');
  expect(loadConfig({ federationIssuer: 'http://127.0.0.1:8080' }, {}).federationIssuer).toBe('http://127.0.0.1:8080');
  const refused = (value: string, message: string) => expect(() => loadConfig({ federationIssuer: value }, {})).toThrow(`--federation-issuer (CAIRN_FEDERATION_ISSUER): ${message}`);
  refused('cairn.example.com', '"cairn.example.com" is not a URL');
  refused('http://cairn.example.com', 'the issuer must be an https URL (plain http only for a loopback host)');
  refused('https://cairn.example.com/?tenant=1', 'the issuer must not carry a query');
  refused('https://cairn.example.com/#x', 'the issuer must not carry a fragment or user name');
});

test('--module-fetch-timeout defaults to two minutes and reads durations of at least a second', () => {
  expect(loadConfig({}, {}).moduleFetchTimeout).toBe(120);
  expect(loadConfig(parseFlags(['--module-fetch-timeout', '90s']).values, {}).moduleFetchTimeout).toBe(90);
  expect(loadConfig({}, { CAIRN_MODULE_FETCH_TIMEOUT: '5m' }).moduleFetchTimeout).toBe(300);
  expect(() => loadConfig({}, { CAIRN_MODULE_FETCH_TIMEOUT: '0' })).toThrow('--module-fetch-timeout (CAIRN_MODULE_FETCH_TIMEOUT): "0" is not a duration of at least a second');
  expect(() => loadConfig({}, { CAIRN_MODULE_FETCH_TIMEOUT: 'soon' })).toThrow('--module-fetch-timeout (CAIRN_MODULE_FETCH_TIMEOUT)');
});

test('--hook-delivery-retention defaults to 30 days and reads a duration of at least a second', () => {
  expect(loadConfig({}, {}).hookDeliveryRetention).toBe(30 * 86400);
  expect(loadConfig(parseFlags(['--hook-delivery-retention', '12h']).values, {}).hookDeliveryRetention).toBe(43200);
  for (const bad of ['0', 'soon', '-1d']) {
    expect(() => loadConfig({}, { CAIRN_HOOK_DELIVERY_RETENTION: bad })).toThrow(`--hook-delivery-retention (CAIRN_HOOK_DELIVERY_RETENTION): "${bad}" is not a duration of at least a second`);
  }
});

test('--hook-answer-wait defaults to 0 and reads 0 to 4.5 s as milliseconds', () => {
  expect(loadConfig({}, {}).hookAnswerWait).toBe(0);
  expect(loadConfig(parseFlags(['--hook-answer-wait', '1500ms']).values, {}).hookAnswerWait).toBe(1500);
  expect(loadConfig(parseFlags(['--hook-answer-wait=2s']).values, {}).hookAnswerWait).toBe(2000);
  expect(loadConfig({}, { CAIRN_HOOK_ANSWER_WAIT: '4.5s' }).hookAnswerWait).toBe(4500);
  expect(loadConfig({}, { CAIRN_HOOK_ANSWER_WAIT: '3' }).hookAnswerWait).toBe(3000);
  for (const bad of ['5s', '4501ms', '1m', 'soon', '-1']) {
    expect(() => loadConfig({}, { CAIRN_HOOK_ANSWER_WAIT: bad })).toThrow(`--hook-answer-wait (CAIRN_HOOK_ANSWER_WAIT): "${bad}" is not a wait from 0 to 4.5s`);
  }
});
