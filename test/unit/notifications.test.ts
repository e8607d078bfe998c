import { ConfigError, loadConfig } from '../../core/config';
import { attachmentEventOf, deafnessOf, entriesView, keepsStored, retryDelayMs, urlHint, DEFAULT_RETRY_BASE_MS, isPermanentRefusal } from '../../core/notifications/notification-kinds';
import { httpMessage, mailMessage, skippedFireBody, skippedFireId, smsText, webhookBody, type Announcement } from '../../core/notifications/notification-messages';
import { EgressRule } from '../../core/notifications/notification-settings';

const run = {
  id: 'run_1',
  kind: 'run',
  tool: 'bash',
  status: 'failed',
  error: 'exited with code 3',
  requested_by: 'ada',
  template_id: 'tpl_1',
  extra_vars: { region: 'eu', password: 'hunter2' },
};
const finished: Announcement = { event: 'run.finished', run, at: '2026-01-01T00:00:00.000Z', delivery: { id: 'ntf_1/run_1/4', sequence: 4 } };

test('the default retry waits add up to about three minutes over four more tries', () => {
  const waits = [1, 2, 3, 4].map((attempt) => retryDelayMs(DEFAULT_RETRY_BASE_MS, attempt));
  expect(waits).toEqual([12_000, 24_000, 48_000, 96_000]);
  expect(waits.reduce((a, b) => a + b)).toBe(180_000);
});

test('only a 4xx other than 408, 425 and 429 is final', () => {
  expect([400, 401, 403, 404, 410, 422].every(isPermanentRefusal)).toBe(true);
  expect([408, 425, 429, 500, 502, 503].some(isPermanentRefusal)).toBe(false);
});

test('who hears what: holds never reach incident, annotation or sms; incidents hear failed and interrupted runs only', () => {
  expect(attachmentEventOf('run.finished', 'canceled')).toBe('failure');
  expect(attachmentEventOf('run.finished', 'succeeded')).toBe('success');
  expect(attachmentEventOf('workflow.step_awaiting_approval', 'running')).toBe('approval');
  for (const kind of ['incident', 'annotation', 'sms'] as const) expect(deafnessOf(kind, 'run.held', 'held')).toContain('never hears holds');
  expect(deafnessOf('webhook', 'run.held', 'held')).toBeUndefined();
  expect(deafnessOf('incident', 'run.finished', 'failed')).toBeUndefined();
  expect(deafnessOf('incident', 'run.finished', 'canceled')).toContain('failed and interrupted runs only');
});

test('reads show a URL as its scheme and host, a key as the mask; echoing either keeps the stored value', () => {
  expect(urlHint('https://hooks.example.test/services/T0/B0/secret?x=1')).toBe('https://hooks.example.test');
  expect(entriesView([{ kind: 'annotation', url_sealed: 'v1.x', url_hint: 'https://g.test', key_sealed: 'v1.y', on_failure: true }])).toEqual([
    { kind: 'annotation', url: 'https://g.test', key: '[masked]', on_failure: true },
  ]);
  for (const echo of [undefined, null, '', '  ', '[masked]', 'https://g.test']) expect(keepsStored(echo, 'https://g.test')).toBe(true);
  expect(keepsStored('https://g.test/other', 'https://g.test')).toBe(false);
});

test('a webhook body carries the event, the run with its extra vars redacted, and the delivery', () => {
  const body = webhookBody(finished);
  expect(body).toEqual({ event: 'run.finished', run: { ...run, extra_vars: { region: '[redacted]', password: '[redacted]' } }, delivery: finished.delivery, at: finished.at });
  const message = httpMessage('webhook', finished, undefined);
  expect(message.headers['idempotency-key']).toBe('ntf_1/run_1/4');
  expect(message.body).not.toContain('hunter2');
});

test('words: a step names its workflow, the step, what it asks and what each answer runs; the note follows a failure', () => {
  const step: Announcement = {
    event: 'workflow.step_awaiting_approval',
    run: { ...run, id: 'run_wf', kind: 'workflow', status: 'running', error: null },
    awaiting_step: { id: 'run_step', name: 'promote', description: 'promote to production?', on_approve: ['deploy'], on_deny: ['rollback'], expires_at: null },
    at: finished.at,
    delivery: { id: 'd', sequence: 7, note: 'An earlier notification about this run to this target could not be delivered.' },
  };
  const { subject, text } = mailMessage(step);
  expect(subject).toBe('[Cairn] Workflow run_wf waits at approval step promote');
  expect(text).toContain('It asks: promote to production?\nApproving runs: deploy\nDenying runs: rollback\nDecide: POST /v1/runs/run_step/approve or POST /v1/runs/run_step/reject');
  expect(text).toContain('An earlier notification about this run to this target could not be delivered.');
  expect(smsText(finished)).toBe('Cairn: Run run_1 failed: exited with code 3');
  expect(JSON.parse(httpMessage('chat_c', { ...finished, run: { ...run, error: 'x'.repeat(5000) } }, undefined).body).content.length).toBe(2000);
});

