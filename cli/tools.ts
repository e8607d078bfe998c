import { ConfigError } from '../core/config';
import { findIacBinary, IAC_BINARIES, IacBinaryUnavailable, iacCachePath, locateIacBinary } from '../embedded/iac-binaries';

/**
 * `cairn tools install [opentofu|terraform]` and `cairn tools list`: the infrastructure-as-code
 * binaries Cairn builds from their Go modules into the machine cache (embedded/iac-binaries.ts).
 * A run builds its tool on first use anyway; installing ahead keeps that first run from waiting.
 */
export async function runToolsCommand(args: string[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<void> {
  const [sub, ...names] = args;
  if (sub === 'list') {
    for (const which of Object.values(IAC_BINARIES)) {
      const found = await locateIacBinary(which).catch((err: Error) => ({ path: err.message, from: 'error' as const }));
      out(`${which.tool}\t${which.version}\t${found ? `${found.path} (${found.from})` : `not installed; builds into ${iacCachePath(which)} on first use`}`);
    }
    return;
  }
  if (sub !== 'install') throw new ConfigError('usage: cairn tools install [opentofu|terraform]... | cairn tools list');
  const wanted = names.length ? names : ['opentofu'];
  for (const name of wanted) {
    const which = IAC_BINARIES[name as keyof typeof IAC_BINARIES];
    if (!which) throw new ConfigError(`unknown tool "${name}"; cairn tools install takes opentofu or terraform`);
    try {
      const path = await findIacBinary(which, out);
      out(`${which.tool}: ${path}`);
    } catch (err) {
      if (err instanceof IacBinaryUnavailable) throw new ConfigError(err.message);
      throw err;
    }
  }
}
