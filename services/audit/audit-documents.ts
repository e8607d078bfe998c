import { entryForBundle, entryHash, entryOf, GENESIS_HASH } from '../../core/audit/audit-chain';
import { RECEIPT_TYPE, SPARSE_WITHHELD_KINDS } from '../../core/audit/audit-offline';
import { bundleDocumentV2, bundleEntryV2, bundlePayloadV1, bundlePayloadV2, type BundleVersion } from '../../core/audit/audit-bundle';
import { decisionView } from '../../core/runs/decision-view';
import { DomainError, badRequest, notFound } from '../../core/errors';
import { consistencyProof, inclusionProof, leafOfStoredHash, rootFromLeafHashes, subtreeHashes } from '../../core/audit/merkle';
import { runView } from '../../core/runs/run-view';
import { auditEntriesOfRun, entryOfChainRow, type ChainRow, type StoredAuditEntry } from '../../store/audit';
import { listDecisionRecords } from '../../store/decisions';
import { getRun } from '../../store/runs';
import type { Caller } from '../../store/tokens';
import { scanWholeChain, type WholeChainReport } from './audit-verify';
import { requireRunAccess } from '../access/access';
import type { ServerContext } from '../context';

/**
 * The signed documents made from the audit chain: bundles (spec part B 6.5, 7.4) and run receipts
 * (spec part A 4.1, part B 5.2 item 7). Each is made only over a whole chain that verifies, and is
 * answered as a compact JWS.
 */

/**
 * The 409 a bundle or a receipt answers when the chain it would sign does not verify (spec part
 * B 7.4), with the coordinates `GET /v1/audit/verify` reports.
 */
function chainRefusal(report: Exclude<WholeChainReport, { ok: true }>): DomainError {
  const what = report.reason === 'chain_break' ? `the audit chain breaks at position ${report.broke_at}` : 'the audit chain no longer satisfies its anchors';
  return new DomainError('conflict', `${what}; nothing is signed over it: ${report.detail}`, {
    reason: report.reason,
    broke_at: report.broke_at,
    broke_seq: report.broke_seq,
    count: report.count,
    anchor_problems: report.reason === 'anchor_unsatisfied' ? report.anchor_problems : [],
    detail: report.detail,
  });
}

/** The 409 for a chain that verifies but from which no document can be made (an empty chain). */
function unbundlable(message: string): DomainError {
  return new DomainError('conflict', message, { reason: 'chain_unbundlable', broke_at: 0, broke_seq: 0, count: 0, anchor_problems: [] });
}

const hex = (hashes: Buffer[]) => hashes.map((h) => h.toString('hex'));

/** A bundle as answered: version 1 a compact JWS, version 2 a JSON document holding its signed part. */
export interface SignedBundle {
  version: BundleVersion;
  document: string;
}

/**
 * A signed bundle of the entries after chain position `after` (at most `limit` of them), with
 * every anchor and the last entry's inclusion proof, in the version asked for
 * (core/audit/audit-bundle.ts). The whole chain and every anchor are checked before the window
 * applies.
 */
export async function signBundle(server: ServerContext, window: { after: number; limit?: number; version: BundleVersion }): Promise<SignedBundle> {
  const { after, limit, version } = window;
  const entries: ChainRow[] = [];
  let prevHash = GENESIS_HASH;
  // Without a limit the window ends at the chain's end, whose proof the verifier's tree gives;
  // only a window that may end sooner needs every leaf kept for its last entry's proof.
  const { report, anchors, leaves, lastInclusion } = await scanWholeChain(server, {
    leaves: limit !== undefined,
    onEntry(entry, position) {
      if (position === after) prevHash = entry.hash;
      else if (position > after && (limit === undefined || position <= after + limit)) entries.push(entry);
    },
  });
  if (!report.ok) throw chainRefusal(report);
  if (report.count === 0) throw unbundlable('the audit chain is empty; there is nothing to bundle');
  if (after > report.count) throw badRequest(`after must be at most the chain's size, ${report.count}`, { field: 'after' });

  const last = entries[entries.length - 1];
  const head = {
    install_id: server.identity.installId,
    key_id: server.identity.keyId,
    issued_at: new Date().toISOString(),
    size: report.count,
    head_hash: report.head_hash,
    merkle_root: report.merkle_root,
    anchors: anchors.map((anchor) => anchor.signed),
    window: { after, prev_hash: prevHash },
    last_inclusion: !last ? [] : hex(last.seq === report.count && lastInclusion ? lastInclusion : inclusionProof(last.seq - 1, report.count, leaves)),
  };
  if (version === 1) return { version, document: await server.identity.sign(bundlePayloadV1(head, entries.map(entryForBundle))) };
  // Each entry as the text the verification above hashed; its hash is signed, not spliced in.
  const signed = await server.identity.sign(bundlePayloadV2(head, entries.map((entry) => entry.hash)));
  return { version, document: bundleDocumentV2(signed, entries.map(bundleEntryV2)) };
}

