import {
  checkGraph,
  graphOutcome,
  graphSettled,
  nextSteps,
  pipelineGraph,
  splitGraph,
  WorkflowGraphError,
  type StepDefinition,
  type StepState,
} from '../../core/runs/workflow-graph';

const run = (name: string, depends_on: string[] = []): StepDefinition => ({ name, type: 'run', depends_on, tool: 'bash', command: 'true' });
const approval = (name: string, depends_on: string[] = [], if_denied?: string): StepDefinition => ({
  name,
  type: 'approval',
  depends_on,
  ...(if_denied ? { if_denied } : {}),
});

// build -> (deploy-staging, smoke) -> promote (approval, if_denied: rollback) -> deploy-prod
const release = [
  run('build'),
  run('deploy-staging', ['build']),
  run('smoke', ['build']),
  approval('promote', ['deploy-staging'], 'rollback'),
  run('deploy-prod', ['promote']),
  run('rollback'),
];

function states(entries: Record<string, StepState>, steps = release): Map<string, StepState> {
  return new Map(steps.map((s) => [s.name, entries[s.name] ?? 'waiting']));
}

describe('checkGraph refuses graphs that cannot run, naming the field', () => {
  test.each<[string, StepDefinition[], string, RegExp]>([
    ['no steps', [], 'steps', /at least one step/],
    ['duplicate names', [run('a'), run('a')], 'steps[1].name', /two steps are named "a"/],
    ['unknown dependency', [run('a', ['ghost'])], 'steps[0].depends_on[0]', /"ghost", which is not a step/],
    ['self dependency', [run('a', ['a'])], 'steps[0].depends_on[0]', /depends on itself/],
    ['a cycle', [run('a', ['c']), run('b', ['a']), run('c', ['b'])], 'steps[0].depends_on', /cycle: a -> c -> b -> a/],
    ['if_denied on a run step', [{ ...run('a'), if_denied: 'b' }, run('b')], 'steps[0].if_denied', /belongs to approval steps/],
    ['unknown if_denied', [approval('a', [], 'ghost')], 'steps[0].if_denied', /"ghost", which is not a step/],
    ['a cycle through a deny path', [approval('a', ['b'], 'b'), run('b')], 'steps[0].depends_on', /cycle/],
  ])('%s', (_, steps, field, message) => {
    let error: unknown;
    try {
      checkGraph(steps);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(WorkflowGraphError);
    expect((error as WorkflowGraphError).field).toBe(field);
    expect((error as Error).message).toMatch(message);
  });

  test('a well-formed graph passes', () => {
    expect(() => checkGraph(release)).not.toThrow();
  });
});

describe('nextSteps walks the graph', () => {
  test('roots first, then independent steps together', () => {
    expect(nextSteps(release, states({}))).toEqual({ ready: ['build'], skipped: [] });
    expect(nextSteps(release, states({ build: 'succeeded' })).ready).toEqual(['deploy-staging', 'smoke']);
  });

  test('an approval waits while another branch keeps running; approval opens its dependents and skips the deny path', () => {
    const waiting = states({ build: 'succeeded', 'deploy-staging': 'succeeded', smoke: 'running', promote: 'awaiting_approval' });
    expect(nextSteps(release, waiting)).toEqual({ ready: [], skipped: [] });
    expect(graphSettled(waiting)).toBe(false);
    const approved = states({ build: 'succeeded', 'deploy-staging': 'succeeded', smoke: 'succeeded', promote: 'approved' });
    expect(nextSteps(release, approved)).toEqual({
      ready: ['deploy-prod'],
      skipped: [{ name: 'rollback', why: 'not run: it runs only when "promote" is denied' }],
    });
  });

  test('a denial takes the deny path and skips the dependents', () => {
    const denied = states({ build: 'succeeded', 'deploy-staging': 'succeeded', smoke: 'succeeded', promote: 'denied' });
    expect(nextSteps(release, denied)).toEqual({ ready: ['rollback'], skipped: [{ name: 'deploy-prod', why: 'not run: "promote" was denied' }] });
  });

  test('a failure skips what depends on it, transitively, and leaves independent branches alone', () => {
    const failed = states({ build: 'succeeded', 'deploy-staging': 'failed', smoke: 'running' });
    expect(nextSteps(release, failed).skipped).toEqual([{ name: 'promote', why: 'not run: "deploy-staging" failed' }]);
    const afterSkip = states({ build: 'succeeded', 'deploy-staging': 'failed', smoke: 'running', promote: 'skipped' });
    expect(nextSteps(release, afterSkip).skipped).toEqual([
      { name: 'deploy-prod', why: 'not run: "promote" did not run' },
      { name: 'rollback', why: 'not run: it runs only when "promote" is denied' },
    ]);
  });
});

describe('graphOutcome', () => {
  test('succeeds when nothing failed, also when a denial took its deny path', () => {
    const all = states({ build: 'succeeded', 'deploy-staging': 'succeeded', smoke: 'succeeded', promote: 'denied', 'deploy-prod': 'skipped', rollback: 'succeeded' });
    expect(graphSettled(all)).toBe(true);
    expect(graphOutcome(release, all)).toEqual({ ok: true });
  });

  test('fails naming the first failed step, or a denial with no deny path', () => {
    expect(graphOutcome(release, states({ build: 'failed' }))).toEqual({ ok: false, error: 'step "build" failed' });
    const steps = [run('a'), approval('gate', ['a']), run('b', ['gate'])];
    expect(graphOutcome(steps, states({ a: 'succeeded', gate: 'denied', b: 'skipped' }, steps))).toEqual({
      ok: false,
      error: 'step "gate" was denied by an approver',
    });
  });
});

test('a pipeline chains its steps; a split makes independent shards', () => {
  const pipeline = pipelineGraph([{ name: 'a' }, { name: 'b' }, { name: 'c' }]);
  expect(pipeline.map((s) => s.depends_on)).toEqual([[], ['a'], ['b']]);
  const split = splitGraph('bash', 'echo', 4, [1, 3]);
  expect(split.map((s) => [s.name, s.shard, s.depends_on])).toEqual([
    ['shard-1', { index: 1, count: 4 }, []],
    ['shard-3', { index: 3, count: 4 }, []],
  ]);
});