test('a skipped fire: heard as skipped, never by incident, annotation or sms; run-shaped with no id; read as no hosts matched, not as a failure', () => {
  expect(attachmentEventOf('schedule.skipped', 'pending')).toBe('skipped');
  for (const kind of ['incident', 'annotation', 'sms'] as const) expect(deafnessOf(kind, 'schedule.skipped', 'skipped')).toBe(`not sent: an ${kind} target never hears a schedule's skipped fires`);
  for (const kind of ['webhook', 'chat_a', 'topic', 'email'] as const) expect(deafnessOf(kind, 'schedule.skipped', 'skipped')).toBeUndefined();
  const fireAt = new Date('2026-01-01T09:00:00Z');
  const body = skippedFireBody({
    scheduleId: 'sch_1', scheduleName: 'nightly', requestedBy: 'ada', actorKind: 'user', templateId: 'tpl_1', tool: 'ansible',
    inventoryId: 'inv_1', limit: 'db', reason: 'the limit "db" matches no host of inventory web', fireAt,
  });
  expect(body.run).toMatchObject({ kind: 'skipped_fire', status: 'skipped', error: null, source_id: 'sch_1', source: { kind: 'schedule', id: 'sch_1' }, inventory_id: 'inv_1', fire_at: '2026-01-01T09:00:00.000Z' });
  expect(body.run).not.toHaveProperty('id');
  expect(skippedFireId('sch_1', fireAt)).toBe('sch_1@2026-01-01T09:00:00.000Z');
  const skipped: Announcement = { event: 'schedule.skipped', run: body.run, at: finished.at, delivery: { id: `ntf_1/${skippedFireId('sch_1', fireAt)}/1`, sequence: 1 } };
  expect(webhookBody(skipped)).toEqual({ event: 'schedule.skipped', run: body.run, delivery: skipped.delivery, at: finished.at });
  const { subject, text } = mailMessage(skipped);
  expect(subject).toBe('[Cairn] Schedule nightly skipped its fire at 2026-01-01T09:00:00.000Z: no hosts matched');
  expect(text).toContain('Why: the limit "db" matches no host of inventory web\nNothing was started: ansible, template tpl_1, inventory inv_1, fires as ada\nDetails: GET /v1/schedules/sch_1');
  expect(text.toLowerCase()).not.toContain('fail');
  expect(httpMessage('topic', skipped, undefined).headers.priority).toBe('3');
});

test('the egress rule refuses private, loopback, link-local and mapped addresses, and exempts only what is allowed', () => {
  const strict = new EgressRule([]);
  for (const address of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', 'fe80::1', 'fd00::1', '::ffff:10.0.0.1']) {
    expect(strict.refusal(address)).toBeDefined();
  }
  for (const address of ['93.184.216.34', '2606:4700::1111', '::ffff:93.184.216.34']) expect(strict.refusal(address)).toBeUndefined();
  const allowed = new EgressRule(['10.20.0.0/16', '127.0.0.1']);
  expect(allowed.refusal('10.20.3.4')).toBeUndefined();
  expect(allowed.refusal('127.0.0.1')).toBeUndefined();
  expect(allowed.refusal('10.21.0.1')).toBeDefined();
});

test('server-wide channels come from flags or variables and print redacted; a bad one names its flag', () => {
  const config = loadConfig({ notify_chat_a: 'https://hooks.example.test/T/B/secret', notifyOn: 'failure,approval' }, { CAIRN_SMTP_PASSWORD: 'pw-secret' });
  expect(config.delivery.channels).toEqual([{ kind: 'chat_a', url: 'https://hooks.example.test/T/B/secret' }]);
  expect(config.delivery.notifyOn).toEqual(['failure', 'approval']);
  expect(JSON.stringify(config)).not.toContain('secret');
  expect(config.delivery.secrets()).toEqual(['https://hooks.example.test/T/B/secret', 'pw-secret']);
  expect(() => loadConfig({ notifyOn: 'sometimes' }, {})).toThrow(new ConfigError('--notify-on: "sometimes" is not one of started, success, failure, approval'));
  expect(() => loadConfig({ notify_annotation: 'https://g.test' }, {})).toThrow('--notify-annotation-key');
  expect(() => loadConfig({}, { SERVICE_EGRESS_ALLOW: 'nope' })).toThrow('SERVICE_EGRESS_ALLOW');
});

test('a server-wide channel or service URL holding a line break or other control character is refused, naming its flag', () => {
  expect(() => loadConfig({ notify_chat_a: 'https://hooks.example.test/T/B/x\r\nX-Injected: 1' }, {})).toThrow(
    new ConfigError('--notify-chat-a: must not hold control characters (such as a line break or tab)'),
  );
  expect(() => loadConfig({}, { CAIRN_INCIDENT_URL: 'https://events.example.test/v2/\nenqueue' })).toThrow('--incident-url: must not hold control characters');
  expect(() => loadConfig({}, { CAIRN_SMTP_URL: 'smtp://mail.example.test:25\t' })).toThrow('--smtp-url: must not hold control characters');
});
