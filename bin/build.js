#!/usr/bin/env node
// `npm run build` (and `npm install`, through bin/setup.js): compiles the server's TypeScript
// sources to CommonJS in dist/, one file per source file in the same layout, with esbuild (the
// compiler tsx itself uses, installed with it), so what runs compiled is what ran through tsx.
// Type checking is `npm run typecheck`'s job, not the build's: compiling takes about a second.
// The build is made in a staging folder and swapped in whole, so a `cairn` starting meanwhile
// sees either the old dist/, none (and runs the sources), or the new one.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { ROOT, DIST, BUILD_INFO, sources, fingerprint } = require('./compiled');

async function build() {
  const started = Date.now();
  const esbuild = require('esbuild');
  const found = sources();
  const staging = `${DIST}.partial-${process.pid}`;
  fs.rmSync(staging, { recursive: true, force: true });
  try {
    await esbuild.build({
      absWorkingDir: ROOT,
      entryPoints: found.files,
      outdir: staging,
      outbase: ROOT,
      bundle: false,
      format: 'cjs',
      platform: 'node',
      target: 'node20',
      sourcemap: true,
      logLevel: 'warning',
    });
    fs.writeFileSync(path.join(staging, BUILD_INFO), `${JSON.stringify({ ...fingerprint(found), built_at: new Date().toISOString() }, null, 2)}\n`);
    const old = `${DIST}.old-${process.pid}`;
    if (fs.existsSync(DIST)) fs.renameSync(DIST, old);
    fs.renameSync(staging, DIST);
    fs.rmSync(old, { recursive: true, force: true });
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
  return { files: found.files.length, ms: Date.now() - started };
}

module.exports = { build };

if (require.main === module) {
  build().then(
    ({ files, ms }) => process.stdout.write(`cairn: compiled ${files} source files into dist/ in ${ms} ms\n`),
    (err) => {
      process.stderr.write(`cairn: the build failed: ${err.message}\n`);
      process.exit(1);
    },
  );
}
