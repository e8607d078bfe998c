import { changeOutcome, type ChangeOutcome } from '../ansible/estate';
import { badRequest } from '../errors';
import type { DecisionKind, DecisionRecord, RedactionCategory } from '../runs/decision';
import { escapeHtml } from '../runs/evidence';
import type { RunStatus } from '../runs/run';

/** A decision as the register shows it: its record without the commitment's opening, with the chain positions of its entry and of its redaction. */
/** A run as the register reads it: created in the period, with its change label and template. */
export interface RegisterRun {
  id: string;
  kind: string;
  tool: string;
  status: RunStatus;
  change_label: string | null;
  requested_by: string;
  template_id: string | null;
  template_name: string | null;
  parent_run_id: string | null;
  step_name: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  error: string | null;
}

export type RegisterDecision = Omit<DecisionRecord, 'random' | 'redaction_entry_id'> & { seq: number | null; redaction_seq: number | null };

/**
 * The period change register (spec part A 4.15, 1.2; part B 8): every run created in a period,
 * grouped by change label, with its decisions (the reasons that may be shown: a redacted reason
 * is not), outcomes, and the chain positions of the entries that prove them, as one self-contained
 * HTML document: no script, no request for anything (styles inline, nothing linked), readable
 * offline and printable. services/audit/register.ts gathers it; this reads the period and renders.
 */

export const REGISTER_DEFAULT_DAYS = 90;
/** The most runs one register lists; a period holding more says so at its top. */
export const REGISTER_RUN_CAP = 5000;

const DAY = 86_400_000;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** A `from` or `to` bound: a date (a whole UTC day; as `to`, through its end) or an RFC 3339 timestamp. */
function bound(text: string, field: 'from' | 'to'): Date {
  const date = DATE.exec(text);
  if (date) {
    const at = new Date(Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3])));
    if (at.toISOString().slice(0, 10) !== text) throw badRequest(`${field}: ${text} is not a calendar date`, { field });
    return field === 'to' ? new Date(at.getTime() + DAY) : at;
  }
  const at = new Date(text);
  if (!RFC3339.test(text) || Number.isNaN(at.getTime())) {
    throw badRequest(`${field}: must be a date (2026-01-31) or an RFC 3339 timestamp (2026-01-31T12:00:00Z)`, { field });
  }
  return at;
}

/**
 * The period [from, to): the last 90 days unless `from` and `to` name another. `from` alone runs
 * to now; `to` alone covers the 90 days before it.
 */
export function registerPeriod(query: { from?: string; to?: string }, now: Date): { from: Date; to: Date; defaulted: boolean } {
  const to = query.to !== undefined ? bound(query.to, 'to') : now;
  const from = query.from !== undefined ? bound(query.from, 'from') : new Date(to.getTime() - REGISTER_DEFAULT_DAYS * DAY);
  if (from.getTime() >= to.getTime()) throw badRequest('to: the period must end after it starts', { field: 'to' });
  return { from, to, defaulted: query.from === undefined && query.to === undefined };
}

export interface RegisterInput {
  install_id: string;
  generated_at: Date;
  generated_by: string;
  period: { from: Date; to: Date; defaulted: boolean };
  chain_head: { seq: number; hash: string };
  total_runs: number;
  runs: Omit<RegisterRun, 'started_at'>[];
  decisions: RegisterDecision[];
  entries: { seq: number; run_id: string; at: Date; kind: string | null; hash: string }[];
}

export interface RegisterChange {
  label: string | null;
  outcome: ChangeOutcome;
  started_at: Date;
  last_activity_at: Date;
  actors: string[];
  runs: RegisterInput['runs'];
}

/** The runs grouped by change label, each group oldest first, labelled changes by their first run, unlabelled runs last. */
export function registerChanges(runs: RegisterInput['runs']): RegisterChange[] {
  const groups = new Map<string | null, RegisterInput['runs']>();
  for (const run of runs) groups.set(run.change_label, [...(groups.get(run.change_label) ?? []), run]);
  const changes = [...groups.entries()].map(([label, members]): RegisterChange => {
    const statuses: Partial<Record<RunStatus, number>> = {};
    for (const run of members) statuses[run.status] = (statuses[run.status] ?? 0) + 1;
    return {
      label,
      outcome: changeOutcome(statuses),
      started_at: members[0].created_at,
      last_activity_at: new Date(Math.max(...members.map((m) => (m.finished_at ?? m.created_at).getTime()))),
      actors: [...new Set(members.map((m) => m.requested_by))].sort(),
      runs: members,
    };
  });
  return changes.sort((a, b) => (a.label === null ? 1 : b.label === null ? -1 : a.started_at.getTime() - b.started_at.getTime() || a.label.localeCompare(b.label)));
}

