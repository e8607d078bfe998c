// Bundled into workflow code (workflows/graph.ts imports it): it must stay deterministic, with no
// I/O, no clock, no randomness and no imports beyond core/ modules that keep the same rule. A change
// to what it decides for a graph already running changes workflow behaviour: see "Changing workflow
// code" in docs/architecture.md (replay tests, `patched()`).

import type { AnsibleSpec } from './run';

/**
 * Saved workflows and pipelines as a graph of steps (spec part A 2.5, 3.2). Pure: used when a
 * template or pipeline is saved (validation) and inside workflow code (what runs next), so it
 * holds no I/O, clock or randomness.
 *
 * - A step runs once every step it `depends_on` has succeeded (or, for an approval step, was
 *   approved). Independent steps run in parallel.
 * - A step named as an approval step's `if_denied` is on that step's deny path: it runs only
 *   when the approval is denied or times out, and is skipped when it is approved.
 * - A step whose dependency failed, was denied or was skipped is skipped: it never runs.
 * - The graph ends when no step is waiting or running. It failed when a step failed, or when an
 *   approval was denied with no `if_denied` to take.
 */

/**
 * A step. An ansible step carries its playbook, stored inventory and controls (spec part A 2.2,
 * 2.5) as a run does, each present only when given (core/ansible-spec.ts ansibleSpecOf).
 */
export interface StepDefinition extends AnsibleSpec {
  name: string;
  /** `approval` waits for a decision; anything else runs its tool. */
  type: 'run' | 'approval';
  depends_on: string[];
  tool?: string;
  command?: string;
  extra_vars?: Record<string, unknown>;
  description?: string;
  /** Seconds an approval step waits before it takes its deny path; zero or absent waits for ever. */
  approval_timeout?: number;
  if_denied?: string;
  /** A split's shard: which slice of the work this step is (the tool sees CAIRN_SHARD_INDEX and _COUNT). */
  shard?: { index: number; count: number };
}

export type StepState = 'waiting' | 'running' | 'succeeded' | 'failed' | 'awaiting_approval' | 'approved' | 'denied' | 'skipped';

export class WorkflowGraphError extends Error {
  constructor(
    message: string,
    readonly field: string,
  ) {
    super(message);
    this.name = 'WorkflowGraphError';
  }
}

/**
 * Refuses a graph that cannot run: duplicate or empty names, a dependency or `if_denied` naming no
 * step, `if_denied` on a step that is not an approval, a step depending on itself, a cycle.
 * `field` names the offending place as `steps[2].depends_on`.
 */
export function checkGraph(steps: readonly StepDefinition[]): void {
  if (steps.length === 0) throw new WorkflowGraphError('a workflow needs at least one step', 'steps');
  const index = new Map<string, number>();
  steps.forEach((step, i) => {
    if (index.has(step.name)) throw new WorkflowGraphError(`two steps are named "${step.name}"; step names must be unique`, `steps[${i}].name`);
    index.set(step.name, i);
  });
  steps.forEach((step, i) => {
    step.depends_on.forEach((dependency, j) => {
      if (!index.has(dependency)) {
        throw new WorkflowGraphError(`step "${step.name}" depends on "${dependency}", which is not a step of this workflow`, `steps[${i}].depends_on[${j}]`);
      }
      if (dependency === step.name) throw new WorkflowGraphError(`step "${step.name}" depends on itself`, `steps[${i}].depends_on[${j}]`);
    });
    if (step.if_denied !== undefined) {
      if (step.type !== 'approval') throw new WorkflowGraphError(`if_denied belongs to approval steps; "${step.name}" is not one`, `steps[${i}].if_denied`);
      if (!index.has(step.if_denied)) {
        throw new WorkflowGraphError(`step "${step.name}" names if_denied "${step.if_denied}", which is not a step of this workflow`, `steps[${i}].if_denied`);
      }
      if (step.if_denied === step.name) throw new WorkflowGraphError(`step "${step.name}" names itself as if_denied`, `steps[${i}].if_denied`);
    }
  });
  const cycle = findCycle(steps);
  if (cycle) throw new WorkflowGraphError(`the steps form a cycle: ${cycle.join(' -> ')}`, `steps[${index.get(cycle[0])}].depends_on`);
}

