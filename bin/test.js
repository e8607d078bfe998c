#!/usr/bin/env node
// `npm test`: the type checks (the server's and the console's) beside jest rather than before it.
// The tests leave about a tenth of two cores idle while they wait on Temporal and PostgreSQL, which
// the checks' 45 CPU-seconds fill. Fails when either fails; arguments go to jest, as before
// (`npm test -- test/unit`).
const { spawn } = require('node:child_process');

function run(script, args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [require.resolve(script), ...args], { stdio: 'inherit' });
    child.on('error', (err) => {
      process.stderr.write(`${script}: ${err.message}\n`);
      resolve(1);
    });
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

async function typeCheck() {
  const server = await run('typescript/bin/tsc', ['--noEmit']);
  const ui = await run('typescript/bin/tsc', ['--noEmit', '-p', 'ui']);
  const failed = server !== 0 || ui !== 0;
  process.stdout.write(failed ? 'type check: FAILED (tsc --noEmit; tsc --noEmit -p ui)\n' : 'type check: passed\n');
  return failed ? 1 : 0;
}

Promise.all([typeCheck(), run('jest/bin/jest', process.argv.slice(2))]).then(([typed, tested]) => {
  // Said again last, where it cannot scroll away behind the tests' summary.
  if (typed !== 0) process.stdout.write('type check: FAILED (see the tsc errors above)\n');
  process.exitCode = typed !== 0 || tested !== 0 ? 1 : 0;
});
