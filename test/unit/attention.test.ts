import { attentionSettingsOf } from '../../services/attention/attention-file';
import {
  AttentionFileError,
  BLOCKERS,
  conditionsOf,
  defaultThresholds,
  EMPTY_ATTENTION_FILE,
  installThresholds,
  interactionOf,
  isAlerting,
  mainCondition,
  parseAttentionFile,
  thresholdsFor,
  type AttentionRun,
  type AttentionWorker,
  type ConditionFacts,
} from '../../core/runs/attention';
import { loadConfig, ConfigError } from '../../core/config';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const now = new Date('2026-11-23T12:00:00Z');
const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000);

function run(fields: Partial<AttentionRun>): AttentionRun {
  return {
    id: 'run_a',
    kind: 'run',
    status: 'pending',
    queue: '',
    template_id: null,
    parent_run_id: null,
    step_name: null,
    requested_by: 'alice',
    account_id: 'usr_a',
    exec_host: null,
    attempts: 0,
    hold: null,
    state_digest: null,
    workflow_started_at: ago(60),
    created_at: ago(60),
    state_since: ago(60),
    ...fields,
  };
}

const worker = (fields: Partial<AttentionWorker>): AttentionWorker => ({
  id: 'wrk_1',
  queue: '',
  host: 'h1',
  renewed_at: ago(1),
  renew_seconds: 10,
  lost: false,
  ...fields,
});

function facts(fields: Partial<ConditionFacts> = {}, siblings: AttentionRun[] = []): ConditionFacts {
  return {
    now,
    workersByQueue: new Map([['', [worker({})]]]),
    holderByQueue: new Map(),
    siblingsOf: () => siblings,
    branchesOf: () => ({ on_approve: ['deploy'], on_deny: ['rollback'] }),
    ...fields,
  };
}

describe('blockers', () => {
  test('are ordered as spec part A 3.3 lists them', () => {
    expect(BLOCKERS).toEqual(['worker_lost', 'no_worker', 'approval_needed', 'blocked']);
  });

  test('a held run needs approval, naming who may approve and what each answer does', () => {
    const [c] = conditionsOf(run({ status: 'held', hold: { policies: ['pol_1'], distinct_approver: true }, state_since: ago(30) }), facts());
    expect(c).toMatchObject({ blocker: 'approval_needed', identity: 'approval_needed:run_a', since: ago(30) });
    expect(c.details).toMatchObject({ approval: 'run', decision_id: 'run_a' });
    expect(c.who_can_act).toMatch(/never an agent.*not alice/);
  });

  test('a run held at the plan gate with no plan made says the gate could judge none, and that approving it applies nothing', () => {
    const why = 'the module fetch ran out of time after 120s (--module-fetch-timeout); no plan was made';
    const plan = { digest: 'sha256:e3b0', summary: `plan not classified: ${why}`, not_made: why };
    const [c] = conditionsOf(run({ status: 'held', hold: { policies: [], plan } }), facts());
    expect(c.reason).toBe(`held for approval: the plan gate could judge no plan at the plan gate (plan not classified: ${why})`);
    expect(c.details).toMatchObject({ on_approve: 'run run_a applies nothing and ends failed: no plan was made', plan });
    const [made] = conditionsOf(run({ status: 'held', hold: { policies: ['pol_1'], plan: { digest: 'sha256:9f', summary: 'plan: 1 to delete' } } }), facts());
    expect(made.reason).toBe('held for approval: policies pol_1 hold it at the plan gate (plan: 1 to delete)');
    expect(made.details).toMatchObject({ on_approve: 'run run_a applies exactly its saved plan sha256:9f' });
  });

  test('a workflow step at approval says whether other branches run or the workflow is paused', () => {
    const step = run({ id: 'run_s', kind: 'approval', status: 'held', parent_run_id: 'run_w', step_name: 'promote' });
    const busy = conditionsOf(step, facts({}, [step, run({ id: 'run_b', kind: 'step', status: 'running', parent_run_id: 'run_w' })]))[0];
    expect(busy.details).toMatchObject({ approval: 'workflow_step', other_branches_running: true, paused: false, on_approve: ['deploy'], on_deny: ['rollback'] });
    const alone = conditionsOf(step, facts({}, [step, run({ id: 'run_d', kind: 'step', parent_run_id: 'run_w', workflow_started_at: null })]))[0];
    expect(alone.details).toMatchObject({ other_branches_running: false, paused: true });
  });

  test('a queued run no connected worker serves has no_worker', () => {
    const [c] = conditionsOf(run({ queue: 'gpu' }), facts());
    expect(c).toMatchObject({ blocker: 'no_worker', details: { queue: 'gpu', eligible_workers: 0 } });
    const lostOnly = conditionsOf(run({}), facts({ workersByQueue: new Map([['', [worker({ lost: true })]]]) }));
    expect(lostOnly[0].blocker).toBe('no_worker');
    // A step waiting on its dependencies is not queued yet.
    expect(conditionsOf(run({ queue: 'gpu', kind: 'step', parent_run_id: 'run_w', workflow_started_at: null }), facts())).toEqual([]);
  });

  test('a run waiting behind a full queue is blocked, naming the holder only when readable', () => {
    const holder = new Map([['', { id: 'run_h', readable: true }]]);
    const [c] = conditionsOf(run({ state_since: ago(20) }), facts({ holderByQueue: holder }));
    expect(c).toMatchObject({ blocker: 'blocked', details: { holder_run_id: 'run_h' } });
    const hidden = conditionsOf(run({ state_since: ago(20) }), facts({ holderByQueue: new Map([['', { id: 'run_h', readable: false }]]) }))[0];
    expect(hidden.details.holder_run_id).toBeNull();
    expect(hidden.reason).not.toContain('run_h');
    // Just queued: a free slot takes it within moments.
    expect(conditionsOf(run({ state_since: ago(1) }), facts({ holderByQueue: holder }))).toEqual([]);
  });

  test('a running run whose host has no live worker on its queue lost its worker', () => {
    const lost = worker({ id: 'wrk_lost', host: 'h2', renewed_at: ago(40), lost: true });
    const [c] = conditionsOf(run({ status: 'running', exec_host: 'h2', attempts: 2 }), facts({ workersByQueue: new Map([['', [worker({}), lost]]]) }));
    expect(c).toMatchObject({ blocker: 'worker_lost', identity: 'worker_lost:run_a:2', details: { worker: 'wrk_lost', last_seen: ago(40).toISOString() } });
    expect(c.since).toEqual(ago(10));
    expect(conditionsOf(run({ status: 'running', exec_host: 'h1' }), facts())).toEqual([]);
  });

  test('the main blocker is the first in order; the others are badges', () => {
    const conditions = [
      ...conditionsOf(run({ id: 'run_x', status: 'held', parent_run_id: 'run_p', kind: 'approval' }), facts()),
      ...conditionsOf(run({ id: 'run_y', queue: 'gpu', parent_run_id: 'run_p', kind: 'shard' }), facts()),
    ];
    const chosen = mainCondition(conditions)!;
    expect(chosen.main.blocker).toBe('no_worker');
    expect(chosen.badges).toEqual(['approval_needed']);
    expect(interactionOf('no_worker', ['approval_needed'], 0)).toMatch(/no_worker comes first/);
    expect(mainCondition([])).toBeUndefined();
  });
});

