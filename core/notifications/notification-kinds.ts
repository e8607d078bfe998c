/**
 * Notification kinds, attachment events and the rules on who hears what (spec part A 2.11, part B
 * 6.1-6.3). Pure: shared by named targets, a template's or run's own entries and the server-wide
 * `--notify-<kind>` channels.
 */
import type { Run, TerminalStatus } from '../runs/run';

export const NOTIFICATION_KINDS = ['webhook', 'chat_a', 'chat_b', 'chat_c', 'chat_d', 'chat_e', 'topic', 'incident', 'annotation', 'sms', 'email'] as const;
export type NotificationKind = (typeof NOTIFICATION_KINDS)[number];

/** The field a kind carries, by name: `url` and `key` are secrets, `to` a recipient list. */
export type NotificationField = 'url' | 'key' | 'to';

/** What each kind requires (spec part A 2.11). */
export const REQUIRED_FIELDS: Record<NotificationKind, readonly NotificationField[]> = {
  webhook: ['url'],
  chat_a: ['url'],
  chat_b: ['url'],
  chat_c: ['url'],
  chat_d: ['url'],
  chat_e: ['url'],
  topic: ['url'],
  incident: ['key'],
  annotation: ['url', 'key'],
  sms: ['to'],
  email: ['to'],
};

/** Which real service each kind speaks to (docs/api.md, Notifications). */
export const COMPATIBLE_WITH: Record<NotificationKind, string> = {
  webhook: 'any HTTPS endpoint taking a JSON POST',
  chat_a: 'Slack incoming webhooks',
  chat_b: 'Mattermost incoming webhooks',
  chat_c: 'Discord webhooks',
  chat_d: 'Microsoft Teams incoming webhooks and Workflows (Adaptive Card message)',
  chat_e: 'Google Chat space webhooks (cardsV2 message)',
  topic: 'ntfy topics (self-hosted or ntfy.sh)',
  incident: 'PagerDuty Events API v2',
  annotation: 'Grafana annotations HTTP API',
  sms: 'Twilio Programmable Messaging (Messages API)',
  email: 'any SMTP server',
};

/** Kinds that never hear a hold, a skip or a workflow approval step (spec part A 2.11 rule 1, part B 6.2 rule 3). */
const DEAF_TO_HOLDS: ReadonlySet<NotificationKind> = new Set(['incident', 'annotation', 'sms']);

export const hearsHolds = (kind: NotificationKind): boolean => !DEAF_TO_HOLDS.has(kind);

/** Attachment events (spec part A 2.11 rule 6) and the external aliases read as two of them. */
export const ATTACHMENT_EVENTS = ['started', 'success', 'failure', 'approval', 'skipped', 'attention'] as const;
export type AttachmentEvent = (typeof ATTACHMENT_EVENTS)[number];
export const EVENT_ALIASES: Record<string, AttachmentEvent> = { error: 'failure', approvals: 'approval' };

/** Objects a target attaches to; a workflow is a template with steps and is stored as one. */
export const OBJECT_KINDS = ['template', 'workflow', 'schedule', 'project', 'org'] as const;
export type ObjectKind = (typeof OBJECT_KINDS)[number];
export type StoredObjectKind = Exclude<ObjectKind, 'workflow'>;

/**
 * The events announced to targets (spec part B 6.1): a run's, and `schedule.skipped`, a schedule's
 * fire that started nothing because its inventory matched no host. `run.needs_attention` is an
 * attention alert (part B 6.6).
 */
export const ANNOUNCED_EVENTS = ['run.started', 'run.finished', 'run.held', 'workflow.step_awaiting_approval', 'run.needs_attention', 'schedule.skipped'] as const;
export type AnnouncedEvent = (typeof ANNOUNCED_EVENTS)[number];

export const isAnnounced = (kind: string): kind is AnnouncedEvent => (ANNOUNCED_EVENTS as readonly string[]).includes(kind);

/** Events that are a hold of some kind (never reach kinds deaf to holds, nor `on_failure` entries). */
export const isHoldEvent = (event: string): boolean => event === 'run.held' || event === 'workflow.step_awaiting_approval';

const FAILURE_STATUSES: ReadonlySet<string> = new Set<TerminalStatus>(['failed', 'interrupted', 'canceled', 'rejected']);

