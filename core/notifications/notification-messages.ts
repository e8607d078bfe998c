/**
 * What each kind of channel is sent for an announced event (spec part A 2.11, part B 6.1), shaped
 * like the real service the kind stands for (COMPATIBLE_WITH in notification-kinds.ts). Pure: the
 * request to make (method, headers, body) or the mail or text to send; the transport and the
 * address check are services/notification-egress.ts and services/notification-senders.ts.
 */
import { isFailureStatus, isHoldEvent, type AnnouncedEvent, type NotificationKind } from './notification-kinds';

/**
 * The run as an event body carries it (a run view preview); only the fields read here are named.
 * A skipped fire's body is run-shaped (SkippedFireRun) and has no `id`: no run was started.
 */
export interface AnnouncedRun {
  id?: string;
  kind: string;
  tool: string;
  status: string;
  error: string | null;
  requested_by: string;
  template_id: string | null;
  extra_vars: Record<string, unknown> | null;
  [field: string]: unknown;
}

/**
 * A schedule's fire that started nothing because its inventory matched no host, as its event
 * (`schedule.skipped`, spec part B 6.1) carries it: run-shaped, naming the schedule as `source_id`
 * (and as `source`, as a run names it) and the inventory as `inventory_id`, with kind
 * `skipped_fire`, status `skipped`, why in `reason`, and no `id`.
 */
export interface SkippedFireRun extends AnnouncedRun {
  kind: 'skipped_fire';
  status: 'skipped';
  error: null;
  extra_vars: null;
  reason: string;
  source: { kind: 'schedule'; id: string };
  source_id: string;
  schedule_name: string;
  inventory_id: string;
  limit: string;
  /** The fire's nominal time (RFC 3339). */
  fire_at: string;
}

/** What a skipped fire is announced with: the schedule, what it fires and why it started nothing. */
export interface SkippedFire {
  scheduleId: string;
  scheduleName: string;
  /** The account the schedule fires as, and whether it saved it through an agent token. */
  requestedBy: string;
  actorKind: string;
  templateId: string | null;
  tool: string;
  inventoryId: string;
  limit: string | null | undefined;
  reason: string;
  fireAt: Date;
}

/** A skipped fire's identity, its schedule and the time it fires at: the subject of its notification event. */
export const skippedFireId = (scheduleId: string, fireAt: Date | string) => `${scheduleId}@${new Date(fireAt).toISOString()}`;

/** The body a `schedule.skipped` event is recorded with, as a run event's is `{run: <its preview>}`. */
export function skippedFireBody(fire: SkippedFire): { run: SkippedFireRun } {
  return {
    run: {
      kind: 'skipped_fire',
      tool: fire.tool,
      status: 'skipped',
      error: null,
      reason: fire.reason,
      requested_by: fire.requestedBy,
      actor_kind: fire.actorKind,
      source: { kind: 'schedule', id: fire.scheduleId },
      source_id: fire.scheduleId,
      schedule_name: fire.scheduleName,
      template_id: fire.templateId,
      inventory_id: fire.inventoryId,
      limit: fire.limit ?? '',
      extra_vars: null,
      fire_at: fire.fireAt.toISOString(),
    },
  };
}

/** What an announcement is about, as an id: the run's, or a skipped fire's. */
const subjectOf = (a: Announcement): string => {
  if (a.event !== 'schedule.skipped') return a.run.id ?? '?';
  const fire = a.run as SkippedFireRun;
  return skippedFireId(fire.source_id, fire.fire_at);
};

/** The step a workflow waits at (`workflow.step_awaiting_approval`). */
export interface AwaitingStep {
  id: string;
  name: string;
  description: string | null;
  on_approve: string[];
  on_deny: string[];
  expires_at: string | null;
}

