import type { DecisionView } from './decision-view';
import type { AuditEntry } from '../audit/audit-chain';
import type { RunView } from './run-view';

/**
 * A run's evidence dossier (spec part A 2.1 rule 3, 2.7 item 4, 4.1): the run, its host and task
 * summaries, its captured log, its structured events, its decision records and the audit chain
 * entries that name it, as one JSON document and as one self-contained, printable HTML page that
 * loads nothing from anywhere. Pure: services/evidence.ts reads the stores and decides what the
 * caller may see; this module shapes and renders.
 */

/** The most log the dossier embeds; a longer log is embedded from its end and the document says so. */
export const EVIDENCE_LOG_CAP = 4 * 1024 * 1024;

/** Version of the dossier's JSON shape; fields are only ever added within a version. */
export const EVIDENCE_VERSION = 1;

/**
 * One host's outcome over the run (an ansible run's play recap, as Cairn's callback plugin
 * reported it). Runs of other tools have none.
 */
export interface EvidenceHostSummary {
  host: string;
  /** The host's verdict: `ok`, `changed`, `failed`, `unreachable` or `skipped`. */
  status: string;
  /** Task results on the host by kind: `ok`, `changed`, `failed`, `unreachable`, `skipped`, `rescued`, `ignored`. */
  counts: Record<string, number>;
}

/** One task's outcome across hosts, in run order (ansible runs; other tools have none). */
export interface EvidenceTaskSummary {
  play: string | null;
  task: string;
  /** Results of the task by kind across its hosts, with the same kinds as a host's counts. */
  counts: Record<string, number>;
  /** Each host's result on the task. */
  hosts?: Record<string, string>;
  started_at: string | null;
  finished_at: string | null;
  duration_ms: number | null;
}

/** An event as `GET /v1/runs/{id}/events` shows it: seq, event, at and the body's fields. */
export interface EvidenceEvent {
  seq: number;
  event: string;
  at: string;
  [field: string]: unknown;
}


/**
 * A decision record. `reason` and `random` open `commitment`; `withheld` says they were left out
 * because the caller may not read them (neither an admin nor the account that asked for the run).
 * A redacted record has neither, for anyone, and names the redaction.
 */

/** A chain entry naming the run, with every hashed field, so a reader can recompute its hash and match it to a receipt. */

/** For a run an agent asked for: whether someone other than the requester decided it (spec part A 2.7 item 4). */
export interface EvidenceSeparationOfDuties {
  requester: string;
  requester_kind: string;
  approver: string | null;
  approver_kind: string | null;
  held_by_agent_hold: boolean;
  /** Null while nobody has decided. */
  satisfied: boolean | null;
}

export interface EvidenceDossier {
  version: typeof EVIDENCE_VERSION;
  generated_at: string;
  install_id: string;
  run: RunView;
  hosts: EvidenceHostSummary[];
  tasks: EvidenceTaskSummary[];
  /** A pipeline's or workflow's step runs, in definition order; empty for other runs. */
  steps: RunView[];
  /** A split's shard runs, in index order; empty for other runs. */
  shards: RunView[];
  /** The captured log as UTF-8 text: all of it, or its last `EVIDENCE_LOG_CAP` bytes or so when `log_truncated`. */
  log: string;
  /** The whole log's size in bytes, embedded or not. */
  log_bytes: number;
  log_truncated: boolean;
  /** Bytes left out from the start of the log; 0 when nothing was. */
  log_omitted_bytes: number;
  events: EvidenceEvent[];
  /** False when decision reasons and random values were withheld from this caller. */
  reasons_disclosed: boolean;
  decisions: DecisionView[];
  /** Present for a run an agent asked for; null otherwise. */
  separation_of_duties: EvidenceSeparationOfDuties | null;
  chain: AuditEntry[];
}


/**
 * The text of the log's bytes from offset `from` on. A cut made inside a UTF-8 character moves
 * forward past its continuation bytes, so the text starts on a whole character; the returned
 * `from` is where it actually starts. Bytes that are not UTF-8 read as U+FFFD.
 */
