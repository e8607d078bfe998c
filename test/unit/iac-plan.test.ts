import { actionOf, classifyPlan, MAX_LISTED, planDeletesAny, planSummary } from '../../core/iac/plan';
import { judgePlan, judgeSubmission, type GatePolicy, type SubmissionFacts } from '../../core/runs/policy-gate';
import { configurationDir, configurationFault, opentofuTool } from '../../tools/iac';

const change = (address: string, type: string, actions: string[]) => ({ address, type, mode: 'managed', change: { actions } });
const planJson = (changes: unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({ format_version: '1.2', terraform_version: '1.12.6', resource_changes: changes, ...extra });

describe('classifyPlan reads show -json', () => {
  test('each action list is one class; no-op and read change nothing', () => {
    expect(actionOf(['create'])).toBe('create');
    expect(actionOf(['update'])).toBe('update');
    expect(actionOf(['delete'])).toBe('delete');
    expect(actionOf(['delete', 'create'])).toBe('replace');
    expect(actionOf(['create', 'delete'])).toBe('replace');
    expect(actionOf(['no-op'])).toBeUndefined();
    expect(actionOf(['read'])).toBeUndefined();
  });

  test('totals and per-type counts', () => {
    const plan = classifyPlan(
      planJson([
        change('aws_db_instance.main', 'aws_db_instance', ['delete']),
        change('aws_instance.web[0]', 'aws_instance', ['delete', 'create']),
        change('aws_instance.web[1]', 'aws_instance', ['update']),
        change('aws_s3_bucket.logs', 'aws_s3_bucket', ['create']),
        change('aws_iam_role.r', 'aws_iam_role', ['no-op']),
      ]),
    );
    expect(plan.classified).toBe(true);
    expect(plan.totals).toEqual({ create: 1, update: 1, replace: 1, delete: 1 });
    expect(plan.by_type).toEqual({
      aws_db_instance: { create: 0, update: 0, replace: 0, delete: 1 },
      aws_instance: { create: 0, update: 1, replace: 1, delete: 0 },
      aws_s3_bucket: { create: 1, update: 0, replace: 0, delete: 0 },
    });
    expect(plan.resources.map((r) => r.action)).toEqual(['delete', 'replace', 'update', 'create']);
    expect(plan.changes).toBe(true);
    expect(plan.tool_version).toBe('1.12.6');
    expect(planSummary(plan)).toBe('plan: 1 to create, 1 to update, 1 to replace, 1 to delete (deletes aws_db_instance ×1, aws_instance ×1)');
  });

  test('a plan of no changes, and one changing outputs only', () => {
    expect(classifyPlan(planJson([change('a.b', 'a', ['no-op'])])).changes).toBe(false);
    expect(classifyPlan(planJson([], { output_changes: { x: { actions: ['create'] } } })).changes).toBe(true);
  });

  test('what cannot be read is unclassified, never change free', () => {
    for (const bad of ['not json', '[]', planJson([{ address: 'a.b' }]), JSON.stringify({ resource_changes: 'x' }), JSON.stringify({ errored: true })]) {
      const plan = classifyPlan(bad);
      expect(plan.classified).toBe(false);
      expect(plan.changes).toBe(true);
      expect(planDeletesAny(plan, ['anything'])).toBe(true);
    }
  });

  test('a large plan lists the first resources and counts the rest', () => {
    const plan = classifyPlan(planJson(Array.from({ length: MAX_LISTED + 7 }, (_, i) => change(`t.r${i}`, 't', ['create']))));
    expect(plan.resources).toHaveLength(MAX_LISTED);
    expect(plan.resources_left_out).toBe(7);
    expect(plan.totals.create).toBe(MAX_LISTED + 7);
  });

  test('deletes of given types, a replace counting as a delete, * for any', () => {
    const plan = classifyPlan(planJson([change('d.x', 'aws_db_instance', ['delete', 'create']), change('s.y', 'aws_s3_bucket', ['create'])]));
    expect(planDeletesAny(plan, ['aws_db_instance'])).toBe(true);
    expect(planDeletesAny(plan, ['aws_s3_bucket'])).toBe(false);
    expect(planDeletesAny(plan, ['*'])).toBe(true);
    expect(planDeletesAny(classifyPlan(planJson([change('s.y', 'aws_s3_bucket', ['create'])])), ['*'])).toBe(false);
  });
});

describe('the plan gate', () => {
  const facts: SubmissionFacts = {
    tool: 'opentofu',
    command: 'resource ...',
    inventory_id: null,
    queue: '',
    actor: 'ci',
    account: 'dana',
    actor_kind: 'user',
    dry_run: false,
    dry_run_change_free: false,
  };
  const policy = (over: Partial<GatePolicy>): GatePolicy => ({
    id: 'pol_1',
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
    plan_deletes: null,
    ...over,
  });
  const deletesDb = (types: readonly string[]) => types.includes('aws_db_instance') || types.includes('*');
  const deletesNothing = () => false;

  test('a policy with a plan condition is judged at the plan gate, not at submission', () => {
    const planned = policy({ plan_deletes: ['aws_db_instance'] });
    expect(judgeSubmission(facts, [planned]).verdict).toBe('run');
    expect(judgePlan(facts, deletesDb, [planned])).toMatchObject({ verdict: 'hold', hold: { policies: ['pol_1'], agent_hold: false } });
    expect(judgePlan(facts, deletesNothing, [planned]).verdict).toBe('run');
  });

  test('a policy without a plan condition is not judged again at the plan gate', () => {
    expect(judgePlan(facts, deletesDb, [policy({})]).verdict).toBe('run');
  });

  test('its other conditions must match too; a deny refuses the apply', () => {
    expect(judgePlan(facts, deletesDb, [policy({ plan_deletes: ['*'], tool: 'terraform' })]).verdict).toBe('run');
    expect(judgePlan(facts, deletesDb, [policy({ plan_deletes: ['*'], effect: 'deny' }), policy({ id: 'pol_2', plan_deletes: ['*'] })])).toEqual({
      verdict: 'deny',
      policies: ['pol_1'],
    });
    expect(judgePlan(facts, deletesDb, [policy({ plan_deletes: ['*'], require_reason: true, require_distinct_approver: true })])).toMatchObject({
      hold: { require_reason: true, distinct_approver: true },
    });
  });
});

describe('the opentofu tool', () => {
  test('its configuration is the command, or a directory of its project', () => {
    expect(configurationFault({ command: '', extra_vars: {} })).toMatch(/command must hold the configuration/);
    expect(configurationFault({ command: 'resource "terraform_data" "a" {}', extra_vars: {} })).toBeUndefined();
    const project = { id: 'prj_1', commit: 'abc' };
    expect(configurationDir({ command: '', extra_vars: {}, project })).toBe('.');
    expect(configurationDir({ command: 'envs/prod', extra_vars: {}, project })).toBe('envs/prod');
    expect(configurationFault({ command: '../other', extra_vars: {}, project })).toMatch(/relative path without \.\./);
    expect(configurationFault({ command: '/etc', extra_vars: {}, project })).toMatch(/relative path/);
  });

  test('a dry run plans; extra vars become TF_VAR_ variables; main.tf is written only without a project', () => {
    const dry = opentofuTool.invocation({ command: 'x', extra_vars: { region: 'eu', sizes: [1, 2] }, dry_run: true });
    expect(dry.argv).toEqual(['bash', 'cairn-iac.sh', 'plan']);
    expect(dry.env).toMatchObject({ TF_VAR_region: 'eu', TF_VAR_sizes: '[1,2]', CAIRN_IAC_DIR: '.' });
    expect(dry.files['main.tf']).toBe('x');
    const fromProject = opentofuTool.invocation({ command: 'envs/prod', extra_vars: {}, project: { id: 'prj_1', commit: 'abc' } });
    expect(fromProject.files['main.tf']).toBeUndefined();
    expect(fromProject.env.CAIRN_IAC_DIR).toBe('envs/prod');
  });

  test('the module fetch is bounded by the worker\'s --module-fetch-timeout, two minutes when none is given', () => {
    expect(opentofuTool.invocation({ command: 'x', extra_vars: {} }).env.CAIRN_IAC_MODULE_FETCH_TIMEOUT).toBe('120');
    const inputs = { iac: { binary: '/b/tofu', phase: 'plan' as const, moduleFetchTimeout: 7 } };
    const bounded = opentofuTool.invocation({ command: 'x', extra_vars: {} }, inputs);
    expect(bounded.env.CAIRN_IAC_MODULE_FETCH_TIMEOUT).toBe('7');
    expect(bounded.files['cairn-iac.sh']).toContain('timeout -k 2 "$limit" "$tf" get -no-color');
  });
});