/** An attention alert (`run.needs_attention`, spec part B 6.1, 6.6). */
export interface AttentionAlertBody {
  /** The alert's id: an incident's dedup key, so one condition opens one incident. */
  id: string;
  blocker: string;
  summary: string;
  reason: string;
  who_can_act: string;
  next: string;
  since: string;
  waiting_seconds: number;
  threshold_seconds: number;
  /** The interface path that lists it. */
  path: string;
  schedule_id?: string;
  schedule_name?: string;
  [field: string]: unknown;
}

/** One announced event: what every channel is told, in JSON or in words. */
export interface Announcement {
  event: AnnouncedEvent;
  run: AnnouncedRun;
  awaiting_step?: AwaitingStep;
  /** A held run's hold: why it is held. */
  hold?: { policies?: string[]; agent_hold?: boolean } | null;
  /** An attention alert's details. */
  attention?: AttentionAlertBody;
  /** For a named target: the delivery's id and sequence, and the note after an earlier failure. */
  delivery?: { id: string; sequence: number; note?: string };
  /** The time the event happened (RFC 3339). */
  at: string;
}

/** An HTTP request to send. */
export interface HttpMessage {
  method: 'POST';
  /** Path and query appended to the destination URL (`/api/annotations`); empty for the URL itself. */
  path: string;
  headers: Record<string, string>;
  body: string;
}

export const REDACTED = '[redacted]';

/** Extra vars leave the server by name only (spec part A 2.11: "extra vars redacted"). */
export function redactExtraVars(run: AnnouncedRun): AnnouncedRun {
  const vars = run.extra_vars;
  return { ...run, extra_vars: vars === null ? null : Object.fromEntries(Object.keys(vars).map((k) => [k, REDACTED])) };
}

/** One line saying what happened, leading every message in words. */
export function headline(a: Announcement): string {
  const run = a.run;
  const what = run.kind === 'run' ? 'Run' : capitalized(run.kind);
  switch (a.event) {
    case 'run.started':
      return `${what} ${run.id} started (${run.tool}, asked for by ${run.requested_by})`;
    case 'run.finished':
      return `${what} ${run.id} ${run.status}${run.error ? `: ${run.error}` : ''}`;
    case 'run.held':
      return `${what} ${run.id} is held for approval (asked for by ${run.requested_by})`;
    case 'workflow.step_awaiting_approval':
      return `Workflow ${run.id} waits at approval step ${a.awaiting_step?.name ?? '?'}`;
    case 'run.needs_attention':
      return a.attention?.summary ?? `${what} ${run.id} needs attention`;
    case 'schedule.skipped': {
      // A skip reads as no hosts matched, never as a failure (spec part B 6.1).
      const fire = run as SkippedFireRun;
      return `Schedule ${fire.schedule_name} skipped its fire at ${fire.fire_at}: no hosts matched`;
    }
  }
}

const capitalized = (word: string) => word.charAt(0).toUpperCase() + word.slice(1);

