import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { classifyPlan, planDeletesAny } from '../core/iac/plan';
import { judgePlan, type GatePolicy } from '../core/runs/policy-gate';
import { locateIacBinary, OPENTOFU } from '../embedded/iac-binaries';
import type { Section } from './report';
import { msSince, percentile } from './stats';

const execFileAsync = promisify(execFile);
const RESOURCES = 1_000;
const ROUNDS = 10;

/** The policy set the gate judges against: one plan condition that matches nothing here, one that does. */
const POLICIES: GatePolicy[] = [
  { id: 'pol_db', effect: 'require_approval', tool: null, command_contains: null, inventory_id: null, queue: null, actor: null, account: null, actor_kind: null, require_reason: false, exclude_dry_run: false, require_distinct_approver: false, plan_deletes: ['aws_db_instance'] },
  { id: 'pol_any', effect: 'require_approval', tool: 'opentofu', command_contains: null, inventory_id: null, queue: null, actor: null, account: null, actor_kind: null, require_reason: false, exclude_dry_run: false, require_distinct_approver: false, plan_deletes: ['*'] },
];

/**
 * (p) The plan gate on a 1,000-resource plan: what Cairn adds between the tool's saved plan and the
 * gate's verdict (the plan file's digest, parsing and classifying `show -json`, judging the
 * policies), beside the tool's own `tofu show -json` of that plan. The plan is of 1,000
 * terraform_data resources, half of them deleted, so no provider is needed.
 */
export async function planGateBenchmark(): Promise<Section | undefined> {
  const tofu = await locateIacBinary(OPENTOFU).catch(() => undefined);
  if (!tofu) return undefined;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-bench-plan-'));
  const env = { ...process.env, TF_IN_AUTOMATION: '1', CHECKPOINT_DISABLE: '1', TF_CLI_CONFIG_FILE: path.join(dir, 'cli.tfrc') };
  const run = (args: string[]) => execFileAsync(tofu.path, args, { cwd: dir, env, maxBuffer: 1024 * 1024 * 1024 });
  try {
    await fs.writeFile(env.TF_CLI_CONFIG_FILE, 'provider_installation {\n  direct {\n    exclude = ["*/*/*"]\n  }\n}\n');
    const resources = (n: number, from = 0) =>
      Array.from({ length: n }, (_, i) => `resource "terraform_data" "r${from + i}" {\n  input = "value ${from + i}"\n}\n`).join('');
    // Apply 1,000, then plan r500..r1499: 500 deletes, 500 creates, 500 unchanged (1,500 resources in the plan).
    await fs.writeFile(path.join(dir, 'main.tf'), resources(RESOURCES));
    await run(['init', '-input=false', '-no-color']);
    await run(['apply', '-input=false', '-no-color', '-auto-approve']);
    await fs.writeFile(path.join(dir, 'main.tf'), resources(RESOURCES, RESOURCES / 2));
    await run(['plan', '-input=false', '-no-color', '-out=plan.tfplan']);
    const show: number[] = [];
    const gate: number[] = [];
    let json = '';
    for (let i = 0; i < ROUNDS; i++) {
      const started = process.hrtime.bigint();
      json = (await run(['show', '-json', 'plan.tfplan'])).stdout;
      show.push(msSince(started));
      const judged = process.hrtime.bigint();
      const bytes = await fs.readFile(path.join(dir, 'plan.tfplan'));
      createHash('sha256').update(bytes).digest('hex');
      const plan = classifyPlan(json);
      const verdict = judgePlan(
        { tool: 'opentofu', command: '', inventory_id: null, queue: '', actor: 'bench', account: 'admin', actor_kind: 'user', dry_run: false, dry_run_change_free: false },
        (types) => planDeletesAny(plan, types),
        POLICIES,
      );
      gate.push(msSince(judged));
      if (verdict.verdict !== 'hold' || plan.totals.delete !== RESOURCES / 2 || plan.totals.create !== RESOURCES / 2) throw new Error('the benchmark plan was not classified as expected');
    }
    return {
      rows: [
        { metric: `plan gate p50 (digest, classify, judge) of a ${RESOURCES}-resource plan`, value: percentile(gate, 50), baseline: percentile(show, 50), unit: 'ms', budget: { max: 250 } },
      ],
      notes: [
        `plan gate: ${ROUNDS} rounds over one saved plan of ${RESOURCES} terraform_data changes (500 deletes, 500 creates, 500 unchanged; show -json ${(json.length / 1024).toFixed(0)} KiB); baseline is tofu show -json of that plan (p50); ` +
          `gate p95 ${percentile(gate, 95).toFixed(1)} ms, show -json p95 ${percentile(show, 95).toFixed(1)} ms`,
      ],
    };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}
