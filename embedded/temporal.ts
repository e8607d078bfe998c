import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { findTemporalCli } from './temporal-binary';
import {
  portAnswers,
  shareOrAdopt,
  stopAdopted,
  processAlive,
  processCommandLine,
  readServiceState,
  rememberedOrFreePort,
  waitFor,
  writeServiceState,
} from './state';

/** The dev server ended before it answered: worth another try on other ports. */
class EarlyExit extends Error {}

export interface EmbeddedTemporal {
  address: string;
  uiUrl: string;
  /** Stops the dev server when this process owns it (started it, or adopted it from a killed `serve`). */
  stop(): Promise<void>;
}

/**
 * Dynamic config that shortens the dev server's task dispatch path. The stock values favour a
 * cluster's throughput; a single-node install wants low latency per run.
 */
export const DEV_SERVER_TUNING = [
  'history.transferProcessorMaxPollRPS=1000',
  'history.timerProcessorMaxPollRPS=1000',
  'matching.numTaskqueueReadPartitions=1',
  'matching.numTaskqueueWritePartitions=1',
];

/**
 * Runs `temporal server start-dev` on the data dir's SQLite file, or adopts the one a previous
 * (killed) `serve` left running on the same data dir, stopping it in its turn.
 */
export async function startEmbeddedTemporal(
  dataDir: string,
  namespace: string,
  log: (line: string) => void,
): Promise<EmbeddedTemporal> {
  const dir = path.join(dataDir, 'temporal');
  await fs.mkdir(dir, { recursive: true });
  const dbFile = path.join(dir, 'temporal.sqlite');
  const remembered = await readServiceState(dataDir, 'temporal');

  if (remembered?.pid && processAlive(remembered.pid) && (await processCommandLine(remembered.pid)).includes(dbFile)) {
    if (await portAnswers(remembered.port)) {
      log(`using the Temporal dev server already running on this data dir (pid ${remembered.pid})`);
      const pid = remembered.pid;
      return {
        address: `127.0.0.1:${remembered.port}`,
        uiUrl: `http://127.0.0.1:${remembered.uiPort}`,
        stop: await shareOrAdopt(dataDir, 'temporal', remembered, () => stopAdopted(pid, 'SIGTERM')),
      };
    }
  }

  const binary = await findTemporalCli(log);
  const logFile = createWriteStream(path.join(dir, 'server.log'), { flags: 'a' });
  // None of the server's environment (its database URL, encryption key and salt) goes with it.
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? dir, TMPDIR: process.env.TMPDIR ?? '/tmp', LANG: 'C.UTF-8' };
  let port = await rememberedOrFreePort(remembered?.port);
  let uiPort = await rememberedOrFreePort(remembered?.uiPort);
  if (uiPort === port) uiPort = await rememberedOrFreePort(undefined);
  let child: ChildProcess;
  let exited = false;
  // A free port can be taken by another process between our look and the dev server's bind (two
  // installs starting side by side): a server that exits at start is tried again on fresh ports.
  for (let attempt = 1; ; attempt++) {
    const args = [
      'server', 'start-dev',
      '--db-filename', dbFile,
      '--ip', '127.0.0.1',
      '--port', String(port),
      '--ui-port', String(uiPort),
      '--ui-ip', '127.0.0.1',
      '--namespace', namespace,
      '--log-level', 'warn',
      // WAL with normal sync: durable across a crash of any process, and a third of the CPU per run.
      '--sqlite-pragma', 'journal_mode=wal',
      '--sqlite-pragma', 'synchronous=normal',
      ...DEV_SERVER_TUNING.flatMap((value) => ['--dynamic-config-value', value]),
    ];
    const started = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    child = started;
    started.stdout.pipe(logFile, { end: false });
    started.stderr.pipe(logFile, { end: false });
    exited = false;
    started.once('exit', () => {
      if (child === started) exited = true;
    });
    await writeServiceState(dataDir, 'temporal', { port, uiPort, pid: started.pid, ownerPid: process.pid });
    try {
      await waitFor('the Temporal dev server', async () => {
        if (exited) throw new EarlyExit(`the Temporal dev server exited at start; see ${path.join(dir, 'server.log')}`);
        return portAnswers(port);
      }, 60_000);
      break;
    } catch (err) {
      started.kill('SIGKILL');
      if (!(err instanceof EarlyExit) || attempt >= 3) throw err;
      log(`the Temporal dev server exited at start (attempt ${attempt}); trying again on fresh ports`);
      port = await rememberedOrFreePort(undefined);
      uiPort = await rememberedOrFreePort(undefined);
    }
  }
  return {
    address: `127.0.0.1:${port}`,
    uiUrl: `http://127.0.0.1:${uiPort}`,
    stop: async () => {
      if (exited) return;
      const done = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await done;
      clearTimeout(timer);
    },
  };
}