export function logText(bytes: Buffer, from: number): { text: string; from: number } {
  let skip = 0;
  if (from > 0) while (skip < 3 && skip < bytes.length && (bytes[skip] & 0xc0) === 0x80) skip++;
  return { text: new TextDecoder('utf-8').decode(bytes.subarray(skip)), from: from + skip };
}

// ---------------------------------------------------------------------------------------------
// HTML

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/**
 * Text made safe for HTML element content and quoted attribute values. C0 control characters
 * other than tab, newline and carriage return, and DEL, become their Unicode control pictures
 * (ESC shows as ␛), so terminal escapes in a log stay visible and the document stays valid.
 */
export function escapeHtml(value: unknown): string {
  const text = typeof value === 'string' ? value : value === null || value === undefined ? '' : String(value);
  return text.replace(/[&<>"']|[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, (c) => {
    const escaped = ESCAPES[c];
    if (escaped) return escaped;
    const code = c.charCodeAt(0);
    return code === 0x7f ? '\u2421' : String.fromCharCode(0x2400 + code);
  });
}

const STYLE = `
  :root { color-scheme: light; }
  body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1b1f24; margin: 2rem auto; max-width: 72rem; padding: 0 1.5rem; }
  h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
  h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; padding-bottom: .2rem; border-bottom: 1px solid #d0d7de; }
  p.sub, p.note, footer { color: #57606a; }
  p.note { margin: .4rem 0; }
  p.warn { background: #fff8c5; border: 1px solid #d4a72c; padding: .4rem .6rem; }
  table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
  th, td { border: 1px solid #d0d7de; padding: .3rem .5rem; text-align: left; vertical-align: top; }
  th { background: #f6f8fa; font-weight: 600; }
  table.summary th { width: 12rem; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
  pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; }
  pre.log { background: #f6f8fa; border: 1px solid #d0d7de; padding: .6rem; }
  td .mono, td pre { overflow-wrap: anywhere; }
  .status { font-weight: 600; }
  .status-succeeded { color: #1a7f37; }
  .status-failed, .status-rejected, .status-interrupted { color: #cf222e; }
  .muted { color: #57606a; }
  @media print {
    body { margin: 0; max-width: none; font-size: 11px; }
    h2 { break-after: avoid; }
    tr { break-inside: avoid; }
    pre.log { border: none; padding: 0; background: none; }
  }
`;

/** The canonical order of result kinds in count columns; any others follow, sorted. */
const COUNT_ORDER = ['ok', 'changed', 'failed', 'unreachable', 'skipped', 'rescued', 'ignored'];

function countColumns(rows: { counts: Record<string, number> }[]): string[] {
  const seen = new Set(rows.flatMap((r) => Object.keys(r.counts)));
  return [...COUNT_ORDER.filter((k) => seen.has(k)), ...[...seen].filter((k) => !COUNT_ORDER.includes(k)).sort()];
}

const cell = (value: unknown, cls?: string) => `<td${cls ? ` class="${cls}"` : ''}>${escapeHtml(value)}</td>`;
const codeCell = (value: unknown) => `<td><span class="mono">${escapeHtml(value)}</span></td>`;
const dash = (value: unknown) => (value === null || value === undefined || value === '' ? '—' : value);
const json = (value: unknown) => JSON.stringify(value);
/** Preformatted text. HTML drops a newline right after `<pre>`, so one is written there and the text's own first newline survives. */
const pre = (text: string, cls?: string) => `<pre${cls ? ` class="${cls}"` : ''}>\n${escapeHtml(text)}</pre>`;

function table(headings: string[], rows: string[], cls?: string): string {
  const head = headings.map((h) => `<th>${escapeHtml(h)}</th>`).join('');
  return `<table${cls ? ` class="${cls}"` : ''}><thead><tr>${head}</tr></thead><tbody>\n${rows.map((r) => `<tr>${r}</tr>`).join('\n')}\n</tbody></table>`;
}

