import { promises as fs } from 'node:fs';
import path from 'node:path';
import { ToolLauncher } from '../runtime/launcher';
import { prepareSandbox, type RunIsolationSettings } from '../runtime/sandbox-setup';

/** Starts of `bash -c true` as a worker starts a run's tool; `stop` ends their tool launcher. */
export interface TrueStarter {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * `bash -c true` started as a worker starts a run's tool, and nothing else of a run: in a work dir
 * of its own (the run account's when the server is root), through a tool launcher of its own, in
 * the sandbox these settings make (unsandboxed with `--run-isolation none`), the work dir removed
 * after. Preparing the sandbox also sets this process's tool search path, as a server's does.
 */
export async function trueStarter(settings: RunIsolationSettings): Promise<TrueStarter> {
  const { sandbox, workRoot } = await prepareSandbox(settings, () => undefined);
  const launcher = new ToolLauncher(sandbox);
  let made = 0;
  return {
    async start() {
      const workDir = await fs.mkdtemp(path.join(workRoot, `bench-start-${made++}-`));
      try {
        if (sandbox?.user) await fs.chown(workDir, sandbox.user.uid, sandbox.user.gid);
        const tool = await launcher.launch(['bash', '-c', 'true'], { cwd: workDir, env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' }, onOutput: () => undefined });
        const exit = await tool.exited;
        if (exit.exitCode !== 0) throw new Error(`bash -c true in the sandbox exited ${exit.exitCode ?? exit.signal}`);
      } finally {
        await fs.rm(workDir, { recursive: true, force: true });
      }
    },
    stop: () => launcher.stop(),
  };
}
