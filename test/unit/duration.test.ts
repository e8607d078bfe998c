import { parseDuration } from '../../core/duration';

test.each([
  ['3600', 3600],
  ['0', 0],
  ['90s', 90],
  ['30m', 1800],
  ['24h', 86400],
  ['1h30m', 5400],
  ['2d', 172800],
])('%s is %i seconds', (text, seconds) => {
  expect(parseDuration(text)).toBe(seconds);
});

test.each(['', 'soon', '1.5h', '10x', '-5', 'h1', '1h 30m'])('"%s" is not a duration', (text) => {
  expect(parseDuration(text)).toBeUndefined();
});
