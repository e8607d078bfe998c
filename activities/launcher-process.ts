// The tool launcher: a small process that starts tools for a server and relays their output.
// Starting a process blocks the starting process until the child has exec'd, and forking a large
// server is slow; here it blocks only this small process, and the server's event loop stays free.
// It starts with a scrubbed environment (see launcher.ts), so nothing a tool can reach through it
// holds the server's settings or keys.
import type { LauncherEvent, LauncherRequest } from './launcher-protocol';
import { signalGroup, spawnTool, type SpawnedTool } from './process';

const live = new Map<number, SpawnedTool>();

function send(event: LauncherEvent): void {
  process.send?.(event);
}

process.on('message', (request: LauncherRequest) => {
  if (request.type === 'kill') {
    live.get(request.id)?.kill(request.graceMs);
    return;
  }
  spawnTool(request.argv, {
    cwd: request.cwd,
    env: request.env,
    sandbox: request.sandbox,
    onOutput: (data) => send({ type: 'output', id: request.id, data }),
  }).then(
    (tool) => {
      live.set(request.id, tool);
      send({ type: 'spawned', id: request.id, pid: tool.pid });
      tool.exited
        .then(
          (exit) => send({ type: 'exit', id: request.id, ...exit }),
          (err: Error) => send({ type: 'error', id: request.id, message: err.message }),
        )
        .finally(() => live.delete(request.id));
    },
    (err: Error) => send({ type: 'error', id: request.id, message: err.message }),
  );
});

// The server is gone: its tools have lost their reader and their lease; stop them rather than
// leave a second copy running beside the requeued attempt.
process.on('disconnect', () => {
  for (const tool of live.values()) signalGroup(tool.pid, 'SIGKILL');
  process.exit(0);
});
