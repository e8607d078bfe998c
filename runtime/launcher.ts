import { fork, type ChildProcess } from 'node:child_process';
import type { LauncherEvent, LauncherRequest } from './launcher-protocol';
import type { ProcessExit, SpawnedTool } from './process';
import type { SandboxBind, SandboxSettings } from './sandbox';

interface Pending {
  onOutput: (data: Buffer) => unknown;
  spawned: (pid: number) => void;
  exited: (exit: ProcessExit) => void;
  failed: (err: Error) => void;
}

export class LauncherStopped extends Error {}

/**
 * The launcher's whole environment. A tool's parent is the launcher, so whatever the launcher's
 * environment holds a tool could read from /proc (were it not sandboxed): the server's database
 * URL, its encryption key and salt never reach it.
 */
export function launcherEnvironment(serverEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return { PATH: serverEnv.PATH ?? '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' };
}

/**
 * Starts tools through a launcher child process (see launcher-process.ts), one per worker. If the
 * launcher dies, the tools it ran fail with LauncherStopped (their activity is retried) and the
 * next launch starts a new launcher.
 */
export class ToolLauncher {
  /** Every tool starts in this sandbox; undefined only with --run-isolation none. */
  constructor(private readonly sandbox: SandboxSettings | undefined) {}

  private child: ChildProcess | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  private ensureChild(): ChildProcess {
    if (this.child && this.child.connected) return this.child;
    const entry = require.resolve('./launcher-process');
    const child = fork(entry, [], {
      // Compiled (dist/), the launcher is JavaScript; from the sources, tsx compiles it on load.
      execArgv: entry.endsWith('.ts') ? ['--require', require.resolve('tsx/cjs')] : [],
      env: launcherEnvironment(),
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child.on('message', (event: LauncherEvent) => this.dispatch(event));
    // A write to a launcher that died (EPIPE) surfaces here; its exit is what fails its tools.
    child.on('error', () => undefined);
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
      const lost = [...this.pending.values()];
      this.pending.clear();
      for (const p of lost) p.failed(new LauncherStopped('the tool launcher process stopped'));
    });
    this.child = child;
    return child;
  }

  private dispatch(event: LauncherEvent): void {
    const p = this.pending.get(event.id);
    if (!p) return;
    switch (event.type) {
      case 'spawned':
        return p.spawned(event.pid);
      case 'output': {
        // Advanced serialization hands a Uint8Array back; view it as a Buffer without copying.
        const wait = p.onOutput(Buffer.from(event.data.buffer, event.data.byteOffset, event.data.byteLength));
        // Acknowledged once taken: at once, or when the consumer's promise (its backpressure) settles.
        const ack = () => this.acknowledge(event.id, event.data.byteLength);
        if (wait instanceof Promise) wait.then(ack, ack);
        else ack();
        return;
      }
      case 'exit':
        this.pending.delete(event.id);
        return p.exited({ exitCode: event.exitCode, signal: event.signal, exceeded: event.exceeded });
      case 'error':
        this.pending.delete(event.id);
        return p.failed(new Error(event.message));
    }
  }

  /**
   * Sends a request; a launcher that died meanwhile cannot take it, and its exit fails whatever it
   * ran, so the error is dropped here rather than thrown from wherever the request was made.
   */
  private request(child: ChildProcess, message: LauncherRequest): void {
    if (!child.connected) return;
    // A launcher that dies as a message goes out closes the channel under it (EPIPE): the send
    // fails quietly here, since the 'exit' handler fails every tool it ran. Without a callback
    // the failure would be an unhandled 'error' event, which ends the whole server.
    try {
      child.send(message, (err) => {
        if (err && child.connected) child.kill('SIGKILL');
      });
    } catch {
      child.kill('SIGKILL');
    }
  }

  private acknowledge(id: number, bytes: number): void {
    const child = this.child;
    if (child?.connected && this.pending.has(id)) this.request(child, { type: 'ack', id, bytes });
  }

  /**
   * Starts argv in its own process group; resolves once it runs, with its pid. When `onOutput`
   * returns a promise, that output counts against the tool's window until it settles: a consumer
   * that returns promises while it is behind stops the tool's output being read
   * (runtime/launcher-protocol.ts), so the tool waits on its pipe rather than memory filling.
   */
  launch(argv: string[], options: { cwd: string; env: Record<string, string>; onOutput: (data: Buffer) => unknown; binds?: SandboxBind[] }): Promise<SpawnedTool> {
    const child = this.ensureChild();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      let settleExit: (exit: ProcessExit) => void = () => {};
      let failExit: (err: Error) => void = () => {};
      const exited = new Promise<ProcessExit>((res, rej) => {
        settleExit = res;
        failExit = rej;
      });
      let started = false;
      this.pending.set(id, {
        onOutput: options.onOutput,
        spawned: (pid) => {
          started = true;
          resolve({ pid, exited, kill: (graceMs = 5000) => this.request(child, { type: 'kill', id, graceMs }) });
        },
        exited: settleExit,
        failed: (err) => (started ? failExit(err) : reject(err)),
      });
      this.request(child, { type: 'spawn', id, argv, cwd: options.cwd, env: options.env, sandbox: this.sandbox, binds: options.binds });
    });
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.disconnect();
    await gone;
  }
}
