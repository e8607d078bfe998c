// The tool launcher: a small process that starts tools for a server and relays their output.
// Starting a process blocks the starting process until the child has exec'd, and forking a large
// server is slow; here it blocks only this small process, and the server's event loop stays free.
// It starts with a scrubbed environment (see launcher.ts), so nothing a tool can reach through it
// holds the server's settings or keys.
import { OUTPUT_WINDOW_BYTES, type LauncherEvent, type LauncherRequest } from './launcher-protocol';
import { signalGroup, spawnTool, type SpawnedTool } from './process';

const live = new Map<number, SpawnedTool>();

/** Each tool's output sent and not acknowledged yet, and whether its reading is paused for that. */
const flows = new Map<number, { unacked: number; paused: boolean }>();

function send(event: LauncherEvent): void {
  process.send?.(event);
}

function sendOutput(id: number, data: Buffer): void {
  send({ type: 'output', id, data });
  const flow = flows.get(id);
  if (!flow) return;
  flow.unacked += data.length;
  if (!flow.paused && flow.unacked > OUTPUT_WINDOW_BYTES) {
    flow.paused = true;
    live.get(id)?.pauseOutput?.();
  }
}

function acknowledged(id: number, bytes: number): void {
  const flow = flows.get(id);
  if (!flow) return;
  flow.unacked -= bytes;
  if (flow.paused && flow.unacked <= OUTPUT_WINDOW_BYTES / 2) {
    flow.paused = false;
    live.get(id)?.resumeOutput?.();
  }
}

process.on('message', (request: LauncherRequest) => {
  if (request.type === 'kill') {
    live.get(request.id)?.kill(request.graceMs);
    return;
  }
  if (request.type === 'ack') {
    acknowledged(request.id, request.bytes);
    return;
  }
  flows.set(request.id, { unacked: 0, paused: false });
  spawnTool(request.argv, {
    cwd: request.cwd,
    env: request.env,
    sandbox: request.sandbox,
    binds: request.binds,
    onOutput: (data) => sendOutput(request.id, data),
  }).then(
    (tool) => {
      live.set(request.id, tool);
      // Output that came while the tool was starting may have filled the window already.
      if (flows.get(request.id)?.paused) tool.pauseOutput?.();
      send({ type: 'spawned', id: request.id, pid: tool.pid });
      tool.exited
        .then(
          (exit) => send({ type: 'exit', id: request.id, ...exit }),
          (err: Error) => send({ type: 'error', id: request.id, message: err.message }),
        )
        .finally(() => {
          live.delete(request.id);
          flows.delete(request.id);
        });
    },
    (err: Error) => {
      flows.delete(request.id);
      send({ type: 'error', id: request.id, message: err.message });
    },
  );
});

// The server is gone: its tools have lost their reader and their lease; stop them rather than
// leave a second copy running beside the requeued attempt.
process.on('disconnect', () => {
  for (const tool of live.values()) signalGroup(tool.pid, 'SIGKILL');
  process.exit(0);
});
