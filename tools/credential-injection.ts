import { ansibleCredentialsOf, BUILT_IN_KINDS, injectionOf, type AnsibleCredentials, type Injection, type OpenedCredential } from '../core/credentials/credential-kinds';
import { IDENTITY_TOKEN_VARIABLES } from '../core/credentials/federated-kinds';
import { isProtectedEnvName } from './extra-vars';

/**
 * How a run's opened credentials reach its tool (spec part A 2.9, part B 5.3): as environment
 * variables, extra vars and files written 0600 into the run's work dir (removed with it when the
 * run ends). They are opened only in the worker executing the run (activities/runs.ts, through
 * services/credentials.ts openRunCredentials), and every secret value opened joins the run's
 * output masker; none is ever written to an event, a log line, the audit chain, a receipt or
 * evidence.
 */

/** The variables the built-in kinds set (some `CAIRN_` names among them); any other protected name is never set. */
const BUILT_IN_ENV = new Set<string>([...BUILT_IN_KINDS.flatMap((kind) => Object.keys(kind.injectors.env)), ...IDENTITY_TOKEN_VARIABLES]);
const refused = (name: string) => isProtectedEnvName(name) && !BUILT_IN_ENV.has(name);

/**
 * What a script tool (bash, python, and any tool without its own use of credentials) receives: the
 * kinds' injectors filled in. A variable a tool relies on (PATH, HOME, LD_*, …) is never set.
 */
export function scriptToolInjection(credentials: readonly OpenedCredential[], workDir: string): Injection {
  const injection = injectionOf(credentials, workDir);
  for (const name of Object.keys(injection.env)) if (refused(name)) delete injection.env[name];
  return injection;
}

/**
 * What the ansible tool receives: the machine credential's user, key file, become settings and
 * passwords for ansible's own options, and every other credential injected as for a script tool.
 * `files` are written into the work dir with the tool's own before the tool starts (activities/runs.ts).
 */
export function ansibleToolCredentials(credentials: readonly OpenedCredential[], workDir: string): AnsibleCredentials {
  const result = ansibleCredentialsOf(credentials, workDir);
  for (const name of Object.keys(result.env)) if (refused(name)) delete result.env[name];
  return result;
}
