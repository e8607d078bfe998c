import { Worker } from '@temporalio/worker';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createLogger } from '../../cli/serve';
import { workflowBundle } from '../../workers/bundle';
import { installTemporalRuntime } from '../../workers/runtime';
import { historyFromPlain } from './history-json';
import { SCENARIOS, type HistoryFile } from './scenarios';
import { removeWorkflowPromiseHooks } from '../support/workflow-hooks';

/**
 * Workflows in flight when a new release starts are continued by its code, which replays their
 * history first. Each recorded history must replay with today's workflow code (the bundle the
 * workers run): a change that would break workflows in flight fails here. Fix it with `patched()`
 * (docs/architecture.md, "Changing workflow code"), never by re-recording the histories.
 */
const HISTORIES = path.join(__dirname, 'histories');

beforeAll(() => {
  installTemporalRuntime(createLogger({ logLevel: 'silent' }));
});
// The replayer runs workflow code on this thread; its promise hook must not outlive the file.
afterAll(removeWorkflowPromiseHooks);

/** Every scenario's history, and any older ones kept beside them (the path before a `patched()` change). */
const files = readdirSync(HISTORIES).filter((f) => f.endsWith('.json')).sort();

test('a history is kept for every scenario', () => {
  expect(files).toEqual(expect.arrayContaining(SCENARIOS.map((s) => `${s}.json`)));
});

test('every workflow the bundle exports has a recorded history to replay', () => {
  const exported = [...readFileSync(path.join(__dirname, '..', '..', 'workflows', 'index.ts'), 'utf8').matchAll(/^export \{ (\w+) \} from/gm)].map((m) => m[1]);
  expect(exported.length).toBeGreaterThan(5);
  const recorded = new Set(files.flatMap((name) => (JSON.parse(readFileSync(path.join(HISTORIES, name), 'utf8')) as HistoryFile).workflows.map((w) => w.workflow_type)));
  expect(exported.filter((type) => !recorded.has(type))).toEqual([]);
});

test.each(files)('the recorded %s replays with the current workflow code', async (name) => {
  const file = JSON.parse(readFileSync(path.join(HISTORIES, name), 'utf8')) as HistoryFile;
  expect(file.workflows.length).toBeGreaterThan(0);
  const replays = Worker.runReplayHistories(
    { workflowBundle: await workflowBundle(), replayName: `replay-${path.basename(name, '.json')}` },
    file.workflows.map((w) => ({ workflowId: w.workflow_id, history: historyFromPlain(w.history) })),
  );
  const failures: string[] = [];
  for await (const result of replays) {
    if (result.error) failures.push(`${result.workflowId}: ${result.error.message}`);
  }
  expect(failures).toEqual([]);
});
