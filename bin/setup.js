#!/usr/bin/env node
// `npm install` runs this once the packages are in. First, Cairn runs every tool in a bubblewrap
// sandbox with its own network (slirp4netns), so both must be on the machine: as root on a
// Debian-like system it installs them; otherwise it says what to install. Then it compiles the
// server to dist/ (bin/build.js, about a second), which bin/cairn.js runs, and builds the web
// console (ui/build.mjs) into ui/dist, which `cairn serve` serves at /ui/. No step fails the
// install: `cairn serve` checks the sandbox again at start, runs the TypeScript sources through
// tsx when dist/ is missing or stale, and answers /ui/ with how to build the console when it is
// missing.
'use strict';
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const NEEDED = [
  ['bwrap', 'bubblewrap'],
  ['slirp4netns', 'slirp4netns'],
];

function onPath(name) {
  return (process.env.PATH || '/usr/bin:/bin')
    .split(':')
    .concat(['/usr/bin', '/usr/sbin'])
    .some((dir) => dir && fs.existsSync(path.join(dir, name)));
}

function main() {
  if (process.platform !== 'linux') return;
  const missing = NEEDED.filter(([binary]) => !onPath(binary)).map(([, pkg]) => pkg);
  if (missing.length === 0) return;
  const aptGet = spawnSync('sh', ['-c', 'command -v apt-get'], { encoding: 'utf8' }).stdout.trim();
  if (process.getuid && process.getuid() === 0 && aptGet) {
    process.stderr.write(`cairn: installing ${missing.join(' and ')} from Debian's packages (the run sandbox)\n`);
    try {
      execFileSync(aptGet, ['install', '-y', '-q', ...missing], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    } catch {
      execFileSync(aptGet, ['update', '-q'], { stdio: 'inherit' });
      execFileSync(aptGet, ['install', '-y', '-q', ...missing], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    }
    return;
  }
  process.stderr.write(
    `cairn: tools run in a sandbox that needs ${missing.join(' and ')}; install ${missing.length > 1 ? 'them' : 'it'} ` +
      `(Debian and Ubuntu: sudo apt-get install ${missing.join(' ')}) before \`npm start\`\n`,
  );
}

/** Compiles the server into dist/ (bin/build.js); a failure leaves `cairn` running the sources through tsx. */
async function compileServer() {
  try {
    const { build } = require('./build');
    const { files, ms } = await build();
    process.stderr.write(`cairn: compiled ${files} source files into dist/ in ${ms} ms\n`);
  } catch (err) {
    process.stderr.write(`cairn: dist/ was not built (${err.message}); \`cairn\` runs the TypeScript sources through tsx instead (run \`npm run build\` to retry)\n`);
  }
}

/** Builds the console with the build tools of devDependencies; an install without them (--omit=dev) says so. */
function buildConsole() {
  const root = path.resolve(__dirname, '..');
  const script = path.join(root, 'ui', 'build.mjs');
  if (!fs.existsSync(script) || !fs.existsSync(path.join(root, 'ui', 'src'))) return;
  for (const tool of ['esbuild', 'react', '@mantine/core']) {
    try {
      require.resolve(tool, { paths: [root] });
    } catch {
      process.stderr.write(`cairn: the web console is not built: ${tool} is missing (an install without devDependencies); run \`npm install\` with them, or \`node ui/build.mjs\`\n`);
      return;
    }
  }
  const result = spawnSync(process.execPath, [script], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.stderr.write('cairn: the web console did not build (see above); the API works without it\n');
}

try {
  main();
} catch (err) {
  process.stderr.write(`cairn: could not install the run sandbox's packages (${err.message}); install bubblewrap and slirp4netns yourself\n`);
}
compileServer().then(buildConsole);