/**
 * The run's entries within a verified prefix, read by the run's index rather than by scanning, each
 * checked to recompute and to be the leaf the tree holds at its place: a row rewritten since the
 * prefix was read is refused, not signed.
 */
async function runEntriesInPrefix(server: ServerContext, runId: string, prefixSize: number, leaves: Buffer[]): Promise<StoredAuditEntry[]> {
  const entries = (await auditEntriesOfRun(server.sql, runId)).filter((entry) => entry.seq <= prefixSize);
  for (const entry of entries) {
    let recomputed = '';
    try {
      recomputed = entryHash(entry);
    } catch {
      // no canonical form: refused below
    }
    const leaf = leaves[entry.seq - 1];
    if (recomputed !== entry.hash || !leaf || !leaf.equals(leafOfStoredHash(entry.hash))) {
      throw chainRefusal({
        ok: false,
        reason: 'chain_break',
        broke_at: entry.seq,
        broke_seq: entry.seq,
        count: leaves.length,
        detail: `entry ${entry.seq} changed after the chain was verified`,
      });
    }
  }
  return entries;
}

/**
 * A signed receipt of what a run did, each of its chain entries proved to belong to the whole
 * chain. The full form (an admin's, unless `sparse`) adds the run's record and its decision
 * records; the sparse form (always below admin) discloses only the entries that carry no outcome
 * and no decision. `from` (a chain size) adds a consistency proof that the chain only appended
 * since that size.
 */
export async function signReceipt(server: ServerContext, caller: Caller, runId: string, options: { sparse: boolean; from?: number }): Promise<string> {
  const run = await getRun(server.sql, runId);
  if (!run) throw notFound(`run ${runId}`);
  await requireRunAccess(server.sql, caller, run, 'read');
  const form = caller.account.role === 'admin' && !options.sparse ? 'full' : 'sparse';

  // Read before the chain: a decision's record and its entry commit together, so every record
  // read here has its entry in the scan that follows.
  const decisions = form === 'full' ? await listDecisionRecords(server.sql, run.id) : [];
  const ofRun: StoredAuditEntry[] = [];
  // Resumed from the verified prefix: only what was appended since is read and checked whole.
  const { report, leaves, resumedFrom } = await scanWholeChain(server, {
    leaves: true,
    resumeVerified: true,
    onEntry(entry) {
      if (entry.run_id === run.id) ofRun.push(entryOfChainRow(entry));
    },
  });
  if (!report.ok) throw chainRefusal(report);
  if (resumedFrom > 0) ofRun.unshift(...(await runEntriesInPrefix(server, run.id, resumedFrom, leaves)));
  if (report.count === 0) throw unbundlable('the audit chain is empty; there is nothing to prove');
  if (options.from !== undefined && options.from > report.count) {
    throw badRequest(`from must be at most the chain's size, ${report.count}`, { field: 'from' });
  }

  const disclosed = form === 'full' ? ofRun : ofRun.filter((entry) => !SPARSE_WITHHELD_KINDS.has(String(entry.body.kind)));
  const tree = subtreeHashes(leaves, report.count);
  const payload: Record<string, unknown> = {
    type: RECEIPT_TYPE,
    form,
    install_id: server.identity.installId,
    key_id: server.identity.keyId,
    issued_at: new Date().toISOString(),
    run_id: run.id,
    size: report.count,
    merkle_root: report.merkle_root,
    head_hash: report.head_hash,
    // The fact cache setting the run carried (spec part A 2.1): disclosed in either form; facts never are.
    fact_cache: run.spec.fact_cache ?? null,
    entries: disclosed.map((entry) => ({ entry: entryOf(entry), index: entry.seq - 1, proof: hex(inclusionProof(entry.seq - 1, report.count, tree)) })),
  };
  if (form === 'full') {
    payload.run = runView(run);
    payload.decisions = decisions.map((record) => decisionView(record));
  }
  if (options.from !== undefined) {
    payload.consistency = {
      from_size: options.from,
      from_root: rootFromLeafHashes(leaves.slice(0, options.from)).toString('hex'),
      proof: hex(consistencyProof(options.from, report.count, tree)),
    };
  }
  return server.identity.sign(payload);
}
