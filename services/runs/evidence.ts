import { entryOf } from '../../core/audit/audit-chain';
import { decisionView } from '../../core/runs/decision-view';
import { notFound } from '../../core/errors';
import {
  EVIDENCE_LOG_CAP,
  EVIDENCE_VERSION,
  logText,
  type EvidenceDossier,
  type EvidenceEvent,
  type EvidenceHostSummary,
  type EvidenceTaskSummary,
} from '../../core/runs/evidence';
import { eventView, runView } from '../../core/runs/run-view';
import { eventsAfter } from '../../store/events';
import { readLogRange } from '../../store/logs';
import { auditEntriesOfRun } from '../../store/audit';
import type { Db } from '../../store/db';
import { listDecisionRecords } from '../../store/decisions';
import { getRun, listChildRuns } from '../../store/runs';
import type { Caller } from '../../store/tokens';
import { requireRunAccess } from '../access/access';
import type { ServerContext } from '../context';
import { separationOfDuties } from './decisions';
import { runSummaries } from '../ansible/host-results';
import type { Run } from '../../core/runs/run';

/**
 * Decision reasons and random values go to an admin and to the account that asked for the run;
 * everyone else who may read the run sees each decision's commitment only (spec part A 2.7, 4.1).
 */
export function mayReadReasons(caller: Caller, run: Run): boolean {
  return caller.account.role === 'admin' || (run.account_id !== null && run.account_id === caller.account.id);
}

/** Per-host and per-task summaries of a run: an ansible run's, as its callback plugin reported them (services/host-results.ts). */
async function summariesOf(db: Db, run: Run): Promise<{ hosts: EvidenceHostSummary[]; tasks: EvidenceTaskSummary[] }> {
  return runSummaries(db, run);
}

/**
 * The evidence dossier of one run as this caller may see it, for a caller who may read the run.
 * A step's or shard's own access is its parent's, so every child listed is readable too. Everything is read in one
 * repeatable-read transaction, so the log, events, decisions and chain entries are those of the
 * same moment as the run row, even while the run is still writing.
 */
export async function buildEvidence(server: ServerContext, caller: Caller, runId: string): Promise<EvidenceDossier> {
  return server.sql.begin('isolation level repeatable read read only', async (tx) => {
    const run = await getRun(tx, runId);
    if (!run) throw notFound(`run ${runId}`);
    await requireRunAccess(tx, caller, run, 'read');
    const disclosed = mayReadReasons(caller, run);

    const from = Math.max(0, run.log_bytes - EVIDENCE_LOG_CAP);
    const log = logText(await readLogRange(tx, run.id, from, run.log_bytes), from);

    const events: EvidenceEvent[] = [];
    for await (const event of eventsAfter(tx, run.id, 0)) events.push(eventView(event));

    const [summaries, decisions, chain, children] = await Promise.all([
      summariesOf(tx, run),
      listDecisionRecords(tx, run.id),
      auditEntriesOfRun(tx, run.id),
      listChildRuns(tx, run.id),
    ]);
    const childViews = children.map((child) => runView(child));

    return {
      version: EVIDENCE_VERSION,
      generated_at: new Date().toISOString(),
      install_id: server.identity.installId,
      run: runView(run),
      hosts: summaries.hosts,
      tasks: summaries.tasks,
      steps: run.kind === 'split' ? [] : childViews,
      shards: run.kind === 'split' ? childViews : [],
      log: log.text,
      log_bytes: run.log_bytes,
      log_truncated: log.from > 0,
      log_omitted_bytes: log.from,
      events,
      reasons_disclosed: disclosed,
      decisions: decisions.map((record) => decisionView(record, disclosed)),
      separation_of_duties: separationOfDuties(run, decisions) ?? null,
      chain: chain.map(entryOf),
    } satisfies EvidenceDossier;
  }) as Promise<EvidenceDossier>;
}
