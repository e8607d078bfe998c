import { CHANGE_MEMBERS_CAP, CHANGE_SCAN_CAP, changeOutcome } from '../../core/ansible/estate';
import { notFound } from '../../core/errors';
import { changeMembers, listChanges } from '../../store/changes';
import type { Db } from '../../store/db';
import type { Caller } from '../../store/tokens';
import { readerOf } from '../access/access';

/**
 * Changes (spec part A 2.13, 4.4; part B 8). A run carries a change label when it is submitted
 * (`POST /v1/runs`) or a template is launched (`POST /v1/templates/{id}/launch`) with `change`;
 * the label is kept in the run's spec (so an approval binds to it, and a rerun keeps it) and
 * indexed as `runs.change_label`. Every run with one value is one change: its span (first run
 * created to last activity), who acted (the requesters), and an outcome derived from its member
 * runs (core/estate.ts changeOutcome), all over the runs the caller may read; `withheld` counts
 * the others. The list scans at most CHANGE_SCAN_CAP labelled runs, newest first: `scanned` and
 * `partial` say so, and a change whose runs are all older is not listed.
 */

export async function changeList(db: Db, caller: Caller) {
  const { rows, scanned, partial } = await listChanges(db, CHANGE_SCAN_CAP, readerOf(caller));
  const changes = rows.map((row) => ({
    change: row.change,
    runs: row.runs,
    withheld: row.withheld,
    started_at: row.started_at.toISOString(),
    last_activity_at: row.last_activity_at.toISOString(),
    actors: [...(row.actors ?? [])].sort(),
    outcome: changeOutcome(row.statuses ?? {}),
    statuses: row.statuses ?? {},
  }));
  return { changes, count: changes.length, total: changes.length, scanned, scan_cap: CHANGE_SCAN_CAP, partial };
}

export async function changeDetail(db: Db, caller: Caller, change: string) {
  const { members, readable, withheld, statuses } = await changeMembers(db, change, CHANGE_MEMBERS_CAP, readerOf(caller));
  // A change with no run the caller may read is not found, whether or not others exist.
  if (readable === 0) throw notFound(`change ${JSON.stringify(change)}`);
  const touched = members.map((m) => (m.finished_at ?? m.started_at ?? m.created_at).getTime());
  return {
    change,
    started_at: members[0].created_at.toISOString(),
    last_activity_at: new Date(Math.max(...touched)).toISOString(),
    actors: [...new Set(members.map((m) => m.requested_by))].sort(),
    outcome: changeOutcome(statuses),
    statuses,
    runs: members.map((m) => ({
      id: m.id,
      kind: m.kind,
      tool: m.tool,
      status: m.status,
      requested_by: m.requested_by,
      template_id: m.template_id,
      created_at: m.created_at.toISOString(),
      started_at: m.started_at?.toISOString() ?? null,
      finished_at: m.finished_at?.toISOString() ?? null,
      error: m.error,
    })),
    count: members.length,
    total: readable,
    withheld,
  };
}
