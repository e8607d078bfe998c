#!/usr/bin/env node
// Runs the compiled JavaScript in dist/ (`npm run build`, done by `npm install`) when it matches
// the sources; otherwise the TypeScript sources through tsx, which compiles them on load (a
// developer's checkout with edits since the last build, or an install whose build was skipped).
// CAIRN_FROM_SOURCE=1 always runs the sources. See docs/operations.md, "Packaging".
'use strict';
const path = require('node:path');

function entry() {
  if (process.env.CAIRN_FROM_SOURCE === '1') return undefined;
  const { DIST, staleReason } = require('./compiled');
  const reason = staleReason();
  if (reason === null) return path.join(DIST, 'cli', 'main.js');
  if (process.env.CAIRN_DEBUG_LOADER === '1') process.stderr.write(`cairn: running the TypeScript sources: ${reason}\n`);
  return undefined;
}

const compiled = entry();
if (compiled) {
  require(compiled).runCli(process.argv.slice(2));
} else {
  require('tsx/cjs');
  require('../cli/main.ts').runCli(process.argv.slice(2));
}
