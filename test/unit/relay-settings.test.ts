import { ConfigError, loadConfig } from '../../core/config';
import { relayUrlFault } from '../../cli/worker';
import { workerTokenMatches } from '../../services/relay/relay';

test('the worker token is held only as SHA-256 digests, and a new and an old one are both taken while rotating', () => {
  const config = loadConfig({ workerToken: 'new-token-0123456789, old-token-0123456789' }, {});
  expect(config.workerToken).toHaveLength(2);
  expect(JSON.stringify(config)).not.toContain('token-0123456789');
  expect(workerTokenMatches(config.workerToken!, 'new-token-0123456789')).toBe(true);
  expect(workerTokenMatches(config.workerToken!, 'old-token-0123456789')).toBe(true);
  expect(workerTokenMatches(config.workerToken!, 'other-token-0123456789')).toBe(false);
  expect(workerTokenMatches(config.workerToken!, '')).toBe(false);
  expect(loadConfig({}, {}).workerToken).toBeUndefined();
});

test('a short worker token is refused, naming the flag', () => {
  expect(() => loadConfig({ workerToken: 'short' }, {})).toThrow(ConfigError);
  expect(() => loadConfig({ workerToken: 'short' }, {})).toThrow(/--worker-token/);
});

test('a relay worker refuses plain http off loopback unless told the network is trusted', () => {
  expect(relayUrlFault('https://cairn.example.com', false)).toBeUndefined();
  expect(relayUrlFault('http://127.0.0.1:8080', false)).toBeUndefined();
  expect(relayUrlFault('http://localhost:8080', false)).toBeUndefined();
  expect(relayUrlFault('http://cairn.example.com', false)).toMatch(/plain http is refused/);
  expect(relayUrlFault('http://cairn.example.com', true)).toBeUndefined();
  expect(relayUrlFault('https://user:pw@cairn.example.com', false)).toMatch(/no credentials/);
  expect(relayUrlFault('ftp://cairn.example.com', false)).toMatch(/https/);
  expect(relayUrlFault('not a url', false)).toMatch(/not a URL/);
});
