import { existsSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { machineCacheDir } from '../../embedded/machine-cache';
import { tempDir } from '../support/temp';

const CHECKOUT_CACHE = path.resolve(__dirname, '../../.cache');

test('the machine cache is $XDG_CACHE_HOME/cairn when that is an absolute path, created if missing', () => {
  const xdg = path.join(tempDir('cairn-xdg'), 'not-yet');
  const home = tempDir('cairn-home');
  expect(machineCacheDir({ XDG_CACHE_HOME: xdg, HOME: home })).toBe(path.join(xdg, 'cairn'));
  expect(statSync(path.join(xdg, 'cairn')).isDirectory()).toBe(true);
  expect(existsSync(path.join(home, '.cache'))).toBe(false);
});

test('without XDG_CACHE_HOME, or with a relative one (invalid in the XDG spec), it is ~/.cache/cairn', () => {
  const home = tempDir('cairn-home');
  expect(machineCacheDir({ HOME: home })).toBe(path.join(home, '.cache', 'cairn'));
  expect(machineCacheDir({ XDG_CACHE_HOME: 'relative/cache', HOME: home })).toBe(path.join(home, '.cache', 'cairn'));
  expect(statSync(path.join(home, '.cache', 'cairn')).isDirectory()).toBe(true);
});

test('where neither can be created, the checkout’s own .cache', () => {
  // A home that is a file: nothing can be made under it, whoever runs the test (root included).
  const home = path.join(tempDir('cairn-home'), 'a-file');
  writeFileSync(home, '');
  expect(machineCacheDir({ XDG_CACHE_HOME: path.join(home, 'xdg'), HOME: home })).toBe(CHECKOUT_CACHE);
});
