#!/usr/bin/env node
// Runs one TypeScript entry point (benchmarks, scripts) with the same loader as bin/cairn.js.
require('tsx/cjs');
const path = require('node:path');
require(path.resolve(process.argv[2]));
