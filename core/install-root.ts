import path from 'node:path';

/** The folder `npm run build` compiles the sources into (bin/build.js), mirroring their layout. */
export const COMPILED_DIR = 'dist';

/**
 * The install's root folder (where package.json, schema/, ui/ and the TypeScript sources are),
 * from the `__dirname` of a module `depth` folders below it: the same answer whether the module
 * runs as its TypeScript source (`<root>/store`) or compiled (`<root>/dist/store`). Files that are
 * not code (migrations, the ansible plugin, the console) stay in their source folders and are
 * found through this.
 */
export function installRoot(dirname: string, depth: number): string {
  const top = path.resolve(dirname, ...Array<string>(depth).fill('..'));
  return path.basename(top) === COMPILED_DIR ? path.dirname(top) : top;
}