const esc = escapeHtml;
const time = (at: Date | null) => (at ? `<time datetime="${at.toISOString()}">${at.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>` : '—');
const OUTCOME_WORDS: Record<ChangeOutcome, string> = { in_progress: 'in progress', succeeded: 'succeeded', failed: 'failed', partial: 'partly failed', canceled: 'canceled', rejected: 'rejected', none: 'no runs' };
const DECISION_WORDS: Record<DecisionKind, string> = { approve: 'Approved', reject: 'Rejected', correction: 'Correction' };
const REDACTION_WORDS: Record<RedactionCategory, string> = { personal_data: 'personal data', secret: 'a secret', other: 'another reason' };

const STYLE = `
:root { color-scheme: light; }
body { font: 10.5pt/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1b1f24; margin: 2rem auto; max-width: 72rem; padding: 0 1.5rem; }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.15rem; margin: 2rem 0 .4rem; border-bottom: 1px solid #c9d1d9; padding-bottom: .2rem; }
.lead { color: #57606a; margin: 0 0 1rem; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0 .8rem; }
th, td { text-align: left; vertical-align: top; padding: .25rem .5rem; border-bottom: 1px solid #e1e4e8; }
th { background: #f6f8fa; font-weight: 600; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0 0 1rem; }
dl.meta dt { font-weight: 600; }
dl.meta dd { margin: 0; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: .9em; overflow-wrap: anywhere; }
.outcome { display: inline-block; padding: 0 .45rem; border-radius: .6rem; font-size: .85em; border: 1px solid currentColor; }
.succeeded { color: #1a7f37; } .failed, .rejected { color: #cf222e; } .partial, .in_progress { color: #9a6700; } .canceled, .none { color: #57606a; }
.decisions, .entries { margin: .2rem 0 0; padding-left: 1.1rem; }
.decisions li, .entries li { margin: .1rem 0; }
.reason { white-space: pre-wrap; }
.redacted { color: #57606a; font-style: italic; }
.note { border-left: 3px solid #9a6700; padding: .3rem .7rem; background: #fff8c5; }
footer { margin-top: 2rem; color: #57606a; font-size: .9em; }
@page { size: A4; margin: 14mm 12mm; }
@media print {
  body { margin: 0; max-width: none; padding: 0; font-size: 9.5pt; }
  h2 { break-after: avoid; }
  tr, li { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
`;