/** Edges a step waits on: its dependencies, and for a deny-path step the approval it belongs to. */
function prerequisites(steps: readonly StepDefinition[]): Map<string, string[]> {
  const edges = new Map(steps.map((s) => [s.name, [...s.depends_on]]));
  for (const step of steps) if (step.if_denied !== undefined) edges.get(step.if_denied)!.push(step.name);
  return edges;
}

function findCycle(steps: readonly StepDefinition[]): string[] | undefined {
  const edges = prerequisites(steps);
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (name: string): string[] | undefined => {
    if (state.get(name) === 'done') return undefined;
    if (state.get(name) === 'visiting') return [...path.slice(path.indexOf(name)), name];
    state.set(name, 'visiting');
    path.push(name);
    for (const next of edges.get(name) ?? []) {
      const found = visit(next);
      if (found) return found;
    }
    path.pop();
    state.set(name, 'done');
    return undefined;
  };
  for (const step of steps) {
    const found = visit(step.name);
    if (found) return found;
  }
  return undefined;
}

/** The approval step whose deny path a step is on, if any. */
function denyPathOwner(steps: readonly StepDefinition[], name: string): StepDefinition | undefined {
  return steps.find((s) => s.if_denied === name);
}

export interface GraphProgress {
  /** Steps to start now (or, for approval steps, to start waiting at). */
  ready: string[];
  /** Steps that will never run, with why. */
  skipped: { name: string; why: string }[];
}

/**
 * What can happen next given each step's state: which waiting steps are ready, which can never
 * run. Call it after every change until nothing is waiting or running.
 */
export function nextSteps(steps: readonly StepDefinition[], states: ReadonlyMap<string, StepState>): GraphProgress {
  const ready: string[] = [];
  const skipped: { name: string; why: string }[] = [];
  for (const step of steps) {
    if (states.get(step.name) !== 'waiting') continue;
    const owner = denyPathOwner(steps, step.name);
    if (owner) {
      const decision = states.get(owner.name);
      if (decision === 'approved' || decision === 'skipped' || decision === 'failed') {
        skipped.push({ name: step.name, why: `not run: it runs only when "${owner.name}" is denied` });
        continue;
      }
      if (decision !== 'denied') continue;
    }
    const blocking = step.depends_on.find((d) => ['failed', 'denied', 'skipped'].includes(states.get(d)!));
    if (blocking) {
      skipped.push({ name: step.name, why: `not run: "${blocking}" ${describeState(states.get(blocking)!)}` });
      continue;
    }
    if (step.depends_on.every((d) => states.get(d) === 'succeeded' || states.get(d) === 'approved')) ready.push(step.name);
  }
  return { ready, skipped };
}

function describeState(state: StepState): string {
  return state === 'denied' ? 'was denied' : state === 'skipped' ? 'did not run' : 'failed';
}

/** Whether every step has settled (none waiting, running or awaiting a decision). */
export function graphSettled(states: ReadonlyMap<string, StepState>): boolean {
  return [...states.values()].every((s) => !['waiting', 'running', 'awaiting_approval'].includes(s));
}

/**
 * How a settled graph ended: failed when a step failed or an approval was denied with no deny
 * path to take; the error names the first such step in definition order.
 */
export function graphOutcome(steps: readonly StepDefinition[], states: ReadonlyMap<string, StepState>): { ok: true } | { ok: false; error: string } {
  for (const step of steps) {
    const state = states.get(step.name);
    if (state === 'failed') return { ok: false, error: `step "${step.name}" failed` };
    if (state === 'denied' && step.if_denied === undefined) return { ok: false, error: `step "${step.name}" was denied by an approver` };
  }
  return { ok: true };
}

/** A pipeline: each step depends on the one before it, so a failed step stops the rest. */
export function pipelineGraph(steps: readonly Omit<StepDefinition, 'depends_on' | 'type'>[]): StepDefinition[] {
  return steps.map((step, i) => ({ ...step, type: 'run' as const, depends_on: i === 0 ? [] : [steps[i - 1].name] }));
}

/** A split: one independent step per shard index (all `count` of them unless `indexes` names some). */
export function splitGraph(tool: string, command: string, count: number, indexes: readonly number[] = [...Array(count).keys()]): StepDefinition[] {
  return indexes.map((index) => ({ name: `shard-${index}`, type: 'run' as const, depends_on: [], tool, command, shard: { index, count } }));
}
