import { judgeSubmission, type GatePolicy, type GateVerdict, type SubmissionFacts } from '../../core/runs/policy-gate';

/** A person's real bash run; each case changes what it needs. */
const facts = (over: Partial<SubmissionFacts> = {}): SubmissionFacts => ({
  tool: 'bash',
  command: 'systemctl restart nginx',
  inventory_id: 'inv_web',
  queue: '',
  actor: 'deploy-bot',
  account: 'dana',
  actor_kind: 'user',
  dry_run: false,
  dry_run_change_free: false,
  ...over,
});

let nextId = 0;
/** A policy with no conditions (it matches everything) and the given effect; cases add conditions. */
const policy = (over: Partial<GatePolicy> = {}): GatePolicy => ({
  id: over.id ?? `pol_${++nextId}`,
  effect: 'require_approval',
  tool: null,
  command_contains: null,
  inventory_id: null,
  queue: null,
  actor: null,
  account: null,
  actor_kind: null,
  require_reason: false,
  exclude_dry_run: false,
  require_distinct_approver: false,
  ...over,
});

const matched = (verdict: GateVerdict) => verdict.verdict === 'hold' && verdict.hold.policies.length > 0;

describe('each condition matches its own fact and nothing else', () => {
  const cases: [string, Partial<GatePolicy>, Partial<SubmissionFacts>, boolean][] = [
    ['tool equal', { tool: 'bash' }, {}, true],
    ['tool different', { tool: 'python' }, {}, false],
    ['command_contains found', { command_contains: 'restart' }, {}, true],
    ['command_contains absent', { command_contains: 'reboot' }, {}, false],
    ['command_contains is case sensitive', { command_contains: 'RESTART' }, {}, false],
    ['command_contains empty matches any', { command_contains: '' }, {}, true],
    ['inventory_id equal', { inventory_id: 'inv_web' }, {}, true],
    ['inventory_id different', { inventory_id: 'inv_db' }, {}, false],
    ['inventory_id set, run has none', { inventory_id: 'inv_web' }, { inventory_id: null }, false],
    ['queue equal (default queue)', { queue: '' }, {}, true],
    ['queue named', { queue: 'dmz' }, { queue: 'dmz' }, true],
    ['queue different', { queue: 'dmz' }, {}, false],
    ['actor equal', { actor: 'deploy-bot' }, {}, true],
    ['actor different', { actor: 'other-bot' }, {}, false],
    ['account equal', { account: 'dana' }, {}, true],
    ['account different', { account: 'erin' }, {}, false],
    ['actor_kind user on a user run', { actor_kind: 'user' }, {}, true],
    ['actor_kind agent on a user run', { actor_kind: 'agent' }, {}, false],
    ['no condition at all matches everything', {}, {}, true],
  ];
  test.each(cases)('%s', (_name, conditions, over, expected) => {
    const verdict = judgeSubmission(facts(over), [policy(conditions)]);
    expect(matched(verdict)).toBe(expected);
    if (!expected) expect(verdict).toEqual({ verdict: 'run', exempted_by: [] });
  });
});

describe('every condition set must match', () => {
  const both = { tool: 'bash', command_contains: 'restart', account: 'dana' };
  test.each([
    ['all match', {}, true],
    ['tool differs', { tool: 'python' }, false],
    ['command differs', { command: 'uptime' }, false],
    ['account differs', { account: 'erin' }, false],
  ] as [string, Partial<SubmissionFacts>, boolean][])('%s', (_name, over, expected) => {
    expect(matched(judgeSubmission(facts(over), [policy(both)]))).toBe(expected);
  });
});