/** The attachment event a run event fires: `run.finished` is success or failure by the run's status. */
export function attachmentEventOf(event: AnnouncedEvent, status: Run['status']): AttachmentEvent {
  switch (event) {
    case 'run.started':
      return 'started';
    case 'run.finished':
      return FAILURE_STATUSES.has(status) ? 'failure' : 'success';
    case 'run.held':
    case 'workflow.step_awaiting_approval':
      return 'approval';
    case 'run.needs_attention':
      return 'attention';
    case 'schedule.skipped':
      return 'skipped';
  }
}

/** An attention alert (spec part B 6.6): heard by targets of every kind attached for `attention`. */
export const isAlertEvent = (event: string): boolean => event === 'run.needs_attention';

/** Whether a run's status counts as a failure for `failure` attachments and `on_failure` entries. */
export const isFailureStatus = (status: string): boolean => FAILURE_STATUSES.has(status);

/**
 * Why a target of this kind does not hear this event, as the delivery records it; undefined when it
 * does. Applied to the target as it stands when the message goes out (spec part B 6.2 rule 3).
 */
export function deafnessOf(kind: NotificationKind, event: string, status: string): string | undefined {
  if (isHoldEvent(event) && !hearsHolds(kind)) return `not sent: an ${kind} target never hears holds or approval steps`;
  if (event === 'schedule.skipped' && !hearsHolds(kind)) return `not sent: an ${kind} target never hears a schedule's skipped fires`;
  if (kind === 'incident' && event === 'run.finished' && status !== 'failed' && status !== 'interrupted') return 'not sent: an incident target hears failed and interrupted runs only';
  if (kind === 'incident' && event === 'run.started') return 'not sent: an incident target hears failed and interrupted runs only';
  return undefined;
}

/** The scheme and host of a URL, as every read shows a secret URL; `[masked]` when it does not parse. */
export function urlHint(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}`;
  } catch {
    return MASK;
  }
}

/** What a read shows in place of a key or token, and what an edit may echo to keep the stored value. */
export const MASK = '[masked]';

/** An edit echoing what a read showed (blank, the mask, or the URL's hint) keeps the stored value. */
export function keepsStored(sent: string | null | undefined, hint: string | null): boolean {
  if (sent === undefined || sent === null || sent.trim() === '') return true;
  return sent === MASK || (hint !== null && sent === hint);
}

/** The sentence carried by the next message after a delivery to the same target for the same run failed (spec part B 6.1). */
export const FAILURE_NOTE = 'An earlier notification about this run to this target could not be delivered.';

/** Attempts made at once to one target (spec part B 6.3 rule 6: at most four per server). */
export const PER_TARGET_CONCURRENCY = 4;

/** Attempts per delivery: the first and four more (spec part B 6.3 rule 7). */
export const DELIVERY_ATTEMPTS = 5;

/**
 * Wait before attempt `attempt + 1` after attempt `attempt` failed: base, 2x, 4x, 8x. With the
 * default base of 12 s the four waits add up to three minutes.
 */
export function retryDelayMs(baseMs: number, attempt: number): number {
  return baseMs * 2 ** (attempt - 1);
}

export const DEFAULT_RETRY_BASE_MS = 12_000;

/** An HTTP answer that must not be tried again: any 4xx but 408, 425 and 429. */
export const isPermanentRefusal = (status: number): boolean => status >= 400 && status < 500 && ![408, 425, 429].includes(status);

/** A template's or run's own entry as stored: its secrets sealed (context `notification-entry:<owner id>`). */
export interface StoredEntry {
  kind: NotificationKind;
  url_sealed?: string;
  url_hint?: string;
  key_sealed?: string;
  to?: string;
  on_failure?: boolean;
}

/** Entries as every read shows them: URLs as their scheme and host, keys and tokens as the mask. */
export function entriesView(entries: readonly unknown[] | null | undefined) {
  return ((entries ?? []) as StoredEntry[]).map((e) => ({
    kind: e.kind,
    ...(e.url_hint ? { url: e.url_hint } : {}),
    ...(e.key_sealed ? { key: MASK } : {}),
    ...(e.to ? { to: e.to } : {}),
    ...(e.on_failure ? { on_failure: true } : {}),
  }));
}
