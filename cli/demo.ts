import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { ConfigError, loadConfig, parseFlags } from '../core/config';
import { issueToken } from '../services/access/accounts';
import { commandLine } from './accounts';
import { apiCaller, seedDemo, setDemoPassword } from './demo-seed';
import { openInBrowser } from './desktop';
import { createLogger, startServer } from './serve';
import { stopOnSignal } from './signals';

interface DemoState {
  key: string;
  salt: string;
  seeded: boolean;
}

/** The demo's own install key (notification URLs, trigger secrets and secret answers are sealed), made once and kept in its data dir. */
async function demoState(dataDir: string): Promise<DemoState> {
  const file = path.join(dataDir, 'demo.json');
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as DemoState;
  } catch {
    const state = { key: randomBytes(36).toString('base64url'), salt: randomBytes(18).toString('base64url'), seeded: false };
    await fs.writeFile(file, JSON.stringify(state), { mode: 0o600 });
    return state;
  }
}

async function saveState(dataDir: string, state: DemoState): Promise<void> {
  await fs.writeFile(path.join(dataDir, 'demo.json'), JSON.stringify(state), { mode: 0o600 });
}

/** A local webhook receiver for the demo's notification target: prints one line per delivery. */
async function startReceiver(): Promise<{ url: string; stop(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        process.stdout.write(`demo receiver: ${body.event} ${body.run?.id ?? ''} ${body.run?.status ?? ''}\n`);
      } catch {
        process.stdout.write('demo receiver: a delivery that is not JSON\n');
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/hook`, stop: () => new Promise((resolve) => server.close(() => resolve())) };
}

/**
 * `cairn demo`: a seeded install on the embedded defaults in its own data dir (./data-demo unless
 * --data-dir says otherwise), the console's address and a password to sign in with. The first run
 * seeds it through the API; later runs keep what is there and set a new password.
 */
export async function runDemoCommand(args: string[]): Promise<void> {
  const { values, rest } = parseFlags(args);
  const noBrowser = rest.includes('--no-browser');
  const unknown = rest.find((a) => a !== '--no-browser');
  if (unknown) throw new ConfigError(`unknown argument ${unknown}`);
  const dataDir = path.resolve(values.dataDir ?? process.env.CAIRN_DATA_DIR ?? './data-demo');
  await fs.mkdir(dataDir, { recursive: true });
  const state = await demoState(dataDir);
  const receiver = await startReceiver();
  const env = {
    ...process.env,
    CAIRN_DATA_DIR: dataDir,
    SERVICE_ENCRYPTION_KEY: process.env.SERVICE_ENCRYPTION_KEY || state.key,
    SERVICE_ENCRYPTION_SALT: process.env.SERVICE_ENCRYPTION_SALT || state.salt,
    // The demo's receiver listens on loopback, which deliveries may not reach unless allowed.
    SERVICE_EGRESS_ALLOW: [process.env.SERVICE_EGRESS_ALLOW, '127.0.0.1/32'].filter(Boolean).join(','),
  };
  const config = loadConfig({ ...values, dataDir }, env);
  const logger = createLogger(config);
  const server = await startServer(config, logger);
  const stop = async () => {
    await server.stop();
    await receiver.stop();
  };
  const password = randomBytes(12).toString('base64url');
  try {
    // A short-lived admin token of the demo's own, minted as `cairn token create` mints one.
    const { token, secret } = await issueToken(server.context.sql, commandLine('cairn demo'), { name: 'cairn demo seeding', username: 'admin', kind: 'user', expires_in: 600 });
    const call = apiCaller(server.url, secret);
    if (!state.seeded) {
      process.stdout.write('seeding the demo: templates, a workflow, local hosts, a schedule, a held run, a notification target\n');
      await seedDemo(server.url, secret, { receiverUrl: receiver.url, password });
      await saveState(dataDir, { ...state, seeded: true });
    } else {
      await setDemoPassword(server.url, secret, password);
      const { notifications } = await call('GET', '/v1/notifications');
      const target = notifications.find((n: { name: string }) => n.name === 'local receiver');
      if (target) await call('PUT', `/v1/notifications/${target.id}`, { name: target.name, kind: target.kind, url: receiver.url });
    }
    await call('DELETE', `/v1/tokens/${token.id}`);
  } catch (err) {
    await stop();
    throw err;
  }
  const consoleUrl = `${server.url}/ui/`;
  process.stdout.write(`Cairn demo is serving at ${consoleUrl}\nsign in as demo with the password ${password}\n`);
  if (!noBrowser) openInBrowser(consoleUrl);
  stopOnSignal(logger, 'shutting down', stop);
}