/** The message in words: the headline, then what a person needs to act on it, one line each. */
export function messageLines(a: Announcement): string[] {
  const run = a.run;
  const lines = [headline(a)];
  if (a.event === 'workflow.step_awaiting_approval' && a.awaiting_step) {
    const step = a.awaiting_step;
    lines.push(`It asks: ${step.description || `approve step ${step.name}`}`);
    lines.push(`Approving runs: ${step.on_approve.length ? step.on_approve.join(', ') : 'nothing further'}`);
    lines.push(`Denying runs: ${step.on_deny.length ? step.on_deny.join(', ') : 'nothing further'}`);
    if (step.expires_at) lines.push(`Denied by timeout at ${step.expires_at} without a decision`);
    lines.push(`Decide: POST /v1/runs/${step.id}/approve or POST /v1/runs/${step.id}/reject`);
  } else if (a.event === 'run.needs_attention' && a.attention) {
    // An alert leads with its summary and who can act (spec part B 6.1).
    const alert = a.attention;
    lines.push(`Who can act: ${alert.who_can_act}`);
    lines.push(`Why: ${alert.reason}`);
    lines.push(`Next: ${alert.next}`);
    if (alert.schedule_name) lines.push(`Schedule held back: ${alert.schedule_name} (${alert.schedule_id})`);
    lines.push(`Waiting since ${alert.since} (${alert.waiting_seconds} s; alerts after ${alert.threshold_seconds} s)`);
    lines.push(`Listed at: GET ${alert.path}`);
  } else if (a.event === 'schedule.skipped') {
    const fire = run as SkippedFireRun;
    lines.push(`Why: ${fire.reason}`);
    lines.push(`Nothing was started: ${fire.tool}${fire.template_id ? `, template ${fire.template_id}` : ''}, inventory ${fire.inventory_id}, fires as ${fire.requested_by}`);
    lines.push(`Details: GET /v1/schedules/${fire.source_id}`);
    if (a.delivery?.note) lines.push(a.delivery.note);
    return lines;
  } else if (a.event === 'run.held') {
    const why = a.hold?.agent_hold ? 'an agent asked for it' : a.hold?.policies?.length ? `policies ${a.hold.policies.join(', ')}` : 'a policy';
    lines.push(`Held because: ${why}`);
    lines.push(`Decide: POST /v1/runs/${run.id}/approve or POST /v1/runs/${run.id}/reject`);
  } else {
    lines.push(`Tool: ${run.tool}${run.template_id ? `, template ${run.template_id}` : ''}, asked for by ${run.requested_by}`);
  }
  lines.push(`Details: GET /v1/runs/${run.id}`);
  if (a.delivery?.note) lines.push(a.delivery.note);
  return lines;
}

const json = (value: unknown) => JSON.stringify(value);
const JSON_HEADERS = { 'content-type': 'application/json' };

/** A failure or a hold is the kind of news that raises a topic's priority and colours a card. */
const isBadNews = (a: Announcement) => (a.event === 'run.finished' && isFailureStatus(a.run.status)) || a.event === 'run.needs_attention';

/** The webhook body: `event`, `run` (extra vars redacted) and, for a named target, `delivery`. */
export function webhookBody(a: Announcement): Record<string, unknown> {
  return {
    event: a.event,
    run: redactExtraVars(a.run),
    ...(a.awaiting_step ? { awaiting_step: a.awaiting_step } : {}),
    ...(a.attention ? { attention: a.attention } : {}),
    ...(a.delivery ? { delivery: a.delivery } : {}),
    at: a.at,
  };
}

/**
 * The request a URL-addressed kind sends. `key` is the kind's token (annotation) or routing key
 * (incident); `idempotencyKey` is the delivery id of a named target.
 */
