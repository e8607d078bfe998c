/** `['steps', 1, 'name']` becomes `steps[1].name`, the way errors name a field. */
export function formatFieldPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((acc, key) => {
    if (typeof key === 'number') return `${acc}[${key}]`;
    return acc ? `${acc}.${String(key)}` : String(key);
  }, '');
}

/** The path of the first string (or key) holding a NUL character, or undefined when there is none. */
export function findNulString(value: unknown, path: PropertyKey[] = []): PropertyKey[] | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findNulString(value[i], [...path, i]);
      if (found) return found;
    }
    return undefined;
  }
  if (value && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      if (key.includes('\u0000')) return [...path, key];
      const found = findNulString(child, [...path, key]);
      if (found) return found;
    }
  }
  return undefined;
}
