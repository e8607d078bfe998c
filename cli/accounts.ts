import type { Logger } from 'pino';
import { DomainError } from '../core/errors';
import { parseInput } from '../api/validate';
import { tokenCreate, userCreate } from '../api/schemas/accounts';
import { createUser, fillUsernameKeys, issueToken, type AccountRequest } from '../services/access/accounts';
import { serviceOrigin } from '../services/audit/audit';
import type { Sql } from '../store/db';
import { migrate } from '../store/migrate';
import { ConfigError, loadConfig, parseFlags, type Config } from '../core/config';

type OpenDatabase = (config: Config, logger: Logger) => Promise<{ sql: Sql; stop(): Promise<void> }>;
type CreateLogger = (config: Config) => Logger;

/** `--name value` pairs of a subcommand, beside the server settings. */
function subcommandFlags(args: string[], allowed: string[]): { config: Config; flags: Record<string, string | true> } {
  const { values, rest } = parseFlags(args);
  const flags: Record<string, string | true> = {};
  for (let i = 0; i < rest.length; i++) {
    const name = rest[i].replace(/^--/, '');
    if (!rest[i].startsWith('--') || !allowed.includes(name)) throw new ConfigError(`unknown argument ${rest[i]}`);
    const next = rest[i + 1];
    flags[name] = next === undefined || next.startsWith('--') ? true : (i++, next);
  }
  return { config: loadConfig(values), flags };
}

async function withDatabase<T>(config: Config, open: OpenDatabase, createLogger: CreateLogger, work: (sql: Sql) => Promise<T>): Promise<T> {
  const logger = createLogger({ ...config, logLevel: 'warn' });
  const database = await open(config, logger);
  try {
    await migrate(database.sql);
    await fillUsernameKeys(database.sql);
    return await work(database.sql);
  } finally {
    await database.stop();
  }
}

/** Input errors from the shared API schemas, reworded for the command line. */
function checked<T>(parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

/** A change asked for on the command line, recorded in the chain as `created`. */
export const commandLine = (path: string): AccountRequest => ({ by: 'command-line', origin: serviceOrigin('CLI', path), outcome: 'created' });

/** A refusal by the account rules (a taken name, an unknown account) as a one-line usage error. */
async function refusedAsUsage<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof DomainError) throw new ConfigError(err.message);
    throw err;
  }
}

/** `cairn token create --username U --name N [--kind user|agent]`: prints the secret once. */
export async function runTokenCommand(args: string[], open: OpenDatabase, createLogger: CreateLogger): Promise<void> {
  if (args[0] !== 'create') throw new ConfigError('usage: cairn token create --username U --name N [--kind user|agent]');
  const { config, flags } = subcommandFlags(args.slice(1), ['username', 'name', 'kind']);
  if (typeof flags.username !== 'string') throw new ConfigError('--username is required');
  const input = checked(() => parseInput(tokenCreate, { name: flags.name, kind: flags.kind, username: flags.username }));
  await withDatabase(config, open, createLogger, async (sql) => {
    const { token, secret } = await refusedAsUsage(() => issueToken(sql, commandLine('cairn token create'), input));
    process.stdout.write(`token id: ${token.id}\ntoken: ${secret}\n`);
  });
}

/** `cairn user create --username U --role R [--password-stdin]`. */
export async function runUserCommand(
  args: string[],
  open: OpenDatabase,
  createLogger: CreateLogger,
  readStdin: () => string,
): Promise<void> {
  if (args[0] !== 'create') throw new ConfigError('usage: cairn user create --username U --role admin|operator|viewer [--password-stdin]');
  const { config, flags } = subcommandFlags(args.slice(1), ['username', 'role', 'password-stdin']);
  const input = checked(() =>
    parseInput(userCreate, {
      username: flags.username,
      role: flags.role,
      password: flags['password-stdin'] ? readStdin() : undefined,
    }),
  );
  await withDatabase(config, open, createLogger, async (sql) => {
    const account = await refusedAsUsage(() => createUser(sql, commandLine('cairn user create'), input));
    process.stdout.write(`user ${account.username} created (${account.id}, ${account.role})\n`);
  });
}
