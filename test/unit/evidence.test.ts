import { entryOf } from '../../core/audit/audit-chain';
import { decisionView } from '../../core/runs/decision-view';
import { createHash } from 'node:crypto';
import {
  EVIDENCE_VERSION,
  escapeHtml,
  logText,
  renderEvidenceHtml,
  type EvidenceDossier,
} from '../../core/runs/evidence';
import { reasonCommitment } from '../../core/audit/reason-commitment';
import { runView } from '../../core/runs/run-view';
import type { DecisionRecord } from '../../core/runs/decision';
import type { Run } from '../../core/runs/run';

const random = 'a3'.repeat(32);
const decisionId = 'aud_01jq7x2m3n4p5q6r7s8t9v0w1x';
const reason = 'Change window approved by CAB-1142.';

function run(fields: Partial<Run> = {}): Run {
  return {
    id: 'run_01jq7x2m3n4p5q6r7s8t9v0w1x',
    tool: 'bash',
    status: 'succeeded',
    spec: { command: 'echo hello', extra_vars: {} },
    queue: '',
    timeout_seconds: 3600,
    error: null,
    exit_code: 0,
    requested_by: 'alice',
    account_id: 'acc_alice',
    token_id: 'tok_1',
    actor_kind: 'user',
    rerun_of: null,
    idempotency_key: null,
    attempts: 1,
    exec_host: 'worker-1',
    log_bytes: 6,
    created_at: new Date('2026-01-02T03:04:05.000Z'),
    started_at: new Date('2026-01-02T03:04:06.000Z'),
    finished_at: new Date('2026-01-02T03:04:07.000Z'),
    workflow_started_at: null,
    cancel_requested_at: null,
    cancel_requested_by: null,
    ...fields,
  } as Run;
}

function record(fields: Partial<DecisionRecord> = {}): DecisionRecord {
  return {
    id: decisionId,
    run_id: 'run_01jq7x2m3n4p5q6r7s8t9v0w1x',
    kind: 'approve',
    decision_id: null,
    actor: 'admin',
    actor_kind: 'user',
    reason,
    random,
    commitment: reasonCommitment({ event: decisionId, random, reason }),
    at: new Date('2026-01-02T03:04:05.500Z'),
    redacted_at: null,
    redacted_by: null,
    redaction_category: null,
    redaction_entry_id: null,
    ...fields,
  };
}

function dossier(fields: Partial<EvidenceDossier> = {}, runFields: Partial<Run> = {}): EvidenceDossier {
  return {
    version: EVIDENCE_VERSION,
    generated_at: '2026-01-02T04:00:00.000Z',
    install_id: 'ins_01jq7x2m3n4p5q6r7s8t9v0w1x',
    run: runView(run(runFields)),
    hosts: [],
    tasks: [],
    steps: [],
    shards: [],
    log: 'hello\n',
    log_bytes: 6,
    log_truncated: false,
    log_omitted_bytes: 0,
    events: [
      { seq: 1, event: 'run.created', at: '2026-01-02T03:04:05.000Z', run: { status: 'pending' } },
      { seq: 2, event: 'run.finished', at: '2026-01-02T03:04:07.000Z', run: { status: 'succeeded' } },
    ],
    reasons_disclosed: true,
    decisions: [decisionView(record(), true)],
    separation_of_duties: null,
    chain: [
      entryOf({
        seq: 7,
        id: decisionId,
        at: '2026-01-02T03:04:05.500Z',
        actor: 'admin',
        method: 'POST',
        path: '/v1/runs/run_01jq7x2m3n4p5q6r7s8t9v0w1x/approve',
        fingerprint: 'f'.repeat(64),
        outcome: 200,
        body: { kind: 'run.approve', decision_id: decisionId },
        prev_hash: '1'.repeat(64),
        hash: '2'.repeat(64),
      }),
    ],
    ...fields,
  };
}

const sectionIds = (html: string) => [...html.matchAll(/<section id="([a-z]+)"/g)].map((m) => m[1]);

