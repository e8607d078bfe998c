// The workflow bundle's entry point: every workflow a Cairn worker runs is exported here.
export { runWorkflow } from './run';
export { runWorkflowV2 } from './run';
export { graphWorkflow } from './graph';
export { notifyWorkflow } from './notify';
export { scheduleWorkflow } from './schedule';
export { projectUpdateWorkflow } from './project';
export { jobWorkflow } from './job';
export { keyRotationWorkflow } from './key-rotation';
export { pullRequestWorkflow } from './pull-request';