export function httpMessage(kind: Exclude<NotificationKind, 'sms' | 'email'>, a: Announcement, key: string | undefined): HttpMessage {
  const lines = messageLines(a);
  const text = lines.join('\n');
  const title = lines[0];
  const idempotency: Record<string, string> = a.delivery ? { 'idempotency-key': a.delivery.id } : {};
  const post = (body: unknown, headers: Record<string, string> = JSON_HEADERS, path = ''): HttpMessage => ({
    method: 'POST',
    path,
    headers: { ...headers, ...idempotency },
    body: typeof body === 'string' ? body : json(body),
  });
  switch (kind) {
    case 'webhook':
      return post(webhookBody(a));
    case 'chat_a':
      // Slack: `text` is the fallback and notification line; blocks carry the message.
      return post({ text: title, blocks: [{ type: 'section', text: { type: 'mrkdwn', text } }] });
    case 'chat_b':
      return post({ username: 'Cairn', text });
    case 'chat_c':
      // Discord refuses content past 2,000 characters.
      return post({ username: 'Cairn', content: text.length > 2000 ? `${text.slice(0, 1997)}...` : text });
    case 'chat_d':
      return post({
        type: 'message',
        attachments: [
          {
            contentType: 'application/vnd.microsoft.card.adaptive',
            contentUrl: null,
            content: {
              $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
              type: 'AdaptiveCard',
              version: '1.4',
              body: [
                { type: 'TextBlock', text: title, weight: 'Bolder', wrap: true, color: isBadNews(a) ? 'Attention' : 'Default' },
                ...lines.slice(1).map((line) => ({ type: 'TextBlock', text: line, wrap: true })),
              ],
            },
          },
        ],
      });
    case 'chat_e':
      return post({
        text: title,
        cardsV2: [
          {
            cardId: a.delivery?.id ?? `${subjectOf(a)}/${a.event}`,
            card: { header: { title: 'Cairn', subtitle: title }, sections: [{ widgets: lines.slice(1).map((line) => ({ textParagraph: { text: line } })) }] },
          },
        ],
      });
    case 'topic':
      // ntfy: the body is the message; Title, Priority (5 urgent on failure, 4 for a hold, 3 otherwise) and Tags are headers.
      return post(lines.slice(1).join('\n'), {
        'content-type': 'text/plain; charset=utf-8',
        title: asciiHeader(title),
        priority: isBadNews(a) ? '5' : isHoldEvent(a.event) ? '4' : '3',
        tags: isBadNews(a) ? 'rotating_light,cairn' : 'cairn',
      });
    case 'incident':
      // PagerDuty Events v2: one incident per run (the dedup key), so repeats update it rather than open another.
      return post({
        routing_key: key,
        event_action: 'trigger',
        // An alert's id is its own dedup key: one condition opens one incident (spec part B 6.2 rule 4).
        dedup_key: a.attention ? a.attention.id : `cairn/${subjectOf(a)}`,
        payload: {
          summary: title.slice(0, 1024),
          source: 'cairn',
          severity: a.attention || a.run.status === 'interrupted' ? 'warning' : 'error',
          component: a.run.tool,
          group: a.run.template_id ?? undefined,
          class: a.event,
          custom_details: { run_id: a.run.id, status: a.run.status, error: a.run.error, details: lines.slice(1) },
        },
      });
    case 'annotation':
      // Grafana: POST /api/annotations with a service account token.
      return post(
        { time: Date.parse(a.at), tags: ['cairn', a.event, a.run.status, a.run.tool], text },
        { ...JSON_HEADERS, authorization: `Bearer ${key}` },
        '/api/annotations',
      );
  }
}

/** HTTP header values are Latin-1; a headline with other characters is written with `?` in their place. */
const asciiHeader = (text: string) => text.replace(/[^\x20-\x7e]/g, '?');

/** An email: the headline as subject, the lines as text. */
export function mailMessage(a: Announcement): { subject: string; text: string } {
  const lines = messageLines(a);
  return { subject: `[Cairn] ${lines[0]}`, text: `${lines.join('\n')}\n` };
}

/** A text message: the headline and the first line of detail, within one or two SMS segments. */
export function smsText(a: Announcement): string {
  const lines = messageLines(a);
  const text = `Cairn: ${lines[0]}`;
  return text.length > 300 ? `${text.slice(0, 297)}...` : text;
}

/** The announcement an event's stored body makes (a run event's, or a skipped fire's: skippedFireBody). */
export function announcementOf(event: { kind: string; body: Record<string, unknown>; at: Date }, delivery?: Announcement['delivery']): Announcement {
  const body = event.body as { run: AnnouncedRun; awaiting_step?: AwaitingStep; hold?: Announcement['hold']; attention?: AttentionAlertBody };
  return {
    event: event.kind as AnnouncedEvent,
    run: body.run,
    ...(body.awaiting_step ? { awaiting_step: body.awaiting_step } : {}),
    ...(body.hold ? { hold: body.hold } : {}),
    ...(body.attention ? { attention: body.attention } : {}),
    ...(delivery ? { delivery } : {}),
    at: event.at.toISOString(),
  };
}