describe('evidence HTML', () => {
  test('is one self-contained document: nothing loaded, no script, inline CSS only', () => {
    const html = renderEvidenceHtml(
      dossier({
        hosts: [{ host: 'web1', status: 'changed', counts: { ok: 3, changed: 1 } }],
        tasks: [{ play: 'site', task: 'install nginx', counts: { ok: 1 }, started_at: null, finished_at: null, duration_ms: 1500 }],
      }),
    );
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true);
    for (const forbidden of ['src=', 'href="http', '<link', '<script', '<img', '<iframe', '<object', '@import', 'url(']) {
      expect(html).not.toContain(forbidden);
    }
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/ on[a-z]+=/i);
    expect(html).toContain('<style>');
    expect(html).toContain(`content="default-src 'none'; style-src 'unsafe-inline'"`);
  });

  test('escapes the command, the log, reasons, event bodies and chain bodies', () => {
    const hostile = '<script>alert("x")</script>';
    const html = renderEvidenceHtml(
      dossier(
        {
          log: `before ${hostile} & <img src=x onerror=alert(1)>\u001b[31mred\u001b[0m\n`,
          events: [{ seq: 1, event: 'run.created', at: '2026-01-02T03:04:05.000Z', note: hostile }],
          decisions: [decisionView(record({ reason: `</pre>${hostile}` }), true)],
          chain: [{ ...dossier().chain[0], body: { note: hostile } }],
          hosts: [{ host: hostile, status: 'ok', counts: { ok: 1 } }],
        },
        { spec: { command: `echo '${hostile}'`, extra_vars: { x: hostile } }, error: hostile, requested_by: hostile },
      ),
    );
    expect(html).not.toContain('<script');
    expect(html).not.toContain('<img');
    expect(html).not.toContain('</pre><script');
    expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    expect(html).toContain('before &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;');
    expect(html).toContain('echo &#39;&lt;script&gt;');
    // Terminal escapes stay visible as control pictures instead of raw control bytes.
    expect(html).toContain('\u241b[31mred\u241b[0m');
    expect(html).not.toMatch(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/);
  });

  test('escapeHtml covers the five markup characters and controls, and renders null as empty', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    expect(escapeHtml('\u0000\t\n\r\u007f')).toBe('\u2400\t\n\r\u2421');
    expect(escapeHtml(null)).toBe('');
    expect(escapeHtml(42)).toBe('42');
  });

  test('holds the summary, log, events, decisions and chain; host and task sections only when there are any', () => {
    const plain = renderEvidenceHtml(dossier());
    expect(sectionIds(plain)).toEqual(['summary', 'log', 'events', 'decisions', 'chain']);
    expect(plain).toContain('<pre class="log">\nhello\n</pre>');
    expect(plain).toContain('run.finished');
    expect(plain).toContain(reason);
    expect(plain).toContain(random);
    expect(plain).toContain(record().commitment!);
    expect(plain).toContain('2'.repeat(64));
    expect(plain).toContain('ins_01jq7x2m3n4p5q6r7s8t9v0w1x');
    expect(plain).toContain('2026-01-02T04:00:00.000Z');

    const ansible = renderEvidenceHtml(
      dossier({
        hosts: [
          { host: 'web1', status: 'changed', counts: { ok: 3, changed: 1 } },
          { host: 'db1', status: 'unreachable', counts: { unreachable: 1 } },
        ],
        tasks: [{ play: 'site', task: 'install nginx', counts: { ok: 1, changed: 1 }, started_at: null, finished_at: null, duration_ms: 1500 }],
      }),
    );
    expect(sectionIds(ansible)).toEqual(['summary', 'hosts', 'tasks', 'log', 'events', 'decisions', 'chain']);
    expect(ansible).toContain('<th>ok</th><th>changed</th><th>unreachable</th>');
    expect(ansible).toContain('install nginx');
    expect(ansible).toContain('1.5 s');
  });

  test('a log that starts with a newline keeps it (HTML drops the one right after <pre>)', () => {
    expect(renderEvidenceHtml(dossier({ log: '\nfirst\n' }))).toContain('<pre class="log">\n\nfirst\n</pre>');
  });

  test('says when the log was cut, and when there was none', () => {
    const cut = renderEvidenceHtml(dossier({ log: 'tail\n', log_bytes: 5 * 1024 * 1024, log_truncated: true, log_omitted_bytes: 5 * 1024 * 1024 - 5 }));
    expect(cut).toContain('class="warn"');
    expect(cut).toContain(`The first ${5 * 1024 * 1024 - 5} bytes are left out`);
    expect(renderEvidenceHtml(dossier())).not.toContain('class="warn"');
    const empty = renderEvidenceHtml(dossier({ log: '', log_bytes: 0 }));
    expect(empty).toContain('No output was captured.');
    expect(empty).not.toContain('<pre class="log">');
  });

  test('a withheld decision shows its commitment but no reason or random value', () => {
    const html = renderEvidenceHtml(dossier({ reasons_disclosed: false, decisions: [decisionView(record(), false)] }));
    expect(html).not.toContain(reason);
    expect(html).not.toContain(random);
    expect(html).toContain(record().commitment!);
    expect(html).toContain('withheld');
    expect(html).toContain('Reasons and random values are withheld');
  });

  test('explains how a commitment is opened, and the recipe opens the commitment it shows', () => {
    const html = renderEvidenceHtml(dossier());
    expect(html).toContain('RFC 8785');
    expect(html).toContain('sha256:');
    // The recipe in the document, done by hand: JSON with keys event, random, reason in that order.
    const byHand = `sha256:${createHash('sha256').update(JSON.stringify({ event: decisionId, random, reason })).digest('hex')}`;
    expect(byHand).toBe(record().commitment);
  });

  test('no decisions and no chain entries say so', () => {
    const html = renderEvidenceHtml(dossier({ decisions: [], chain: [] }));
    expect(html).toContain('No decisions were recorded for this run.');
    expect(html).toContain('No audit chain entries name this run.');
  });
});

