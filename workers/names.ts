/** Workflow ids are the record's id, so a repeated start is harmless and Temporal's UI shows API names. */
export const runWorkflowId = (runId: string) => runId;
