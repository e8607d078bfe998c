import { parseAnsibleResults, resultsWanted, type AnsibleResults, type ResultsWanted } from '../core/ansible/ansible-results';
import { FACTS_MANIFEST, FACTS_PREFIX, MAX_FACTS_BYTES } from '../core/ansible/facts';
import { MAX_INVENTORY_HOSTS } from '../core/ansible/inventory';
import type { Run } from '../core/runs/run';
import type { ExecutionOutcome } from '../core/runs/run-outcome';
import { storeGatheredFacts, type FactsDocument } from '../services/ansible/facts';
import { storeAnsibleResults } from '../services/ansible/host-results';
import type { Sql } from '../store/db';
import { MAX_RESULTS_BYTES, RESULTS_FILE } from '../tools/ansible';
import { readWorkFile, workDirNames } from '../runtime/work-dir';

/** What an ansible run left in its work dir, read back: its per-host and per-task results, and the facts it gathered. */
export interface ToolResults {
  results?: AnsibleResults;
  /** Only when the run's fact cache is on and it has an inventory. */
  facts?: { documents: FactsDocument[]; supplied: Record<string, string> };
}

/**
 * Reads what an ansible run left in its work dir once it has exited, before the dir goes: the
 * callback plugin's per-host and per-task results, and the facts it gathered when its fact cache
 * is on. The run may have replaced any file there: each is read only as a top-level regular file,
 * no link followed, no FIFO waited on (runtime/work-dir.ts). The pool stores them at once
 * (recordToolResults); a relay worker sends them through the relay in bounded batches.
 */
export async function readToolResults(wants: ResultsWanted, workDir: string, outcome: ExecutionOutcome): Promise<ToolResults> {
  if (!wants.ansible || outcome.kind !== 'exited') return {};
  const facts = wants.facts ? { documents: await gatheredFacts(workDir), supplied: await suppliedDigests(workDir) } : undefined;
  const written = await readWorkFile(workDir, RESULTS_FILE, MAX_RESULTS_BYTES);
  return { results: written && parseAnsibleResults(written.bytes.toString('utf8')), facts };
}

/** Reads an ansible run's results and facts out of its work dir and stores them (services/ansible/). */
export async function recordToolResults(sql: Sql, run: Run, workDir: string, outcome: ExecutionOutcome): Promise<ExecutionOutcome> {
  if (run.tool !== 'ansible' || outcome.kind !== 'exited') return outcome;
  const read = await readToolResults(resultsWanted(run), workDir, outcome);
  if (read.facts) await storeGatheredFacts(sql, run, read.facts.documents, read.facts.supplied);
  return storeAnsibleResults(sql, run, read.results, outcome);
}

/** The digests of the facts supplied to the run (its manifest), so facts it did not gather again are not stored twice. */
async function suppliedDigests(workDir: string): Promise<Record<string, string>> {
  const manifest = await readWorkFile(workDir, FACTS_MANIFEST, MAX_FACTS_BYTES);
  try {
    return manifest ? (JSON.parse(manifest.bytes.toString('utf8')) as Record<string, string>) : {};
  } catch {
    return {};
  }
}

/** Every fact cache file the run left, one a host, at most the most hosts an inventory may name. */
async function gatheredFacts(workDir: string): Promise<FactsDocument[]> {
  const documents: FactsDocument[] = [];
  for (const name of await workDirNames(workDir, FACTS_PREFIX, MAX_INVENTORY_HOSTS)) {
    if (name.length <= FACTS_PREFIX.length) continue;
    const read = await readWorkFile(workDir, name, MAX_FACTS_BYTES);
    if (!read) continue;
    const host = name.slice(FACTS_PREFIX.length);
    documents.push(read.size > MAX_FACTS_BYTES ? { host, size: read.size } : { host, size: read.size, text: read.bytes.toString('utf8') });
  }
  return documents;
}