function bytesText(n: number): string {
  if (n < 1024) return `${n} bytes`;
  const units = ['KiB', 'MiB', 'GiB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]} (${n} bytes)`;
}

function holdText(hold: NonNullable<RunView['hold']>): string {
  const parts: string[] = [];
  if (hold.policies.length) parts.push(`polic${hold.policies.length > 1 ? 'ies' : 'y'} ${hold.policies.map((p) => `<span class="mono">${escapeHtml(p)}</span>`).join(', ')}`);
  if (hold.agent_hold) parts.push('the built-in hold of agent runs');
  const terms: string[] = [];
  if (hold.require_reason) terms.push('a reason is required');
  if (hold.distinct_approver) terms.push('the requester may not approve');
  return (parts.length ? parts.join('; ') : 'approval') + (terms.length ? ` <span class="muted">(${terms.join('; ')})</span>` : '');
}

function summarySection(d: EvidenceDossier): string {
  const r = d.run;
  const rows: [string, string][] = [
    ['Run', `<span class="mono">${escapeHtml(r.id)}</span>`],
    ['Status', `<span class="status status-${escapeHtml(r.status)}">${escapeHtml(r.status)}</span>`],
    ['Tool', escapeHtml(r.tool)],
    ['Command', pre(r.command)],
    ['Requested by', `${escapeHtml(r.requested_by)} <span class="muted">(${escapeHtml(r.actor_kind)})</span>`],
    ['Exit code', escapeHtml(dash(r.exit_code))],
    ['Error', escapeHtml(dash(r.error))],
    ['Created', escapeHtml(dash(r.created_at))],
    ['Started', escapeHtml(dash(r.started_at))],
    ['Finished', escapeHtml(dash(r.finished_at))],
    ['Queue', r.queue ? escapeHtml(r.queue) : '<span class="muted">default</span>'],
    ['Timeout', `${escapeHtml(r.timeout)} s`],
    ['Attempts', escapeHtml(r.attempts)],
  ];
  if (r.dry_run) rows.push(['Dry run', 'yes']);
  if (r.rerun_of) rows.push(['Rerun of', `<span class="mono">${escapeHtml(r.rerun_of)}</span>`]);
  if (r.hold) rows.push(['Held by', holdText(r.hold)]);
  if (r.state_digest) rows.push(['State digest', `<span class="mono">${escapeHtml(r.state_digest)}</span>`]);
  if (r.extra_vars && Object.keys(r.extra_vars).length > 0) rows.push(['Extra vars', pre(json(r.extra_vars))]);
  rows.push(
    ['Log', escapeHtml(bytesText(d.log_bytes))],
    ['Install', `<span class="mono">${escapeHtml(d.install_id)}</span>`],
    ['Generated', escapeHtml(d.generated_at)],
  );
  return `<section id="summary"><h2>Summary</h2>
<table class="summary"><tbody>
${rows.map(([k, v]) => `<tr><th scope="row">${escapeHtml(k)}</th><td>${v}</td></tr>`).join('\n')}
</tbody></table></section>`;
}

function hostsSection(hosts: EvidenceHostSummary[]): string {
  if (hosts.length === 0) return '';
  const columns = countColumns(hosts);
  const rows = hosts.map((h) => cell(h.host) + cell(h.status) + columns.map((c) => cell(h.counts[c] ?? 0, 'num')).join(''));
  return `<section id="hosts"><h2>Hosts</h2>\n${table(['Host', 'Verdict', ...columns], rows)}</section>`;
}

function tasksSection(tasks: EvidenceTaskSummary[]): string {
  if (tasks.length === 0) return '';
  const columns = countColumns(tasks);
  const rows = tasks.map(
    (t, i) =>
      cell(i + 1, 'num') +
      cell(dash(t.play)) +
      cell(t.task) +
      columns.map((c) => cell(t.counts[c] ?? 0, 'num')).join('') +
      cell(t.duration_ms === null ? '—' : `${(t.duration_ms / 1000).toFixed(1)} s`, 'num'),
  );
  return `<section id="tasks"><h2>Tasks</h2>\n${table(['#', 'Play', 'Task', ...columns, 'Duration'], rows)}</section>`;
}

/** A parent's children: each step or shard with its outcome and times (its own dossier has the rest). */
function childrenSection(id: 'steps' | 'shards', children: RunView[]): string {
  if (children.length === 0) return '';
  const rows = children.map(
    (c) =>
      cell(dash(c.step_name)) +
      `<td class="mono">${escapeHtml(c.id)}</td>` +
      cell(c.kind) +
      `<td><span class="status status-${escapeHtml(c.status)}">${escapeHtml(c.status)}</span></td>` +
      cell(dash(c.error)) +
      cell(dash(c.started_at)) +
      cell(dash(c.finished_at)),
  );
  const title = id === 'steps' ? 'Steps' : 'Shards';
  return `<section id="${id}"><h2>${title}</h2>\n${table([id === 'steps' ? 'Step' : 'Shard', 'Run', 'Kind', 'Status', 'Error', 'Started', 'Finished'], rows)}</section>`;
}

function logSection(d: EvidenceDossier): string {
  const notes: string[] = [];
  if (d.log_truncated) {
    notes.push(
      `<p class="warn">The log is ${escapeHtml(bytesText(d.log_bytes))}; this document holds only its last ` +
        `${escapeHtml(bytesText(d.log_bytes - d.log_omitted_bytes))}. The first ${escapeHtml(d.log_omitted_bytes)} bytes are left out; ` +
        `<span class="mono">GET /v1/runs/${escapeHtml(d.run.id)}/logs</span> returns all of it.</p>`,
    );
  }
  const body = d.log_bytes === 0 ? '<p class="note">No output was captured.</p>' : pre(d.log, 'log');
  return `<section id="log"><h2>Log</h2>
<p class="note">Standard output and standard error in the order written, with secrets masked as stored.</p>
${notes.join('\n')}${body}</section>`;
}

function eventsSection(events: EvidenceEvent[]): string {
  if (events.length === 0) return '<section id="events"><h2>Events</h2><p class="note">No events were recorded.</p></section>';
  const rows = events.map(({ seq, event, at, ...rest }) => {
    const details = Object.keys(rest).length ? `<td>${pre(json(rest))}</td>` : '<td></td>';
    return cell(seq, 'num') + codeCell(event) + cell(at) + details;
  });
  return `<section id="events"><h2>Events</h2>\n${table(['Seq', 'Event', 'At', 'Details'], rows)}</section>`;
}

function decisionReason(dec: DecisionView): string {
  if (dec.redaction) {
    return `<span class="muted">redacted (${escapeHtml(dec.redaction.category)}) by ${escapeHtml(dec.redaction.by)} at ${escapeHtml(dec.redaction.at)}</span>`;
  }
  if (dec.withheld) return '<span class="muted">withheld</span>';
  if (dec.reason === null) return '<span class="muted">none given</span>';
  return pre(dec.reason);
}

function separationText(sod: EvidenceSeparationOfDuties | null): string {
  if (!sod) return '';
  const verdict =
    sod.satisfied === null
      ? 'not decided yet'
      : sod.satisfied
        ? `satisfied: decided by ${escapeHtml(sod.approver)} (${escapeHtml(sod.approver_kind)}), not the requester`
        : `<strong>not satisfied</strong>: decided by ${escapeHtml(sod.approver)} (${escapeHtml(sod.approver_kind)})`;
  return `<p class="note">Separation of duties (requested by the agent ${escapeHtml(sod.requester)}${sod.held_by_agent_hold ? ', held by the built-in agent hold' : ''}): ${verdict}.</p>\n`;
}

function decisionsSection(d: EvidenceDossier): string {
  if (d.decisions.length === 0) {
    return '<section id="decisions"><h2>Decisions</h2><p class="note">No decisions were recorded for this run.</p></section>';
  }
  const rows = d.decisions.map(
    (dec) =>
      codeCell(dec.id) +
      cell(dec.kind) +
      (dec.decision_id ? codeCell(dec.decision_id) : cell('—')) +
      `<td>${escapeHtml(dec.actor)} <span class="muted">(${escapeHtml(dec.actor_kind)})</span></td>` +
      cell(dec.at) +
      `<td>${decisionReason(dec)}</td>` +
      codeCell(dash(dec.random)) +
      codeCell(dash(dec.commitment)),
  );
  const withheld = d.reasons_disclosed
    ? ''
    : '<p class="note">Reasons and random values are withheld: they are shown only to an admin and to the account that asked for the run. The commitments are shown to everyone.</p>\n';
  return `<section id="decisions"><h2>Decisions</h2>
${withheld}${separationText(d.separation_of_duties)}${table(['Id', 'Kind', 'Corrects', 'Actor', 'At', 'Reason', 'Random', 'Commitment'], rows)}
<p class="note">Opening a commitment: it is <span class="mono">sha256:</span> followed by the lowercase hex SHA-256 of the
RFC 8785 canonical JSON of <span class="mono">{"event": &lt;decision id&gt;, "random": &lt;random&gt;, "reason": &lt;reason&gt;}</span>,
that is the UTF-8 bytes of <span class="mono">{"event":"…","random":"…","reason":"…"}</span> with the keys in that order and no
spaces. Recomputing it from the id, random value and reason above and finding the commitment shows the reason is the one the
decision's chain entry committed to. A redacted reason can no longer be opened.</p></section>`;
}

function chainSection(chain: AuditEntry[], runId: string): string {
  if (chain.length === 0) {
    return '<section id="chain"><h2>Audit chain entries</h2><p class="note">No audit chain entries name this run.</p></section>';
  }
  const rows = chain.map(
    (e) =>
      cell(e.seq, 'num') +
      codeCell(e.id) +
      cell(e.at) +
      cell(e.actor) +
      `<td><span class="mono">${escapeHtml(e.method)} ${escapeHtml(e.path)}</span></td>` +
      cell(e.outcome) +
      `<td>${pre(json(e.body))}</td>` +
      codeCell(e.hash),
  );
  return `<section id="chain"><h2>Audit chain entries</h2>
<p class="note">The entries of the install's audit chain that name this run. Each hash is the hex SHA-256 of the RFC 8785
canonical JSON of the entry's other fields (the JSON form of this document carries them all, fingerprint and previous hash
included); match them by sequence number and hash against a receipt from <span class="mono">GET /v1/runs/${escapeHtml(runId)}/receipt</span>.</p>
${table(['Seq', 'Id', 'At', 'Actor', 'Request', 'Outcome', 'Body', 'Hash'], rows)}</section>`;
}

/**
 * The dossier as one self-contained HTML document: inline CSS, no scripts, nothing loaded from
 * anywhere (its own Content-Security-Policy forbids it too). Every value is escaped; the log,
 * command, reasons and event bodies are untrusted text.
 */
export function renderEvidenceHtml(d: EvidenceDossier): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Evidence: run ${escapeHtml(d.run.id)}</title>
<style>${STYLE}</style>
</head>
<body>
<header>
<h1>Run evidence</h1>
<p class="sub"><span class="mono">${escapeHtml(d.run.id)}</span> · ${escapeHtml(d.run.tool)} · <span class="status status-${escapeHtml(d.run.status)}">${escapeHtml(d.run.status)}</span> · install <span class="mono">${escapeHtml(d.install_id)}</span> · generated ${escapeHtml(d.generated_at)}</p>
</header>
${summarySection(d)}
${hostsSection(d.hosts)}
${tasksSection(d.tasks)}
${childrenSection('steps', d.steps)}
${childrenSection('shards', d.shards)}
${logSection(d)}
${eventsSection(d.events)}
${decisionsSection(d)}
${chainSection(d.chain, d.run.id)}
<footer><p>Cairn evidence dossier, version ${EVIDENCE_VERSION}. The same content is available as JSON with <span class="mono">?format=json</span>.</p></footer>
</body>
</html>
`;
}
