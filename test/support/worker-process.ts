/**
 * `cairn worker` as a real process, for tests: the same worker code as the command, with one
 * license-signing key trusted beside Cairn's own, which only a harness can do. Usage:
 *
 *   node bin/run-ts.js test/support/worker-process.ts <public JWK as JSON> [cairn worker flags…]
 *
 * A usage or configuration fault exits 2 with one line, as `cairn` does.
 */
import { ConfigError } from '../../core/config';
import { runWorkerCommand } from '../../cli/worker';

const [, , , trustedKey, ...args] = process.argv;
runWorkerCommand(args, { licenseKeys: [JSON.parse(trustedKey) as object] }).catch((err) => {
  process.stderr.write(`cairn: ${err instanceof ConfigError ? err.message : ((err as Error).stack ?? String(err))}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
