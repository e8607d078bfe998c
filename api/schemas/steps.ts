import { z } from 'zod';
import { ansibleSpecOf } from '../../core/ansible/ansible-spec';
import { badRequest } from '../../core/errors';
import { checkGraph, pipelineGraph, WorkflowGraphError, type StepDefinition } from '../../core/runs/workflow-graph';
import { fitsBytes } from './common';
import { ansibleFields, ansibleInputOf, command, extraVars, optionalAnsibleFields, requireCommandOrPlaybook, tool } from './run-fields';

const MAX_STEPS = 100;
const ANSIBLE_FIELDS = Object.keys(ansibleFields) as (keyof typeof ansibleFields)[];
const MAX_APPROVAL_TIMEOUT = 30 * 24 * 3600;

const stepName = z.string({ message: 'name must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes');

/**
 * A pipeline step: a tool and its command, run in order; an ansible step may name its `playbook`
 * (a path) instead of a command, and its stored inventory and controls, as a run does (spec part A
 * 2.1, 2.2, 4.2). Other tools ignore the ansible fields.
 */
const pipelineStep = z
  .strictObject({
    name: stepName.optional(),
    tool,
    command: command.optional(),
    ...optionalAnsibleFields,
    extra_vars: extraVars.optional(),
  })
  .superRefine(requireCommandOrPlaybook);

export const pipelineSteps = z.array(pipelineStep, { message: 'steps must be a list' }).min(1, 'steps must hold at least one step').max(MAX_STEPS, `steps must hold at most ${MAX_STEPS} steps`);

/** A saved workflow's step (spec part A 2.5): a tool step, or `type: approval`. */
const workflowStep = z
  .strictObject({
    name: stepName,
    type: z.enum(['run', 'approval'], { message: 'type must be approval, or omitted for a step that runs a tool' }).default('run'),
    tool: tool.optional(),
    command: command.optional(),
    // An ansible step's playbook, stored inventory and controls (spec part A 2.2, 2.5), as a run takes them.
    ...optionalAnsibleFields,
    extra_vars: extraVars.optional(),
    depends_on: z.array(stepName, { message: 'depends_on must be a list of step names' }).default([]),
    description: z.string({ message: 'description must be a string' }).max(2000, 'description must be at most 2000 characters').optional(),
    approval_timeout: z
      .number({ message: 'approval_timeout must be whole seconds' })
      .int('approval_timeout must be whole seconds')
      .min(0, 'approval_timeout must not be negative')
      .max(MAX_APPROVAL_TIMEOUT, `approval_timeout must be at most ${MAX_APPROVAL_TIMEOUT} seconds (30 days)`)
      .optional(),
    if_denied: stepName.optional(),
  })
  .superRefine((step, ctx) => {
    if (step.type === 'approval') {
      for (const field of ['tool', 'command', 'extra_vars', ...ANSIBLE_FIELDS] as const) {
        if (step[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: `an approval step runs nothing, so it takes no ${field}` });
      }
    } else {
      if (step.tool === undefined) ctx.addIssue({ code: 'custom', path: ['tool'], message: 'tool is required on a step that is not an approval' });
      else requireCommandOrPlaybook(step, ctx);
      for (const field of ['description', 'approval_timeout', 'if_denied'] as const) {
        if (step[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: `${field} belongs to approval steps` });
      }
    }
  });

export const workflowSteps = z.array(workflowStep, { message: 'steps must be a list' }).min(1, 'steps must hold at least one step').max(MAX_STEPS, `steps must hold at most ${MAX_STEPS} steps`);

/** A graph that cannot run (a cycle, an unknown dependency) is a 400 naming the step's field. */
function checked(steps: StepDefinition[]): StepDefinition[] {
  try {
    checkGraph(steps);
  } catch (err) {
    if (err instanceof WorkflowGraphError) throw badRequest(`${err.field}: ${err.message}`, { field: err.field });
    throw err;
  }
  return steps;
}

/**
 * A step as stored: the fields it was given, its ansible ones only for an ansible step and only
 * those that change something (core/ansible-spec.ts ansibleSpecOf), as a run keeps them.
 */
function storedStep<T extends z.output<typeof pipelineStep> | z.output<typeof workflowStep>>(step: T) {
  const rest = Object.fromEntries(Object.entries(step).filter(([key, v]) => v !== undefined && !(ANSIBLE_FIELDS as string[]).includes(key)));
  return { ...rest, ...ansibleSpecOf(step.tool ?? null, ansibleInputOf(step)) };
}

/** A pipeline's steps as a graph: each after the one before; unnamed steps are `step-1`, `step-2`, … */
export function pipelineToGraph(steps: z.output<typeof pipelineSteps>): StepDefinition[] {
  return checked(pipelineGraph(steps.map((step, i) => ({ ...storedStep(step), tool: step.tool, name: step.name ?? `step-${i + 1}` }))));
}

/** A saved workflow's steps as a checked graph. */
export function workflowToGraph(steps: z.output<typeof workflowSteps>): StepDefinition[] {
  return checked(steps.map((step) => storedStep(step) as unknown as StepDefinition));
}
