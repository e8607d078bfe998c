import type { ExtensionRunEvent } from '../../core/extensions';
import type { Run } from '../../core/runs/run';
import type { ServerContext } from '../context';

/** How long one extension notifier may take for one run before it is abandoned (spec part A 1.3). */
export const EXTENSION_NOTIFIER_TIMEOUT_MS = 10_000;

/** What a notifier is told: the run's end, its extra vars' values redacted (their names kept). */
export function extensionRunEvent(run: Run): ExtensionRunEvent {
  const extraVars: Record<string, unknown> = {};
  for (const name of Object.keys(run.spec.extra_vars ?? {})) extraVars[name] = '[redacted]';
  return {
    runId: run.id,
    tool: run.tool,
    status: run.status,
    exitCode: run.exit_code,
    labels: run.spec.change ? { change: run.spec.change } : {},
    startedAt: run.started_at?.toISOString() ?? null,
    finishedAt: run.finished_at?.toISOString() ?? null,
    url: `/v1/runs/${run.id}`,
    extraVars,
  };
}

/**
 * Tells every registered extension notifier of a terminal top-level run, once: called by the
 * server that recorded the run's `run.finished` event (services/notifications/notification-recorder.ts),
 * off the executor path. Each notifier runs at once with its own bounded timeout; a failure or a
 * timeout is logged and dropped, never retried, never holding anything up.
 */
export async function notifyExtensions(ctx: ServerContext, run: Run): Promise<void> {
  const registry = ctx.extensions?.notifiers;
  if (!registry || run.parent_run_id || !run.finished_at) return;
  const names = registry.names();
  if (!names.length) return;
  const event = extensionRunEvent(run);
  await Promise.all(
    names.map(async (name) => {
      const signal = AbortSignal.timeout(EXTENSION_NOTIFIER_TIMEOUT_MS);
      try {
        await Promise.race([
          registry.get(name)!.notify(event, signal),
          new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error(`no answer within ${EXTENSION_NOTIFIER_TIMEOUT_MS / 1000} s`)), { once: true })),
        ]);
      } catch (err) {
        ctx.logger.warn({ runId: run.id, notifier: name, err: (err as Error).message }, 'an extension notifier failed; dropped');
      }
    }),
  );
}
