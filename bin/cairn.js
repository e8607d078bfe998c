#!/usr/bin/env node
// Runs the TypeScript sources directly: Cairn ships as source and tsx compiles on load.
require('tsx/cjs');
require('../cli/main.ts').runCli(process.argv.slice(2));
