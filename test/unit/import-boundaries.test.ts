import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * The layering of docs/architecture.md, checked on every import of every source file: a change
 * that makes a layer import one it must not, closes a cycle, pulls a package into a layer that
 * must stay free of it, or writes SQL outside store/ fails here, naming the file and the import.
 */
const ROOT = path.resolve(__dirname, '../..');
const LAYERS = ['api', 'services', 'store', 'core', 'activities', 'runtime', 'workflows', 'workers', 'tools', 'embedded', 'cli', 'bench'] as const;
type Layer = (typeof LAYERS)[number];

/** What each layer must never import. */
const FORBIDDEN: Record<Layer, Layer[]> = {
  // Pure rules: no HTTP, SQL, Temporal or processes.
  core: ['api', 'services', 'store', 'activities', 'runtime', 'workflows', 'workers', 'tools', 'embedded', 'cli', 'bench'],
  // SQL only; it knows nothing of who calls it.
  store: ['api', 'services', 'activities', 'runtime', 'workflows', 'workers', 'tools', 'embedded', 'cli', 'bench'],
  // Use cases: they reach the execution side only through Temporal (workflow definitions and ids).
  services: ['api', 'activities', 'runtime', 'workers', 'cli', 'bench'],
  api: ['activities', 'runtime', 'workers', 'embedded', 'cli', 'bench'],
  // How a tool is invoked, as data: nothing that runs or stores.
  tools: ['api', 'services', 'store', 'activities', 'runtime', 'workflows', 'workers', 'embedded', 'cli', 'bench'],
  // The execution side's helpers (sandbox, processes, git): no use case, no record.
  runtime: ['api', 'services', 'store', 'activities', 'workflows', 'workers', 'cli', 'bench'],
  activities: ['api', 'workers', 'cli', 'bench'],
  // Deterministic code: activities only as types, nothing with I/O.
  workflows: ['api', 'services', 'store', 'runtime', 'workers', 'tools', 'embedded', 'cli', 'bench'],
  workers: ['api', 'cli', 'bench'],
  embedded: ['api', 'services', 'store', 'activities', 'runtime', 'workflows', 'workers', 'tools', 'cli', 'bench'],
  cli: ['bench'],
  bench: [],
};

/** Outside workflows/ and workers/, only these modules of workflows/ may be imported (so no process but a worker loads workflow code). */
const WORKFLOW_CONTRACT = ['workflows/definitions', 'workflows/ids'];

/** Packages a layer may not use: workflow code is deterministic; core is pure. */
const FORBIDDEN_PACKAGES: Partial<Record<Layer, RegExp>> = {
  workflows: /^(?!@temporalio\/workflow$)/,
  core: /^(?:node:)?(?:fs|fs\/promises|child_process|cluster|worker_threads)$|^postgres$|^@temporalio\//,
};

interface Import {
  file: string;
  target: string;
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

const IMPORT = /^(?:import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?'([^']+)'/gm;

function importsOf(file: string): { relative: Import[]; packages: string[] } {
  const text = readFileSync(file, 'utf8');
  const relative: Import[] = [];
  const packages: string[] = [];
  for (const match of text.matchAll(IMPORT)) {
    if (!match[2].startsWith('.')) {
      // Type-only imports of a package bring no code along.
      if (!match[1]) packages.push(match[2]);
      continue;
    }
    const resolved = path.relative(ROOT, path.resolve(path.dirname(file), match[2]));
    relative.push({ file: path.relative(ROOT, file), target: resolved, typeOnly: Boolean(match[1]) });
  }
  return { relative, packages };
}

const layerOf = (relative: string): Layer | undefined => LAYERS.find((layer) => relative === layer || relative.startsWith(`${layer}/`));

const files = LAYERS.flatMap((layer) => sourceFiles(path.join(ROOT, layer)));
const scanned = files.map((file) => ({ file: path.relative(ROOT, file), ...importsOf(file) }));
const allImports = scanned.flatMap((s) => s.relative);

test('every layer imports only the layers below it', () => {
  const violations = allImports
    .filter(({ file, target }) => {
      const from = layerOf(file)!;
      const to = layerOf(target);
      return to !== undefined && FORBIDDEN[from].includes(to);
    })
    .map(({ file, target }) => `${file} imports ${target}`);
  expect(violations).toEqual([]);
});

