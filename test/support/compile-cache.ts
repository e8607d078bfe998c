import vm from 'node:vm';

/**
 * V8 code caching for the modules jest compiles, kept for the life of each jest worker.
 *
 * Jest gives every test file a fresh module registry, so each integration file compiles the
 * server's whole module graph again (some two thousand modules, the Temporal SDK most of them):
 * about a second of CPU per file on these cores, spent parsing source that has not changed. Jest
 * compiles each module through `vm.compileFunction`, read afresh from the `vm` module at every
 * call, so this wraps it once per worker: the first compile of a source produces V8's code cache,
 * later compiles of the identical source (same file, same text) hand it back. The modules still
 * run afresh in each file's registry; only parsing is saved. V8 checks the cache against the
 * source and its own version and flags, and compiles normally when it does not fit.
 */
type CompileFunction = typeof vm.compileFunction;
const WRAPPED = Symbol.for('cairn.test.compileCache');

const host = vm as unknown as { compileFunction: CompileFunction & { [WRAPPED]?: true } };

if (!host.compileFunction[WRAPPED]) {
  const compile = host.compileFunction;
  const cache = new Map<string, { source: string; data: Buffer }>();
  const cached = ((code: string, params?: string[], options?: vm.CompileFunctionOptions) => {
    const key = options?.filename;
    if (!key || options?.cachedData || options?.produceCachedData) return compile(code, params, options);
    const hit = cache.get(key);
    if (hit && hit.source === code) {
      const fn = compile(code, params, { ...options, cachedData: hit.data }) as ReturnType<CompileFunction> & { cachedDataRejected?: boolean };
      if (fn.cachedDataRejected) cache.delete(key);
      return fn;
    }
    const fn = compile(code, params, { ...options, produceCachedData: true }) as ReturnType<CompileFunction> & { cachedData?: Buffer };
    if (fn.cachedData) cache.set(key, { source: code, data: fn.cachedData });
    return fn;
  }) as CompileFunction & { [WRAPPED]?: true };
  cached[WRAPPED] = true;
  host.compileFunction = cached;
}
