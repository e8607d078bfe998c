import path from 'node:path';
import { installRoot } from '../../core/install-root';

// Non-code files (schema/, tools/ansible/, ui/dist) are found from the install's root, whether a
// module runs from its TypeScript source or compiled into dist/.

test('a module in its source folder and the same module compiled into dist/ find the same root', () => {
  const root = path.join(path.sep, 'opt', 'cairn');
  expect(installRoot(path.join(root, 'store'), 1)).toBe(root);
  expect(installRoot(path.join(root, 'dist', 'store'), 1)).toBe(root);
  expect(installRoot(path.join(root, 'api', 'routes'), 2)).toBe(root);
  expect(installRoot(path.join(root, 'dist', 'api', 'routes'), 2)).toBe(root);
});