describe('verdicts', () => {
  test('no policies: a person’s run runs', () => {
    expect(judgeSubmission(facts(), [])).toEqual({ verdict: 'run', exempted_by: [] });
  });

  test('deny wins over require_approval and exempt, and names every denying policy', () => {
    const policies = [
      policy({ id: 'pol_hold', tool: 'bash' }),
      policy({ id: 'pol_deny1', effect: 'deny', command_contains: 'restart' }),
      policy({ id: 'pol_exempt', effect: 'exempt', actor: 'deploy-bot', account: 'dana' }),
      policy({ id: 'pol_deny2', effect: 'deny' }),
      policy({ id: 'pol_deny_other', effect: 'deny', tool: 'python' }),
    ];
    expect(judgeSubmission(facts(), policies)).toEqual({ verdict: 'deny', policies: ['pol_deny1', 'pol_deny2'] });
    expect(judgeSubmission(facts({ actor_kind: 'agent' }), policies)).toEqual({ verdict: 'deny', policies: ['pol_deny1', 'pol_deny2'] });
  });

  test('a deny policy that does not match leaves the run to the others', () => {
    const verdict = judgeSubmission(facts(), [policy({ effect: 'deny', tool: 'python' }), policy({ id: 'pol_h' })]);
    expect(verdict).toEqual({ verdict: 'hold', hold: { policies: ['pol_h'], agent_hold: false, require_reason: false, distinct_approver: false } });
  });

  test('require_reason and distinct_approver hold when any matching policy asks for them', () => {
    const policies = [
      policy({ id: 'pol_a', require_reason: true }),
      policy({ id: 'pol_b', require_distinct_approver: true }),
      policy({ id: 'pol_c' }),
      // Asks for both but does not match: it adds nothing.
      policy({ id: 'pol_d', tool: 'python', require_reason: true, require_distinct_approver: true }),
    ];
    expect(judgeSubmission(facts(), policies)).toEqual({
      verdict: 'hold',
      hold: { policies: ['pol_a', 'pol_b', 'pol_c'], agent_hold: false, require_reason: true, distinct_approver: true },
    });
    expect(judgeSubmission(facts(), [policies[2]])).toEqual({
      verdict: 'hold',
      hold: { policies: ['pol_c'], agent_hold: false, require_reason: false, distinct_approver: false },
    });
  });
});

describe('the built-in agent hold and exemptions', () => {
  const agent = facts({ actor_kind: 'agent' });
  const agentHold = { verdict: 'hold', hold: { policies: [], agent_hold: true, require_reason: false, distinct_approver: false } };

  test('an agent’s run is held with no policy at all', () => {
    expect(judgeSubmission(agent, [])).toEqual(agentHold);
  });

  test('a matching exempt policy lets the agent’s run past the built-in hold', () => {
    const exempt = policy({ id: 'pol_x', effect: 'exempt', actor: 'deploy-bot', account: 'dana' });
    expect(judgeSubmission(agent, [exempt])).toEqual({ verdict: 'run', exempted_by: ['pol_x'] });
  });

  test.each([
    ['no actor_kind (read as agent)', null],
    ['actor_kind agent', 'agent'],
  ])('an exempt policy with %s applies to agents', (_name, actorKind) => {
    expect(judgeSubmission(agent, [policy({ id: 'pol_x', effect: 'exempt', actor_kind: actorKind })])).toEqual({ verdict: 'run', exempted_by: ['pol_x'] });
  });

  test('an exempt policy that does not match leaves the built-in hold', () => {
    const exempt = policy({ effect: 'exempt', actor: 'deploy-bot', account: 'erin' });
    expect(judgeSubmission(agent, [exempt])).toEqual(agentHold);
  });

  test('an exemption does not lift a require_approval policy', () => {
    const policies = [policy({ id: 'pol_x', effect: 'exempt' }), policy({ id: 'pol_h', command_contains: 'restart', require_reason: true })];
    expect(judgeSubmission(agent, policies)).toEqual({
      verdict: 'hold',
      hold: { policies: ['pol_h'], agent_hold: false, require_reason: true, distinct_approver: false },
    });
  });

  test('a require_approval policy and the built-in hold both show when no exemption matches', () => {
    expect(judgeSubmission(agent, [policy({ id: 'pol_h' })])).toEqual({
      verdict: 'hold',
      hold: { policies: ['pol_h'], agent_hold: true, require_reason: false, distinct_approver: false },
    });
  });

  test('an exempt policy does nothing for a person’s run', () => {
    const exempt = policy({ id: 'pol_x', effect: 'exempt' });
    expect(judgeSubmission(facts(), [exempt])).toEqual({ verdict: 'run', exempted_by: [] });
    expect(judgeSubmission(facts(), [exempt, policy({ id: 'pol_h' })])).toEqual({
      verdict: 'hold',
      hold: { policies: ['pol_h'], agent_hold: false, require_reason: false, distinct_approver: false },
    });
  });

  test('a require_approval policy scoped to agents holds agents only', () => {
    const scoped = policy({ id: 'pol_h', actor_kind: 'agent' });
    expect(judgeSubmission(facts(), [scoped])).toEqual({ verdict: 'run', exempted_by: [] });
    expect(judgeSubmission(agent, [scoped, policy({ id: 'pol_x', effect: 'exempt' })])).toEqual({
      verdict: 'hold',
      hold: { policies: ['pol_h'], agent_hold: false, require_reason: false, distinct_approver: false },
    });
  });
});

