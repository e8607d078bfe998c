import { formatFieldPath } from '../../core/field-path';

test('paths read the way errors name fields', () => {
  expect(formatFieldPath(['steps', 1, 'name'])).toBe('steps[1].name');
  expect(formatFieldPath([0, 'a'])).toBe('[0].a');
  expect(formatFieldPath([])).toBe('');
});
