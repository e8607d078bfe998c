/** `['steps', 1, 'name']` becomes `steps[1].name`, the way errors name a field. */
export function formatFieldPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((acc, key) => {
    if (typeof key === 'number') return `${acc}[${key}]`;
    return acc ? `${acc}.${String(key)}` : String(key);
  }, '');
}