describe('evidence decisions', () => {
  test('disclosed: reason and random; withheld: null both, keeping the commitment', () => {
    const shown = decisionView(record(), true);
    expect(shown).toMatchObject({ id: decisionId, kind: 'approve', reason, random, withheld: false, redaction: null });
    const hidden = decisionView(record(), false);
    expect(hidden).toMatchObject({ reason: null, random: null, withheld: true, commitment: record().commitment });
  });

  test('a redaction is named with who, when and the category', () => {
    const redacted = record({
      reason: null,
      random: null,
      redacted_at: new Date('2026-01-03T00:00:00.000Z'),
      redacted_by: 'root',
      redaction_category: 'personal_data',
      redaction_entry_id: 'aud_r',
    });
    const view = decisionView(redacted, true);
    expect(view.redaction).toEqual({ at: '2026-01-03T00:00:00.000Z', by: 'root', category: 'personal_data', entry_id: 'aud_r' });
    expect(renderEvidenceHtml(dossier({ decisions: [view] }))).toContain('redacted (personal_data) by root');
  });
});

describe('evidence log text', () => {
  test('a cut inside a UTF-8 character starts at the next whole character', () => {
    const bytes = Buffer.from('é€x', 'utf8'); // c3 a9 | e2 82 ac | 78
    expect(logText(bytes, 0)).toEqual({ text: 'é€x', from: 0 });
    expect(logText(bytes.subarray(1), 101)).toEqual({ text: '€x', from: 102 });
    expect(logText(bytes.subarray(3), 103)).toEqual({ text: 'x', from: 105 });
    // Bytes that are not UTF-8 at all read as U+FFFD rather than failing.
    expect(logText(Buffer.from([0x41, 0xff, 0x42]), 0).text).toBe('A\uFFFDB');
  });
});

test("a parent's steps or shards get their own section, escaped, and none when there are none", () => {
  const plain = renderEvidenceHtml(dossier());
  expect(plain).not.toContain('id="steps"');
  expect(plain).not.toContain('id="shards"');
  const step = runView(run({ id: 'run_step1', kind: 'step', step_name: '<b>build</b>', status: 'failed', error: 'exited with code 2' }));
  const html = renderEvidenceHtml(dossier({ steps: [step] }));
  expect(html).toContain('<section id="steps"><h2>Steps</h2>');
  expect(html).toContain('&lt;b&gt;build&lt;/b&gt;');
  expect(html).toContain('exited with code 2');
  expect(renderEvidenceHtml(dossier({ shards: [step] }))).toContain('<section id="shards"><h2>Shards</h2>');
});