test('only workers and workflows load workflow code; everyone else imports its definitions and ids', () => {
  const violations = allImports
    .filter(({ file, target, typeOnly }) => {
      const from = layerOf(file);
      if (from === 'workflows' || from === 'workers' || typeOnly) return false;
      return layerOf(target) === 'workflows' && !WORKFLOW_CONTRACT.includes(target);
    })
    .map(({ file, target }) => `${file} imports ${target}`);
  expect(violations).toEqual([]);
});

/** Tarjan's strongly connected components of the module graph: each one of more than one module is a cycle. */
function cycles(edges: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      for (let w = stack.pop()!; ; w = stack.pop()!) {
        onStack.delete(w);
        component.push(w);
        if (w === v) break;
      }
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return found;
}

test('no import cycle: between modules, or between layers', () => {
  const modules = new Set(scanned.map((s) => s.file.replace(/\.ts$/, '')));
  const moduleEdges = new Map<string, Set<string>>();
  const layerEdges = new Map<string, Set<string>>();
  for (const { file, target, typeOnly } of allImports) {
    const from = file.replace(/\.ts$/, '');
    const to = modules.has(target) ? target : modules.has(`${target}/index`) ? `${target}/index` : undefined;
    if (!to) continue;
    moduleEdges.set(from, (moduleEdges.get(from) ?? new Set()).add(to));
    // Between layers, a type-only import loads nothing (workflows type their activities so).
    const [a, b] = [layerOf(file)!, layerOf(target)!];
    if (a !== b && !typeOnly) layerEdges.set(a, (layerEdges.get(a) ?? new Set()).add(b));
  }
  expect(cycles(moduleEdges)).toEqual([]);
  expect(cycles(layerEdges)).toEqual([]);
});

test('the cycle check finds a cycle it is shown', () => {
  expect(cycles(new Map([['a', new Set(['b'])], ['b', new Set(['c'])], ['c', new Set(['a'])], ['d', new Set(['a'])]]))).toEqual([['a', 'b', 'c']]);
});

test('workflow code uses only the workflow package; core uses no file system, process, database or Temporal', () => {
  const violations = scanned.flatMap(({ file, packages }) => {
    const rule = FORBIDDEN_PACKAGES[layerOf(file)!];
    return rule ? packages.filter((pkg) => rule.test(pkg)).map((pkg) => `${file} uses ${pkg}`) : [];
  });
  expect(violations).toEqual([]);
});

test('the check sees the imports it judges', () => {
  // A scanner that found nothing would pass every rule.
  expect(allImports.length).toBeGreaterThan(200);
  expect(allImports).toContainEqual(expect.objectContaining({ file: 'services/runs/runs.ts', target: 'store/runs' }));
  expect(scanned.find((s) => s.file === 'workflows/run.ts')?.packages).toContain('@temporalio/workflow');
});

/** SQL in any form postgres.js runs it: a tagged template (typed or not) or `unsafe`. */
const SQL = /\b(?:sql|tx|db|local|admin)(?:<[^`]*?>)?`\s*(?:SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|LOCK|TRUNCATE)\b|\.unsafe\(/i;

/** SQL outside store/ that has a reason to be where it is. */
const SQL_ELSEWHERE: Record<string, string> = {
  // The embedded cluster's own role password, set before there is a store to ask.
  'embedded/postgres.ts': 'bootstrap of the embedded PostgreSQL',
};

test('SQL lives only in store/', () => {
  const sqlOutsideStore = scanned
    .filter(({ file }) => layerOf(file) !== 'store' && layerOf(file) !== 'bench' && !(file in SQL_ELSEWHERE))
    .filter(({ file }) => SQL.test(readFileSync(path.join(ROOT, file), 'utf8')))
    .map(({ file }) => file);
  expect(sqlOutsideStore).toEqual([]);
});

test('the SQL check sees every form', () => {
  for (const text of ['await db`SELECT 1`', 'await tx<Run[]>`UPDATE runs SET x = 1`', 'await sql.unsafe(text)', 'db<{ n: number }[]>`\n  WITH a AS (SELECT 1)'])
    expect([text, SQL.test(text)]).toEqual([text, true]);
});
