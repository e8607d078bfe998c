import { findNulString, formatFieldPath } from '../../core/field-path';

test('paths read the way errors name fields', () => {
  expect(formatFieldPath(['steps', 1, 'name'])).toBe('steps[1].name');
  expect(formatFieldPath([0, 'a'])).toBe('[0].a');
  expect(formatFieldPath([])).toBe('');
});

test('the first string holding NUL is found, in values and keys', () => {
  expect(findNulString({ a: 'ok', b: ['x', 'y\u0000'] })).toEqual(['b', 1]);
  expect(findNulString({ extra_vars: { ['k\u0000']: 1 } })).toEqual(['extra_vars', 'k\u0000']);
  expect(findNulString({ a: 'fine', n: 1, z: null, list: [true, { deep: 'still fine' }] })).toBeUndefined();
});
