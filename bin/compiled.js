// Whether the compiled JavaScript in dist/ matches the TypeScript sources (bin/build.js writes
// it; bin/cairn.js runs it when it does). Plain CommonJS with no dependencies: it runs before
// anything else is loaded.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const DIST = path.join(ROOT, 'dist');
/** The folders of the server's code, each compiled to dist/<folder> (tests, benchmarks and the console are not). */
const SOURCE_DIRS = ['activities', 'api', 'cli', 'core', 'embedded', 'runtime', 'services', 'store', 'tools', 'workers', 'workflows'];
const BUILD_INFO = 'build-info.json';
/** Raised when the way bin/build.js compiles changes, so an older dist/ is rebuilt rather than run. */
const BUILD_FORMAT = 1;

/** Every TypeScript source file (relative paths, sorted), and the newest modification time among them. */
function sources(root = ROOT) {
  const files = [];
  let newest = 0;
  const walk = (dir) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(rel);
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
        files.push(rel);
        newest = Math.max(newest, fs.statSync(path.join(root, rel)).mtimeMs);
      }
    }
  };
  for (const dir of SOURCE_DIRS) if (fs.existsSync(path.join(root, dir))) walk(dir);
  files.sort();
  return { files, newest };
}

/** What a build is of: the build format, the set of source files and the newest of their times. */
function fingerprint({ files, newest }) {
  const hash = crypto.createHash('sha256').update(`cairn build ${BUILD_FORMAT}\n`);
  for (const file of files) hash.update(`${file}\n`);
  return { format: BUILD_FORMAT, files: hash.digest('hex'), newest_mtime_ms: newest };
}

/**
 * Why dist/ cannot be run (not built, built from other sources, or sources edited since), or
 * null when it is current. Costs one stat per source file (a few milliseconds).
 */
function staleReason() {
  let info;
  try {
    info = JSON.parse(fs.readFileSync(path.join(DIST, BUILD_INFO), 'utf8'));
  } catch {
    return 'dist/ is not built';
  }
  const now = fingerprint(sources());
  if (info.format !== now.format || info.files !== now.files) return 'dist/ was built from other source files';
  if (now.newest_mtime_ms > info.newest_mtime_ms) return 'a source file changed after dist/ was built';
  return null;
}

module.exports = { ROOT, DIST, SOURCE_DIRS, BUILD_INFO, sources, fingerprint, staleReason };
