import { ConfigError } from '../core/config';
import { findIacBinary, IAC_BINARIES, IacBinaryUnavailable, iacCachePath, locateIacBinary, type GoBinary } from '../embedded/iac-binaries';
import { OPA } from '../embedded/opa';

/** What `cairn tools` builds: the infrastructure-as-code tools, and Open Policy Agent for --policy-file. */
const INSTALLABLE: Record<string, GoBinary> = { ...IAC_BINARIES, opa: OPA };

/**
 * `cairn tools install [opentofu|terraform|opa]` and `cairn tools list`: the binaries Cairn builds
 * from their Go modules into the machine cache (embedded/iac-binaries.ts, embedded/opa.ts). A run
 * (or a start with --policy-file) builds what it needs on first use anyway; installing ahead keeps
 * it from waiting.
 */
export async function runToolsCommand(args: string[], out: (line: string) => void = (l) => process.stdout.write(`${l}\n`)): Promise<void> {
  const [sub, ...names] = args;
  if (sub === 'list') {
    for (const which of Object.values(INSTALLABLE)) {
      const found = await locateIacBinary(which).catch((err: Error) => ({ path: err.message, from: 'error' as const }));
      out(`${which.tool}\t${which.version}\t${found ? `${found.path} (${found.from})` : `not installed; builds into ${iacCachePath(which)} on first use`}`);
    }
    return;
  }
  if (sub !== 'install') throw new ConfigError('usage: cairn tools install [opentofu|terraform|opa]... | cairn tools list');
  const wanted = names.length ? names : ['opentofu'];
  for (const name of wanted) {
    const which = INSTALLABLE[name];
    if (!which) throw new ConfigError(`unknown tool "${name}"; cairn tools install takes opentofu, terraform or opa`);
    try {
      const path = await findIacBinary(which, out);
      out(`${which.tool}: ${path}`);
    } catch (err) {
      if (err instanceof IacBinaryUnavailable) throw new ConfigError(err.message);
      throw err;
    }
  }
}
