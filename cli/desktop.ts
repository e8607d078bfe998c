import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { loadConfig, parseFlags, ConfigError } from '../core/config';
import { updateUser } from '../services/access/accounts';
import { getAccountByUsername } from '../store/accounts';
import { commandLine } from './accounts';
import { createLogger, startServer } from './serve';
import { stopOnSignal } from './signals';

/** The command that opens a URL in the machine's browser, or undefined where there is none to try. */
export function browserOpener(platform: NodeJS.Platform = process.platform, env: NodeJS.ProcessEnv = process.env): { command: string; args: string[] } | undefined {
  if (platform === 'darwin') return { command: 'open', args: [] };
  if (platform === 'win32') return { command: 'cmd', args: ['/c', 'start', '""'] };
  // A Linux or BSD machine without a display (a server, a container) has no browser to open.
  if (!env.DISPLAY && !env.WAYLAND_DISPLAY) return undefined;
  return { command: 'xdg-open', args: [] };
}

/** Opens the URL in the browser when one can be opened; otherwise says where to go. Never fails the command. */
export function openInBrowser(url: string): void {
  const opener = browserOpener();
  const fallback = () => void process.stdout.write(`open ${url} in your browser\n`);
  if (!opener) {
    fallback();
    return;
  }
  try {
    const child = spawn(opener.command, [...opener.args, url], { stdio: 'ignore', detached: true });
    child.on('error', fallback);
    child.on('exit', (code) => {
      if (code) fallback();
    });
    child.unref();
  } catch {
    fallback();
  }
}

/**
 * `cairn desktop`: `cairn serve` with the console opened in the machine's browser. On an install's
 * first start it also gives the first admin a password (printed once), since the console signs in
 * with a password and the first admin otherwise has none anyone knows.
 */
export async function runDesktopCommand(args: string[]): Promise<void> {
  const { values, rest } = parseFlags(args);
  if (rest.length) throw new ConfigError(`unknown argument ${rest[0]}`);
  const config = loadConfig(values);
  const logger = createLogger(config);
  const server = await startServer(config, logger);
  if (server.adminToken) {
    const admin = await getAccountByUsername(server.context.sql, 'admin');
    const password = randomBytes(12).toString('base64url');
    if (admin) {
      await updateUser(server.context.sql, commandLine('cairn desktop'), admin.id, { password });
      process.stdout.write(`admin token: ${server.adminToken}\nconsole sign-in: admin with the password ${password} (printed this once)\n`);
    }
  }
  const consoleUrl = `${server.url}/ui/`;
  process.stdout.write(`Cairn is serving at ${server.url}\nconsole: ${consoleUrl}\n`);
  if (server.temporalUiUrl) process.stdout.write(`Temporal UI: ${server.temporalUiUrl}\n`);
  openInBrowser(consoleUrl);
  stopOnSignal(logger, 'shutting down', server.stop);
}
