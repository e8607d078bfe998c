import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { findIacBinary, type GoBinary } from './iac-binaries';
import { lazy } from '../core/lazy';
import { onPath } from './temporal-binary';

const execFileAsync = promisify(execFile);

/**
 * Open Policy Agent, which evaluates the policy file's Rego (services/runs/policy-file.ts): built
 * once from its Go module at a pinned release into the machine cache, like OpenTofu
 * (embedded/iac-binaries.ts: `CAIRN_OPA`, then `opa` on PATH, then the cache, then a build).
 */
export const OPA: GoBinary = {
  tool: 'opa',
  title: 'Open Policy Agent',
  module: 'github.com/open-policy-agent/opa',
  version: 'v1.22.3',
  pkg: '.',
  binary: 'opa',
  envVar: 'CAIRN_OPA',
  ldflags: '-s -w',
};

export const findOpa = (log: (line: string) => void = () => {}): Promise<string> => findIacBinary(OPA, log);

const syntaxFlags = (syntax: 'v1' | 'v0') => (syntax === 'v0' ? ['--v0-compatible'] : []);

/** OPA's own words on a failed command: its stderr (or stdout), trimmed to what names the fault. */
function opaFault(err: unknown): string {
  const { stderr, stdout, message } = err as { stderr?: string; stdout?: string; message: string };
  const text = (stderr || stdout || message).trim();
  return text.split('\n').slice(0, 6).join(' ').replace(/\s+/g, ' ');
}

export class OpaError extends Error {}

/** A module's package (dotted, without `data.`) and its rules' names, read with `opa parse`. */
export async function parseRegoModule(opa: string, file: string, syntax: 'v1' | 'v0'): Promise<{ package: string; rules: string[] }> {
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync(opa, ['parse', '--format', 'json', ...syntaxFlags(syntax), file], { maxBuffer: 64 * 1024 * 1024 }));
  } catch (err) {
    throw new OpaError(opaFault(err));
  }
  const ast = JSON.parse(stdout) as { package: { path: { value: unknown }[] }; rules?: { head: { name?: string; ref?: { value: unknown }[] } }[] };
  const pkg = ast.package.path.slice(1).map((term) => String(term.value)).join('.');
  const rules = (ast.rules ?? []).map((rule) => rule.head.name ?? String(rule.head.ref?.[0]?.value ?? '')).filter(Boolean);
  return { package: pkg, rules: [...new Set(rules)] };
}

/**
 * Builds one policy's modules into a bundle (`opa build`, which compiles them and so finds every
 * fault) whose roots are `roots`, at `out`; returns the bundle's sha256 (hex).
 */
