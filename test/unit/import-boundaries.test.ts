import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * The layering of docs/architecture.md, checked on every import of every source file: a change
 * that makes a layer import one it must not fails here, naming the file and the import.
 */
const ROOT = path.resolve(__dirname, '../..');
const LAYERS = ['api', 'services', 'store', 'core', 'activities', 'workflows', 'workers', 'tools', 'embedded', 'cli', 'bench'] as const;
type Layer = (typeof LAYERS)[number];

/** What each layer must never import. */
const FORBIDDEN: Record<Layer, Layer[]> = {
  // Pure rules: no HTTP, SQL, Temporal or processes.
  core: ['api', 'services', 'store', 'activities', 'workflows', 'workers', 'tools', 'embedded', 'cli', 'bench'],
  // SQL only; it knows nothing of who calls it.
  store: ['api', 'services', 'activities', 'workflows', 'workers', 'tools', 'embedded', 'cli', 'bench'],
  services: ['api', 'cli', 'bench'],
  api: ['cli', 'activities', 'workers', 'embedded', 'bench'],
  tools: ['api', 'services', 'store', 'activities', 'workflows', 'workers', 'embedded', 'cli', 'bench'],
  activities: ['api', 'workers', 'cli', 'bench'],
  // Deterministic code: activities only as types, nothing with I/O.
  workflows: ['api', 'services', 'store', 'workers', 'tools', 'embedded', 'cli', 'bench'],
  workers: ['api', 'cli', 'bench'],
  embedded: ['api', 'services', 'store', 'activities', 'workflows', 'workers', 'tools', 'cli', 'bench'],
  cli: ['bench'],
  bench: [],
};

/** Outside workflows/ and workers/, only the definitions module of workflows/ may be imported (so no process but a worker loads workflow code). */
const WORKFLOW_DEFINITIONS = 'workflows/definitions';

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

function importsOf(file: string): Import[] {
  const text = readFileSync(file, 'utf8');
  const found: Import[] = [];
  for (const match of text.matchAll(/^(?:import|export)\s+(type\s+)?(?:[^'";]*?\s+from\s+)?'(\.[^']+)'/gm)) {
    const resolved = path.relative(ROOT, path.resolve(path.dirname(file), match[2]));
    found.push({ file: path.relative(ROOT, file), target: resolved, typeOnly: Boolean(match[1]) });
  }
  return found;
}

const layerOf = (relative: string): Layer | undefined => LAYERS.find((layer) => relative === layer || relative.startsWith(`${layer}/`));

const allImports = LAYERS.flatMap((layer) => sourceFiles(path.join(ROOT, layer))).flatMap(importsOf);

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

test('only workers and workflows load workflow code; everyone else imports its definitions', () => {
  const violations = allImports
    .filter(({ file, target, typeOnly }) => {
      const from = layerOf(file);
      if (from === 'workflows' || from === 'workers' || typeOnly) return false;
      return layerOf(target) === 'workflows' && target !== WORKFLOW_DEFINITIONS;
    })
    .map(({ file, target }) => `${file} imports ${target}`);
  expect(violations).toEqual([]);
});

test('the check sees the imports it judges', () => {
  // A scanner that found nothing would pass every rule.
  expect(allImports.length).toBeGreaterThan(200);
  expect(allImports).toContainEqual(expect.objectContaining({ file: 'services/runs.ts', target: 'store/runs' }));
});

test('SQL lives only in store/', () => {
  const sqlOutsideStore = LAYERS.filter((layer) => layer !== 'store' && layer !== 'bench')
    .flatMap((layer) => sourceFiles(path.join(ROOT, layer)))
    .filter((file) => /\b(?:sql|tx|db)`\s*(?:SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|LOCK)\b/i.test(readFileSync(file, 'utf8')))
    .map((file) => path.relative(ROOT, file));
  expect(sqlOutsideStore).toEqual([]);
});