describe('thresholds', () => {
  test('defaults: a lost worker after two lease periods, no_worker and blocked after 15 minutes, approvals never', () => {
    expect(defaultThresholds(30)).toEqual({ worker_lost: 60, no_worker: 900, approval_needed: 0, blocked: 900 });
    expect(isAlerting(100, 0)).toBe(false);
    expect(isAlerting(900, 900)).toBe(true);
    expect(isAlerting(899, 900)).toBe(false);
  });

  test('the attention file sets install values and overrides by template over queue over organization', () => {
    const file = parseAttentionFile(
      JSON.stringify({
        thresholds: { blocked: '5m', approval_needed: 3600 },
        orgs: { org_1: { blocked: 120, no_worker: '1m' } },
        queues: { gpu: { blocked: 60 } },
        templates: { tpl_1: { blocked: 0 } },
      }),
    );
    const install = installThresholds(30, file);
    expect(install).toEqual({ worker_lost: 60, no_worker: 900, approval_needed: 3600, blocked: 300 });
    expect(thresholdsFor(install, file, { orgId: 'org_1' })).toMatchObject({ blocked: 120, no_worker: 60 });
    expect(thresholdsFor(install, file, { orgId: 'org_1', queue: 'gpu' }).blocked).toBe(60);
    expect(thresholdsFor(install, file, { orgId: 'org_1', queue: 'gpu', templateId: 'tpl_1' }).blocked).toBe(0);
    expect(thresholdsFor(install, EMPTY_ATTENTION_FILE, { queue: 'gpu' })).toEqual(install);
  });

  test.each([
    ['{"thresholds": {"blockd": 5}}', 'thresholds.blockd'],
    ['{"queues": {"gpu": {"blocked": -1}}}', 'queues.gpu.blocked'],
    ['{"templates": {"tpl_1": {"no_worker": "soon"}}}', 'templates.tpl_1.no_worker'],
    ['{"limits": {}}', 'limits'],
    ['{"orgs": []}', 'orgs'],
  ])('a fault in %s names %s', (text, key) => {
    let caught: unknown;
    try {
      parseAttentionFile(text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(AttentionFileError);
    expect((caught as AttentionFileError).key).toBe(key);
    expect((caught as Error).message.startsWith(`${key}:`)).toBe(true);
  });

  test('--attention-file is read at start; a bad one stops the start naming the flag and the key', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-attention-'));
    const good = path.join(dir, 'good.json');
    fs.writeFileSync(good, JSON.stringify({ thresholds: { no_worker: '2m' } }));
    expect(attentionSettingsOf(loadConfig({ attentionFile: good }, {})).thresholds).toMatchObject({ no_worker: 120, worker_lost: 60 });
    expect(attentionSettingsOf(loadConfig({}, { CAIRN_ATTENTION_FILE: good, CAIRN_LEASE_SECONDS: '10' })).thresholds).toMatchObject({ no_worker: 120, worker_lost: 20 });
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ queues: { gpu: { blocked: 'later' } } }));
    expect(() => attentionSettingsOf(loadConfig({ attentionFile: bad }, {}))).toThrow(ConfigError);
    expect(() => attentionSettingsOf(loadConfig({ attentionFile: bad }, {}))).toThrow(/--attention-file \(CAIRN_ATTENTION_FILE\).*queues\.gpu\.blocked/);
    expect(() => attentionSettingsOf(loadConfig({ attentionFile: path.join(dir, 'missing.json') }, {}))).toThrow(/--attention-file.*cannot read/);
    expect(() => attentionSettingsOf(loadConfig({ attentionFile: good }, {}))).not.toThrow();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
