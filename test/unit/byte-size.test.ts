import { formatByteSize, parseByteSize } from '../../core/byte-size';

test('sizes read with binary k, m, g and t suffixes, any case, with an optional b or ib', () => {
  expect(parseByteSize('1048576')).toBe(1048576);
  expect(parseByteSize('64k')).toBe(64 * 1024);
  expect(parseByteSize('64m')).toBe(64 * 1024 ** 2);
  expect(parseByteSize('2G')).toBe(2 * 1024 ** 3);
  expect(parseByteSize('1t')).toBe(1024 ** 4);
  expect(parseByteSize('1.5g')).toBe(1.5 * 1024 ** 3);
  expect(parseByteSize('512MiB')).toBe(512 * 1024 ** 2);
  expect(parseByteSize(' 10mb ')).toBe(10 * 1024 ** 2);
});

test('what is not a size reads as none', () => {
  for (const text of ['', 'g', 'lots', '-1m', '2x', '1e9', '0x10', '2 g b', '99999999999999999999t']) expect(parseByteSize(text)).toBeUndefined();
});

test('sizes show in the largest whole unit', () => {
  expect(formatByteSize(64 * 1024 ** 2)).toBe('64 MiB');
  expect(formatByteSize(2 * 1024 ** 3)).toBe('2 GiB');
  expect(formatByteSize(1.5 * 1024 ** 3)).toBe('1536 MiB');
  expect(formatByteSize(3 * 1024)).toBe('3 KiB');
  expect(formatByteSize(1000)).toBe('1000 bytes');
});
