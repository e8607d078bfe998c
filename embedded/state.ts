import { promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/**
 * What the embedded services remember in the data dir: the ports they were given and the pid of a
 * process that may outlive a killed `serve`, so the next start on the same data finds and adopts it.
 */
export interface EmbeddedServiceState {
  port: number;
  uiPort?: number;
  pid?: number;
  /** The Cairn process that started or adopted the service and stops it when it stops. */
  ownerPid?: number;
}

function stateFile(dataDir: string, service: string): string {
  return path.join(dataDir, `${service}.state.json`);
}

export async function readServiceState(dataDir: string, service: string): Promise<EmbeddedServiceState | undefined> {
  try {
    return JSON.parse(await fs.readFile(stateFile(dataDir, service), 'utf8')) as EmbeddedServiceState;
  } catch {
    return undefined;
  }
}

/** Writes a service's state, readable by the server's account only: it holds ports and, for PostgreSQL, the password. */
export async function writeServiceState<S extends EmbeddedServiceState>(dataDir: string, service: string, state: S): Promise<void> {
  const file = stateFile(dataDir, service);
  await fs.rm(`${file}.tmp`, { force: true });
  await fs.writeFile(`${file}.tmp`, JSON.stringify(state), { mode: 0o600 });
  await fs.rename(`${file}.tmp`, file);
}

/** True when something accepts TCP connections on 127.0.0.1:port. */
export function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A port the OS reports free right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** The remembered port when it is still free, else a new free one. */
export async function rememberedOrFreePort(remembered: number | undefined): Promise<number> {
  if (remembered && !(await portAnswers(remembered))) return remembered;
  return freePort();
}

/** Whether a process with this id exists: signal 0 reaches it, or is refused (EPERM: it lives, under another account). */
export function processAlive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The command line of a live process, to make sure a remembered pid is still ours and not a reused number. */
export async function processCommandLine(pid: number): Promise<string> {
  try {
    return (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ');
  } catch {
    return '';
  }
}

export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not come up within ${Math.round(timeoutMs / 1000)} s`);
}

/** Stops a process this one did not start (left by a killed `serve`) and waits until it is gone. */
export async function stopAdopted(pid: number, signal: NodeJS.Signals, timeoutMs = 30_000): Promise<void> {
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (processAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (processAlive(pid)) process.kill(pid, 'SIGKILL');
}

/**
 * For a service found running: while the process that owns it lives (a `serve` on the same data dir,
 * with this being a CLI command), share it and leave it be; when its owner is gone (killed), adopt
 * it: record this process as the owner and stop the service when this process stops.
 */
export async function shareOrAdopt(
  dataDir: string,
  service: string,
  state: EmbeddedServiceState,
  stopAdoptedService: () => Promise<void>,
): Promise<() => Promise<void>> {
  if (state.ownerPid && state.ownerPid !== process.pid && processAlive(state.ownerPid)) return async () => {};
  await writeServiceState(dataDir, service, { ...state, ownerPid: process.pid });
  return stopAdoptedService;
}