describe('exclude_dry_run', () => {
  const changeFreeDryRun = { dry_run: true, dry_run_change_free: true };
  // An extension tool's dry run is not known to change nothing, so it is judged as the real run.
  const extensionDryRun = { dry_run: true, dry_run_change_free: false };
  const realRun = { dry_run: false, dry_run_change_free: false };

  test.each([
    ['a change-free dry run is left out', changeFreeDryRun, false],
    ['an extension tool’s dry run is matched as the real run', extensionDryRun, true],
    ['a real run is matched', realRun, true],
  ] as [string, Partial<SubmissionFacts>, boolean][])('%s', (_name, over, held) => {
    const verdict = judgeSubmission(facts(over), [policy({ id: 'pol_h', exclude_dry_run: true })]);
    expect(matched(verdict)).toBe(held);
  });

  test('without exclude_dry_run a change-free dry run is matched like any run', () => {
    expect(matched(judgeSubmission(facts(changeFreeDryRun), [policy()]))).toBe(true);
  });

  test('a deny policy with exclude_dry_run lets a change-free dry run through and denies the real run', () => {
    const deny = policy({ id: 'pol_d', effect: 'deny', exclude_dry_run: true });
    expect(judgeSubmission(facts(changeFreeDryRun), [deny])).toEqual({ verdict: 'run', exempted_by: [] });
    expect(judgeSubmission(facts(extensionDryRun), [deny])).toEqual({ verdict: 'deny', policies: ['pol_d'] });
    expect(judgeSubmission(facts(realRun), [deny])).toEqual({ verdict: 'deny', policies: ['pol_d'] });
  });

  test('the agent hold still holds an agent’s change-free dry run that a policy left out', () => {
    const verdict = judgeSubmission(facts({ ...changeFreeDryRun, actor_kind: 'agent' }), [policy({ exclude_dry_run: true })]);
    expect(verdict).toEqual({ verdict: 'hold', hold: { policies: [], agent_hold: true, require_reason: false, distinct_approver: false } });
  });
});

describe('policy-file (Rego) policies take part through their outcomes only', () => {
  const rego = (over: Partial<GatePolicy> = {}) => policy({ rego: { package: 'cairn.p' }, ...over });
  const outcome = (p: GatePolicy, o: 'hold' | 'pass' | 'error' | 'timeout', reasons: string[] = [], notes: string[] = []) => ({ policy: p.id, name: `n-${p.id}`, outcome: o, reasons, notes });

  test('a policy with no conditions matches everything, but a Rego row is judged only by what OPA said', () => {
    const p = rego();
    expect(judgeSubmission(facts(), [p], [outcome(p, 'pass')])).toEqual({ verdict: 'run', exempted_by: [] });
  });

  test.each(['hold', 'error', 'timeout'] as const)('outcome %s holds, its id among the policies and its reasons on the hold', (o) => {
    const p = rego({ require_reason: true });
    const verdict = judgeSubmission(facts(), [p], [outcome(p, o, ['why'])]);
    expect(verdict).toEqual({
      verdict: 'hold',
      hold: { policies: [p.id], agent_hold: false, require_reason: true, distinct_approver: false, rego: [{ policy: p.id, name: `n-${p.id}`, outcome: o, reasons: ['why'] }] },
    });
  });

  test('a Rego row with no outcome (not loaded by this server) holds as an error', () => {
    const p = rego();
    const verdict = judgeSubmission(facts(), [p], []);
    expect(verdict.verdict === 'hold' && verdict.hold.rego?.[0]).toMatchObject({ policy: p.id, outcome: 'error' });
  });

  test('a deny policy still wins; notes ride along with a run that goes through', () => {
    const p = rego();
    const deny = policy({ effect: 'deny' });
    expect(judgeSubmission(facts(), [p, deny], [outcome(p, 'hold', ['x'])])).toEqual({ verdict: 'deny', policies: [deny.id] });
    expect(judgeSubmission(facts(), [p], [outcome(p, 'pass', [], ['careful'])])).toEqual({
      verdict: 'run',
      exempted_by: [],
      notes: [{ policy: p.id, name: `n-${p.id}`, notes: ['careful'] }],
    });
  });
});
