import type { RunIsolationSettings } from '../runtime/sandbox-setup';
import type { RunNetwork } from '../runtime/sandbox';
import { mapLimit } from './concurrency';
import type { Section } from './report';
import { msSince } from './stats';
import { cpuSoFar, type TemporalTarget } from './temporal-cost';
import { trueStarter } from './true-starter';

const STARTS = 300;
const WARMUP = 20;
const AT_ONCE = 8;

/** The process trees a start's CPU is not charged to: the install's Temporal dev server and PostgreSQL. */
export type SandboxStartTarget = Pick<TemporalTarget, 'temporalPid' | 'postgresPid'>;

interface StartCost {
  /** Starts a second, AT_ONCE in flight. */
  rate: number;
  /** CPU per start of the tool launcher and everything it started and reaped (bwrap, slirp4netns, the tool), in ms. */
  launcher: number;
  /** CPU per start of the whole machine, in ms: also what the kernel and others spent on it (a sandbox's init is reaped by the host's init). */
  machine: number;
}

/**
 * (t) What a run's sandbox costs to start and end: `bash -c true` started 300 times (8 at once)
 * through a tool launcher of its own, as a worker starts a run's tool, in the sandbox of each run
 * network, beside the same launcher starting it unsandboxed (`--run-isolation none`). Charged to
 * each start: the CPU of this process's children (the launcher and what it started; the server's
 * own launcher sits idle meanwhile), and the whole machine's, which also holds what the kernel and
 * the host's init spent on the sandbox.
 */
export async function sandboxStartBenchmark(settings: RunIsolationSettings, target: SandboxStartTarget): Promise<Section> {
  const unsandboxed = await startCost({ ...settings, runIsolation: 'none' }, target);
  const networks: RunNetwork[] = ['isolated', 'none', 'host'];
  const sandboxed: [RunNetwork, StartCost][] = [];
  for (const network of networks) sandboxed.push([network, await startCost({ ...settings, runIsolation: 'sandbox', runNetwork: network }, target)]);
  return {
    rows: sandboxed.flatMap(([network, cost]) => [
      { metric: `sandbox start, network ${network}: launcher CPU per start`, value: cost.launcher, baseline: unsandboxed.launcher, unit: 'ms' },
      { metric: `sandbox start, network ${network}: machine CPU per start`, value: cost.machine, baseline: unsandboxed.machine, unit: 'ms' },
    ]),
    notes: [
      `sandbox start: ${STARTS} starts of bash -c true after ${WARMUP} warm-up, ${AT_ONCE} at once, through a tool launcher of its own; baseline the same launcher unsandboxed ` +
        `(${unsandboxed.rate.toFixed(0)} starts/s); sandboxed ${sandboxed.map(([network, cost]) => `${network} ${cost.rate.toFixed(0)}/s`).join(', ')}; ` +
        `the machine's CPU includes each sandbox's init, which ends after bwrap has reported the tool's exit and is reaped by the host's init, and the kernel's namespace cleanup`,
    ],
  };
}

async function startCost(settings: RunIsolationSettings, target: SandboxStartTarget): Promise<StartCost> {
  // Preparing a sandbox also sets this process's tool search path; the last one prepared (a
  // sandbox, as the in-process server's own) leaves it as the server set it.
  const starter = await trueStarter(settings);
  const start = () => starter.start();
  try {
    await mapLimit(WARMUP, AT_ONCE, start);
    const before = cpuSoFar(target);
    const began = process.hrtime.bigint();
    await mapLimit(STARTS, AT_ONCE, start);
    const elapsed = msSince(began);
    const after = cpuSoFar(target);
    return {
      rate: STARTS / (elapsed / 1000),
      launcher: ((after.children - before.children) * 1000) / STARTS,
      machine: ((after.machine - before.machine) * 1000) / STARTS,
    };
  } finally {
    await starter.stop();
  }
}
