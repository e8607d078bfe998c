/**
 * The workflow histories kept under test/replay/histories/, one JSON file per scenario, recorded
 * by record-histories.ts and replayed by replay.test.ts against the current workflow code.
 */
export const SCENARIOS = [
  /** A run that exits 0. */
  'run',
  /** A running run canceled through the API. */
  'cancel',
  /** A run whose timeout fires while its tool still runs. */
  'timeout',
  /** A three-step pipeline: each step a child run workflow, one after the other. */
  'pipeline',
  /** A saved workflow waiting at its approval step while another branch finishes (still open). */
  'approval-waiting',
  /** The same workflow after the step was approved and the rest ran. */
  'approval-passed',
  /** A saved workflow whose approval step got no decision within approval_timeout. */
  'approval-timeout',
  /** A split of three shards run side by side. */
  'split',
  /** A run's start and end delivered to a webhook target, the end failing once and arriving on its retry. */
  'notify',
  /**
   * A schedule saved again while its workflow sleeps (a signal), then firing every second until
   * its COUNT is spent, continuing as new after 100 fires; and a schedule deleted while asleep (a
   * cancel).
   */
  'schedule',
  /**
   * A normal federation key rotation to its end: the new key signs after 24 hours, the old one is
   * removed 24 hours later (recorded on the time-skipping server, so in seconds).
   */
  'key-rotation',
  /**
   * An opentofu run whose plan deletes a resource a policy's plan_deletes names: held at the plan
   * gate (the workflow waits for planDecided), approved, then executed again to apply the saved plan.
   */
  'plan-gate',
  /** A project cloned from a local repository, and a save asked for while its update ran (one more update). */
  'project-update',
  /** A job the API asks of a worker: a project's file listing, read in the sandbox from its checkout. */
  'job',
  /**
   * A pull request opened on a review trigger: the plan run's commit status `pending`, the wait on
   * backing-off timers until the run ends, then its final status and its comment, at a local forge peer.
   */
  'pull-request',
] as const;

export type Scenario = (typeof SCENARIOS)[number];

/** One history file: every workflow of the scenario (a parent and its children), as Temporal's JSON. */
export interface HistoryFile {
  scenario: Scenario;
  /** The SDK the histories were recorded with. */
  recorded_with: string;
  workflows: { workflow_id: string; workflow_type: string; history: unknown }[];
}