export async function buildRegoBundle(opa: string, modules: { file: string; as: string }[], roots: string[], syntax: 'v1' | 'v0', out: string): Promise<string> {
  const dir = `${out}.src`;
  await fs.rm(dir, { recursive: true, force: true });
  await fs.mkdir(dir, { recursive: true });
  try {
    for (const [i, module] of modules.entries()) await fs.copyFile(module.file, path.join(dir, `${i}-${path.basename(module.as).replace(/[^A-Za-z0-9._-]/g, '_')}`));
    await fs.writeFile(path.join(dir, '.manifest'), JSON.stringify({ roots: roots.map((r) => r.replace(/\./g, '/')) }));
    await execFileAsync(opa, ['build', ...syntaxFlags(syntax), '--bundle', '-o', out, dir], { maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    throw new OpaError(opaFault(err));
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
  return createHash('sha256').update(await fs.readFile(out)).digest('hex');
}

/** One evaluation's answer: the document OPA returned, or why there is none. */
export type OpaAnswer = { ok: true; result: unknown } | { ok: false; timeout: boolean; error: string };

export interface OpaServer {
  /**
   * Evaluates `data.<pkg>` with `input`, builtin errors strict (an error holds, never reads as
   * undefined). Past `timeoutMs` the request is abandoned, which cancels OPA's evaluation.
   */
  evaluate(pkg: string, input: unknown, timeoutMs: number): Promise<OpaAnswer>;
  /** The OPA process's id now (it changes when it is started again). */
  pid(): number | undefined;
  stop(): Promise<void>;
}

/** util-linux's setpriv, looked for once. */
const setpriv = lazy(() => onPath('setpriv'));

/**
 * The command that starts `command` bound to this process's life. OPA is the server's child alone
 * (unlike the embedded PostgreSQL and Temporal, which a restarted server adopts): util-linux's
 * `setpriv --pdeathsig KILL` has the kernel kill it when the server dies, even by SIGKILL, so no
 * OPA is left serving an old policy file. setpriv execs the command, so the pid is OPA's. Where
 * setpriv is missing OPA starts unbound, and only `stop` ends it.
 */
async function boundToThisProcess(command: string, args: string[]): Promise<[string, string[]]> {
  const found = await setpriv();
  return found ? [found, ['--pdeathsig', 'KILL', '--', command, ...args]] : [command, args];
}

/**
 * Starts `opa run --server` on a unix socket in `dir` (mode 0700: only this account reaches it)
 * serving `bundles`, and waits until it answers its health check. Its log (errors only) goes to
 * `log`. Supervised: an OPA that exits is started again (after 1 s, doubling to 30 s while it keeps
 * failing); until it answers again every evaluation fails, which holds the run. `stop` ends it, and
 * so does this process's end, however it ends (boundToThisProcess).
 */
export async function startOpaServer(opa: string, bundles: string[], dir: string, log: (line: string) => void): Promise<OpaServer> {
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  await fs.chmod(dir, 0o700);
  const socketPath = path.join(dir, 'opa.sock');
  const request = (method: string, urlPath: string, body: string | undefined, timeoutMs: number) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        { socketPath, method, path: urlPath, headers: body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, agent: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      // The whole exchange is bounded, not only a silence: abandoning it cancels OPA's evaluation.
      const timer = setTimeout(() => req.destroy(new TimeoutError()), timeoutMs);
      req.on('close', () => clearTimeout(timer));
      req.on('error', reject);
      req.end(body);
    });

  let child: ChildProcess | undefined;
  /** Why OPA cannot answer now; undefined while it serves. */
  let down: string | undefined = 'opa is starting';
  let stopping = false;
  let backoffMs = 1000;
  let restartTimer: NodeJS.Timeout | undefined;

  const launch = async (): Promise<void> => {
    await fs.rm(socketPath, { force: true });
    const [command, args] = await boundToThisProcess(opa, ['run', '--server', '--addr', `unix://${socketPath}`, '--log-level', 'error', '--skip-version-check', '--bundle', ...bundles]);
    const started = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } });
    child = started;
    let exited: string | undefined;
    let output = '';
    const collect = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      if (output.length < 8192) output += text;
      for (const line of text.split('\n')) if (line.trim()) log(`opa: ${line.trim()}`);
    };
    started.stdout?.on('data', collect);
    started.stderr?.on('data', collect);
    started.on('exit', (code, signal) => {
      exited = `opa exited (${signal ?? code})`;
      if (child !== started || stopping) return;
      down = exited;
      if (!restartTimer && !starting) scheduleRestart();
    });
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (exited) throw new OpaError(`${exited}: ${output.trim().split('\n').slice(0, 6).join(' ')}`);
      try {
        if ((await request('GET', '/health?bundles=true', undefined, 2000)).status === 200) break;
      } catch {
        /* not listening yet */
      }
      if (Date.now() > deadline) {
        started.kill('SIGKILL');
        throw new OpaError('opa did not answer its health check within 60 s');
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    down = undefined;
  };

  let starting = false;
  const scheduleRestart = () => {
    log(`opa: ${down}; starting it again in ${backoffMs / 1000} s (until then every policy-file policy holds the runs it judges)`);
    restartTimer = setTimeout(async () => {
      restartTimer = undefined;
      if (stopping) return;
      starting = true;
      try {
        await launch();
        backoffMs = 1000;
        log('opa: serving again');
      } catch (err) {
        down = (err as Error).message;
        backoffMs = Math.min(backoffMs * 2, 30_000);
        if (!stopping) scheduleRestart();
      } finally {
        starting = false;
      }
    }, backoffMs);
    restartTimer.unref();
  };

  const stop = async () => {
    stopping = true;
    if (restartTimer) clearTimeout(restartTimer);
    const running = child;
    if (!running || running.exitCode !== null || running.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => running.once('exit', () => resolve()));
    running.kill('SIGTERM');
    const timer = setTimeout(() => running.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  };

  starting = true;
  try {
    await launch();
  } catch (err) {
    stopping = true;
    throw err;
  } finally {
    starting = false;
  }

  return {
    pid: () => child?.pid,
    async evaluate(pkg, input, timeoutMs) {
      if (down) return { ok: false, timeout: false, error: down };
      try {
        const { status, text } = await request('POST', `/v1/data/${pkg.split('.').map(encodeURIComponent).join('/')}?strict-builtin-errors=true`, JSON.stringify({ input }), timeoutMs);
        const answer = JSON.parse(text) as { result?: unknown; code?: string; message?: string; errors?: { message?: string }[] };
        if (status !== 200) {
          const detail = [answer.message, ...(answer.errors ?? []).map((e) => e.message)].filter(Boolean).join('; ');
          return { ok: false, timeout: false, error: `${answer.code ?? `status ${status}`}: ${detail}` };
        }
        return { ok: true, result: answer.result };
      } catch (err) {
        if (err instanceof TimeoutError) return { ok: false, timeout: true, error: `no decision within ${timeoutMs} ms` };
        return { ok: false, timeout: false, error: down ?? (err as Error).message };
      }
    },
    stop,
  };
}

class TimeoutError extends Error {}
