import { runSecretContext } from '../credentials/seal-contexts';
import { conflict, type DomainError } from '../errors';
import { ENCRYPTION_KEY_VARIABLE, ENCRYPTION_SALT_VARIABLE, SealError, type Sealer } from '../credentials/seal';

/**
 * Secret values a run needs (secret survey answers and the sealed defaults of secret questions),
 * sealed to the run (spec part A 2.4 rules 3 and 4, part B 5.3). Stored in the run's
 * `sealed_vars` (var -> sealed text) and opened only where the run executes, where they join its
 * extra vars and its output masker. Nobody reads them back: reads show their names only.
 *
 * Context: `run:<run id>:<state digest>:<var>`. A sealed value opens only for the run it was
 * sealed to, created with the digest it was created with (what an approval binds to), and only as
 * the variable it was sealed as: copied to another run, or kept after the run's digest changed, it
 * does not open.
 *
 * Carrying (rerun, retry; and at submission every step of a workflow and every shard of a split):
 * the server opens the run's sealed values in memory and seals them again to each new run under
 * that run's own context. A rerun is held to the digest its original was created with because the
 * original's values open only under that digest; the new run gets its own binding.
 */

export const ENCRYPTION_SETTINGS = [ENCRYPTION_KEY_VARIABLE, ENCRYPTION_SALT_VARIABLE] as const;


/**
 * The 409 for a write that must seal a secret on a server without the encryption key and salt.
 * `what` says what was to be sealed, such as "the secret default" or "the secret answer".
 */
export function encryptionKeyRequired(what: string, vars: readonly string[]): DomainError {
  const names = [...vars].sort();
  return conflict(
    `sealing ${what} of ${names.join(', ')} needs the server's encryption key: set ${ENCRYPTION_KEY_VARIABLE} and ${ENCRYPTION_SALT_VARIABLE} on this server (and every worker) and restart it`,
    { variables: names, settings: [...ENCRYPTION_SETTINGS] },
  );
}

/** Seals each secret to the run; null when there is none (the column stays null). */
export function sealRunSecrets(
  sealer: Sealer | undefined,
  runId: string,
  stateDigest: string | null,
  secrets: Readonly<Record<string, string>> | undefined,
): Record<string, string> | null {
  const names = Object.keys(secrets ?? {});
  if (names.length === 0) return null;
  if (!sealer) throw encryptionKeyRequired('the secret value', names);
  const sealed: Record<string, string> = {};
  for (const name of names.sort()) sealed[name] = sealer.seal(secrets![name], runSecretContext(runId, stateDigest, name));
  return sealed;
}

/** A run's sealed value that cannot be opened here. The message names the variable and the fix, never a value. */
export class RunSecretsError extends Error {
  override readonly name = 'RunSecretsError';
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(message);
  }
}

/** Why a sealed value would not open, and what to do about it. */
export function sealedValueFault(what: string, sealer: Sealer | undefined, err?: unknown): string {
  const restore = `restore the ${ENCRYPTION_KEY_VARIABLE} and ${ENCRYPTION_SALT_VARIABLE} it was sealed with`;
  if (!sealer) return `${what} cannot be opened: this server has no ${ENCRYPTION_KEY_VARIABLE} and ${ENCRYPTION_SALT_VARIABLE}; ${restore}`;
  if (err instanceof SealError && err.reason === 'other_key') return `${what} was sealed under another encryption key and salt: ${restore}`;
  if (err instanceof SealError) return `${what} does not open (${err.reason}: it was altered or moved from elsewhere); set it again`;
  return `${what} could not be opened`;
}

/**
 * Opens every secret sealed to the run, by var. Throws `RunSecretsError` for the first that does
 * not open (no sealer here, another key, altered), naming the variable and the fix.
 */
export function openRunSecrets(
  sealer: Sealer | undefined,
  run: { id: string; state_digest: string | null; sealed_vars: Record<string, string> | null },
): Record<string, string> {
  const opened: Record<string, string> = {};
  for (const [name, sealed] of Object.entries(run.sealed_vars ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const what = `the sealed secret ${name} of run ${run.id}`;
    if (!sealer) throw new RunSecretsError(name, sealedValueFault(what, sealer));
    try {
      opened[name] = sealer.open(sealed, runSecretContext(run.id, run.state_digest, name));
    } catch (err) {
      throw new RunSecretsError(name, sealedValueFault(what, sealer, err));
    }
  }
  return opened;
}

/**
 * The secrets a rerun or retry carries from the run it comes from (spec part A 2.4 rule 4); a
 * value that does not open is a 409 naming the variable and the fix (spec part B 7.2).
 */
export function carriedSecrets(
  sealer: Sealer | undefined,
  run: { id: string; state_digest: string | null; sealed_vars: Record<string, string> | null },
): Record<string, string> | undefined {
  if (!run.sealed_vars || Object.keys(run.sealed_vars).length === 0) return undefined;
  try {
    return openRunSecrets(sealer, run);
  } catch (err) {
    if (err instanceof RunSecretsError) throw conflict(err.message, { variable: err.variable, settings: [...ENCRYPTION_SETTINGS] });
    throw err;
  }
}

/**
 * The literal values a run's output masker hides: each secret, and each line of a secret that
 * spans lines (output reaches the masker a line at a time, so a multi-line secret is seen in parts).
 */
export function knownSecretValues(secrets: Readonly<Record<string, string>>): string[] {
  const values = new Set<string>();
  for (const value of Object.values(secrets)) {
    values.add(value);
    for (const line of value.split(/\r?\n/)) values.add(line);
  }
  return [...values];
}
