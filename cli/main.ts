import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig, parseFlags, settingsHelp } from '../core/config';
import { createLogger, openDatabase, startServer } from './serve';
import { runTokenCommand, runUserCommand } from './accounts';
import { runAuditCommand } from './audit';
import { runImportCommand } from './import';
import { runWorkerCommand } from './worker';
import { runDemoCommand } from './demo';
import { runDesktopCommand } from './desktop';
import { runToolsCommand } from './tools';
import { stopOnSignal } from './signals';
import { TemporalCliUnavailable } from '../embedded/temporal-binary';

const USAGE = `usage: cairn <command> [flags]

commands:
  serve                      run the API and the pool worker (embedded PostgreSQL and Temporal when unset)
  worker                     run an extra pool worker against the same PostgreSQL and Temporal
  desktop                    serve, and open the web console in this machine's browser
  demo [--no-browser]        a seeded demo install in ./data-demo: prints the console's address and a password
  token create --username U --name N [--kind user|agent]
                             mint an API token and print it once
  user create --username U --role admin|operator|viewer [--password-stdin]
                             create an account
  tools install [opentofu|terraform|opa]
                             build OpenTofu (default), Terraform or Open Policy Agent from its Go module into the machine cache
  tools list                 where each such binary comes from
  audit verify --seal <seal.json> <file>
                             verify an audit bundle or a run receipt offline against the pinned seal
  import <format> <file> [--apply] [--name N] [--inventory ID] [--server URL]
                             preview (or apply) another system's export on a running server (token in CAIRN_TOKEN)
  import cron <crontab> [--system] [--apply] [--server URL]
                             a crontab's jobs as templates and schedules, previewed first

flags (each also an environment variable):
${settingsHelp()}
`;

async function serveCommand(args: string[]): Promise<void> {
  const { values, rest } = parseFlags(args);
  if (rest.length) throw new ConfigError(`unknown argument ${rest[0]}`);
  const config = loadConfig(values);
  const logger = createLogger(config);
  const server = await startServer(config, logger);
  if (server.adminToken) process.stdout.write(`admin token: ${server.adminToken}\n`);
  if (config.open) process.stdout.write('WARNING: this install is OPEN (--open): requests without a token act as its admin until the first token is minted\n');
  process.stdout.write(`Cairn is serving at ${server.url}\n`);
  if (server.temporalUiUrl) process.stdout.write(`Temporal UI: ${server.temporalUiUrl}\n`);
  stopOnSignal(logger, 'shutting down', server.stop);
}

export async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  switch (command) {
    case 'serve':
      return serveCommand(args);
    case 'worker':
      return runWorkerCommand(args);
    case 'desktop':
      return runDesktopCommand(args);
    case 'demo':
      return runDemoCommand(args);
    case 'token':
      return runTokenCommand(args, openDatabase, createLogger);
    case 'user':
      return runUserCommand(args, openDatabase, createLogger, () => readFileSync(0, 'utf8').trim());
    case 'audit':
      return runAuditCommand(args);
    case 'import':
      return runImportCommand(args);
    case 'tools':
      return runToolsCommand(args);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return;
    default:
      throw new ConfigError(`unknown command "${command}"\n\n${USAGE}`);
  }
}

/** Entry point of bin/cairn.js: a usage or configuration fault exits 2 with one line, anything else 1. */
export function runCli(argv: string[]): void {
  main(argv).catch((err) => {
    const known = err instanceof ConfigError || err instanceof TemporalCliUnavailable;
    process.stderr.write(`cairn: ${known ? err.message : ((err as Error).stack ?? String(err))}\n`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  });
}
