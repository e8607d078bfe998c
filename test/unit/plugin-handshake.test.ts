import { parseHandshakeLine, pluginEnvironment } from '../../runtime/plugins';

describe("go-plugin's handshake line", () => {
  test('a gRPC plugin on a Unix socket with its certificate', () => {
    expect(parseHandshakeLine('1|1|unix|/tmp/plugin123|grpc|MIIBcert\n')).toEqual({ appVersion: 1, network: 'unix', address: '/tmp/plugin123', protocol: 'grpc', serverCert: 'MIIBcert' });
  });
  test.each([
    ['not a handshake', /not a go-plugin handshake line/],
    ['2|1|unix|/tmp/p|grpc|c', /core protocol 2/],
    ['1|2|unix|/tmp/p|grpc|c', /plugin protocol 2 is not supported/],
    ['1|1|unix|/tmp/p|netrpc|c', /speaks netrpc/],
    ['1|1|udp|/tmp/p|grpc|c', /network udp/],
    ['1|1|unix|/tmp/p|grpc|', /mutual TLS/],
  ])('%s is refused', (line, message) => {
    expect(() => parseHandshakeLine(line)).toThrow(message);
  });
});

test("a plugin's environment keeps only what rule 7 lists", () => {
  expect(
    pluginEnvironment({
      PATH: '/usr/bin',
      HOME: '/home/cairn',
      TMPDIR: '/tmp',
      LANG: 'C.UTF-8',
      LC_ALL: 'C',
      SERVICE_PLUGIN_VAULT_ADDR: 'http://127.0.0.1:8200',
      SERVICE_ENCRYPTION_KEY: 'k',
      SERVICE_ENCRYPTION_SALT: 's',
      DATABASE_URL: 'postgres://x',
      CAIRN_DATA_DIR: '/data',
      AWS_SECRET_ACCESS_KEY: 'a',
      service_plugin_lower: 'no',
    }),
  ).toEqual({ PATH: '/usr/bin', HOME: '/home/cairn', TMPDIR: '/tmp', LANG: 'C.UTF-8', LC_ALL: 'C', SERVICE_PLUGIN_VAULT_ADDR: 'http://127.0.0.1:8200' });
});
