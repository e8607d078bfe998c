#!/usr/bin/env node
// Builds the web console (ui/src) into ui/dist, which the server serves at /ui/: one script and
// one stylesheet, named by their content's hash, and the page that loads them. No inline script
// or style anywhere, so the page runs under a Content-Security-Policy without 'unsafe-inline'.
// `node ui/build.mjs --watch` rebuilds on every change.
//
// A server may be serving ui/dist while it is rebuilt (the browser tests rebuild it beside other
// tests that load /ui/): the build is made in a staging directory and moved in by renames, each
// file replaced whole, the page last, so a reader finds the old console or the new one and never
// a missing or half-written file. Assets the new page does not load are removed after it is in.
import * as esbuild from 'esbuild';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'dist');
const watch = process.argv.includes('--watch');

const options = {
  entryPoints: { console: path.join(here, 'src', 'main.tsx') },
  bundle: true,
  outdir: path.join(dist, 'assets'),
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  format: 'esm',
  target: ['chrome110', 'firefox110', 'safari16'],
  jsx: 'automatic',
  minify: !watch,
  sourcemap: watch ? 'linked' : false,
  metafile: true,
  legalComments: 'none',
  define: { 'process.env.NODE_ENV': JSON.stringify(watch ? 'development' : 'production') },
  loader: { '.woff2': 'file', '.svg': 'file', '.png': 'file' },
  logLevel: 'warning',
};

/**
 * The page: the built script and stylesheet by their hashed names, nothing inline; written whole,
 * by a rename. Then the assets it does not load (an earlier build's) are removed.
 */
function writePage(metafile) {
  const outputs = Object.keys(metafile.outputs).map((file) => path.basename(file));
  const script = outputs.find((name) => /^console-.*\.js$/.test(name));
  const style = outputs.find((name) => /^console-.*\.css$/.test(name));
  const iconName = outputs.find((name) => /^icon-.*\.svg$/.test(name));
  if (!script || !style || !iconName) throw new Error(`the console build made no script, stylesheet or icon (${outputs.join(', ')})`);
  const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Cairn</title>
<link rel="icon" href="/ui/assets/${iconName}" type="image/svg+xml">
<link rel="stylesheet" href="/ui/assets/${style}">
<script type="module" src="/ui/assets/${script}"></script>
</head>
<body>
<div id="root"></div>
<noscript>The Cairn console needs JavaScript. The API at /v1 works without it.</noscript>
</body>
</html>
`;
  const partial = path.join(dist, `index.html.partial-${process.pid}`);
  writeFileSync(partial, page);
  renameSync(partial, path.join(dist, 'index.html'));
  for (const name of readdirSync(path.join(dist, 'assets'))) {
    if (!outputs.includes(name)) rmSync(path.join(dist, 'assets', name), { force: true });
  }
}

mkdirSync(path.join(dist, 'assets'), { recursive: true });

if (watch) {
  const context = await esbuild.context({
    ...options,
    plugins: [{ name: 'page', setup: (build) => build.onEnd((result) => result.metafile && writePage(result.metafile)) }],
  });
  await context.watch();
  process.stdout.write('watching ui/src; reload the console after each change\n');
} else {
  const started = Date.now();
  const staging = mkdtempSync(path.join(here, 'dist.partial-'));
  try {
    const result = await esbuild.build({ ...options, outdir: staging });
    for (const name of readdirSync(staging)) renameSync(path.join(staging, name), path.join(dist, 'assets', name));
    writePage(result.metafile);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  process.stdout.write(`cairn: console built into ui/dist in ${Date.now() - started} ms\n`);
}