/** The register as one HTML document. */
export function renderRegister(input: RegisterInput): string {
  const changes = registerChanges(input.runs);
  const decisionsOf = new Map<string, RegisterInput['decisions']>();
  for (const d of input.decisions) decisionsOf.set(d.run_id, [...(decisionsOf.get(d.run_id) ?? []), d]);
  const entriesOf = new Map<string, RegisterInput['entries']>();
  for (const e of input.entries) entriesOf.set(e.run_id, [...(entriesOf.get(e.run_id) ?? []), e]);
  const period = `${input.period.from.toISOString()} to ${input.period.to.toISOString()}`;
  const anchorOf = (change: RegisterChange, i: number) => `change-${i + 1}`;
  const labelHtml = (label: string | null) => (label === null ? '<em>Runs without a change label</em>' : `<code>${esc(label)}</code>`);

  const out: string[] = [];
  out.push('<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">', '<meta name="viewport" content="width=device-width, initial-scale=1">');
  out.push(`<title>Change register, ${esc(period)}</title>`, `<style>${STYLE}</style>`, '</head>', '<body>');
  out.push('<header>', '<h1>Change register</h1>', `<p class="lead">Every run created from ${time(input.period.from)} up to ${time(input.period.to)}${input.period.defaulted ? ` (the last ${REGISTER_DEFAULT_DAYS} days)` : ''}, grouped by change label, with its decisions, outcome and the audit chain positions that record them.</p>`);
  out.push('<dl class="meta">');
  out.push(`<dt>Install</dt><dd><code>${esc(input.install_id)}</code></dd>`);
  out.push(`<dt>Generated</dt><dd>${time(input.generated_at)} by <code>${esc(input.generated_by)}</code></dd>`);
  out.push(`<dt>Audit chain</dt><dd>${input.chain_head.seq} entries when generated; head hash <code>${esc(input.chain_head.hash)}</code></dd>`);
  out.push(`<dt>Changes</dt><dd>${changes.filter((c) => c.label !== null).length} labelled, ${input.runs.length} runs, ${input.decisions.length} decision records</dd>`);
  out.push('</dl>');
  if (input.total_runs > input.runs.length) {
    out.push(`<p class="note">The period holds ${input.total_runs} runs; this register lists the first ${input.runs.length}. Ask for a shorter period (<code>from</code> and <code>to</code>) to see the rest.</p>`);
  }
  out.push('</header>');

  out.push('<section>', '<h2>Summary</h2>');
  if (!changes.length) out.push('<p>No run was created in this period.</p>');
  else {
    out.push('<table>', '<thead><tr><th>Change</th><th>Outcome</th><th>Runs</th><th>First run</th><th>Last activity</th><th>Who acted</th></tr></thead>', '<tbody>');
    changes.forEach((c, i) => {
      out.push(`<tr><td><a href="#${anchorOf(c, i)}">${labelHtml(c.label)}</a></td><td><span class="outcome ${c.outcome}">${OUTCOME_WORDS[c.outcome]}</span></td><td>${c.runs.length}</td><td>${time(c.started_at)}</td><td>${time(c.last_activity_at)}</td><td>${c.actors.map((a) => `<code>${esc(a)}</code>`).join(', ')}</td></tr>`);
    });
    out.push('</tbody>', '</table>');
  }
  out.push('</section>');

  changes.forEach((c, i) => {
    out.push(`<section id="${anchorOf(c, i)}">`, `<h2>${labelHtml(c.label)} <span class="outcome ${c.outcome}">${OUTCOME_WORDS[c.outcome]}</span></h2>`);
    out.push(`<p class="lead">${c.runs.length} run${c.runs.length === 1 ? '' : 's'}, ${time(c.started_at)} to ${time(c.last_activity_at)}; by ${c.actors.map((a) => `<code>${esc(a)}</code>`).join(', ')}.</p>`);
    out.push('<table>', '<thead><tr><th>Run</th><th>What</th><th>Requested by</th><th>Created</th><th>Ended</th><th>Outcome</th><th>Decisions and chain entries</th></tr></thead>', '<tbody>');
    for (const run of c.runs) {
      const what = [
        run.template_name ? `template <code>${esc(run.template_name)}</code>` : run.template_id ? `template <code>${esc(run.template_id)}</code> (deleted)` : '',
        run.step_name ? `step <code>${esc(run.step_name)}</code> of <code>${esc(run.parent_run_id ?? '')}</code>` : run.parent_run_id ? `part of <code>${esc(run.parent_run_id)}</code>` : '',
        `${esc(run.kind)}, tool <code>${esc(run.tool)}</code>`,
      ].filter(Boolean).join('<br>');
      const decisions = (decisionsOf.get(run.id) ?? []).map((d) => {
        const who = `<code>${esc(d.actor)}</code>${d.actor_kind === 'agent' ? ' (agent)' : ''}`;
        const reason = d.redacted_at
          ? `<span class="redacted">reason redacted as ${REDACTION_WORDS[d.redaction_category ?? 'other']} by ${esc(d.redacted_by ?? '')} at ${time(d.redacted_at)}${d.redaction_seq !== null ? `, chain #${d.redaction_seq}` : ''}</span>`
          : d.reason
            ? `reason: <span class="reason">${esc(d.reason)}</span>`
            : 'no reason given';
        const commitment = d.commitment ? `; commitment <code>${esc(d.commitment)}</code>` : '';
        return `<li>${DECISION_WORDS[d.kind]}${d.kind === 'correction' && d.decision_id ? ` of <code>${esc(d.decision_id)}</code>` : ''} by ${who} at ${time(d.at)}, chain #${d.seq ?? '?'}: ${reason}${commitment}</li>`;
      });
      const entries = (entriesOf.get(run.id) ?? []).map((e) => `<li>#${e.seq} <code>${esc(e.kind ?? 'entry')}</code> ${time(e.at)} <code class="mono" title="${esc(e.hash)}">${esc(e.hash.slice(0, 16))}…</code></li>`);
      out.push(
        `<tr id="run-${esc(run.id)}"><td><code>${esc(run.id)}</code></td><td>${what}</td><td><code>${esc(run.requested_by)}</code></td><td>${time(run.created_at)}</td><td>${time(run.finished_at)}</td>` +
          `<td><span class="outcome ${run.status === 'succeeded' ? 'succeeded' : run.status === 'failed' || run.status === 'interrupted' || run.status === 'rejected' ? 'failed' : 'none'}">${esc(run.status)}</span>${run.error ? `<br>${esc(run.error)}` : ''}</td>` +
          `<td>${decisions.length ? `<ul class="decisions">${decisions.join('')}</ul>` : ''}${entries.length ? `<ul class="entries">${entries.join('')}</ul>` : '<span class="redacted">no chain entry names this run</span>'}</td></tr>`,
      );
    }
    out.push('</tbody>', '</table>', '</section>');
  });

  out.push(
    '<footer>',
    '<p>Chain positions (#) are the <code>seq</code> of audit chain entries. Check them against the chain with <code>GET /v1/audit/verify</code>, or offline with a signed bundle (<code>GET /v1/audit/bundle</code>) and <code>cairn audit verify --seal seal.json bundle</code> (the seal from <code>/.well-known/seal.json</code>); a decision\'s reason opens its commitment with the random value in the run\'s decision records. A redacted reason is not shown; its commitment stays.</p>',
    '</footer>',
    '</body>',
    '</html>',
  );
  return out.join('\n') + '\n';
}
