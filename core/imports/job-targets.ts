import { createHash } from 'node:crypto';
import type { PlannedAttachment, PlannedObject, PlannedTarget } from './plan';

/**
 * The notification targets of the job formats (`jobsched`, `ciserver`): a job's mail recipients
 * and webhook addresses as named targets attached to its template (spec part A 2.11 rules 5 and 6).
 * One target per distinct recipient list or address, shared by every job that names it (its
 * external id is `email:<recipients>` or `webhook:<sha256 of the address>`). An email target
 * carries its recipients and is ready; a webhook target is created without its address, which
 * Cairn keeps sealed, and waits for it (`needs_secret`) like any imported target.
 */
export class JobTargets {
  private readonly targets = new Map<string, PlannedTarget>();

  constructor(private readonly source: string) {}

  /** The attachment of a mail target to `recipients` (a comma- or space-separated list), for an event. */
  email(recipients: string, event: PlannedAttachment['event'], at: string): PlannedAttachment | null {
    const list = [...new Set(recipients.split(/[\s,]+/).map((r) => r.trim()).filter(Boolean))].sort();
    if (!list.length) return null;
    const to = list.join(',');
    return this.attach(`email:${to}`, { name: `email ${to.length > 200 ? `${to.slice(0, 199)}…` : to}`, kind: 'email', to, note: null }, event, at);
  }

  /** The attachment of a webhook target for `url`, for an event; its address waits to be set. */
  webhook(url: string, event: PlannedAttachment['event'], at: string): PlannedAttachment {
    const digest = createHash('sha256').update(url).digest('hex');
    let host = 'address';
    try {
      host = new URL(url).host || host;
    } catch {
      // Not a URL: named by its digest alone.
    }
    return this.attach(`webhook:${digest}`, { name: `webhook ${host} (${digest.slice(0, 8)})`, kind: 'webhook', to: null, note: `its address (on ${host}) is not carried: set it with PUT /v1/notifications/{id}, and it waits for it until then` }, event, at);
  }

  private attach(externalId: string, t: { name: string; kind: string; to: string | null; note: string | null }, event: PlannedAttachment['event'], at: string): PlannedAttachment {
    if (!this.targets.has(externalId)) {
      this.targets.set(externalId, {
        kind: 'notification_target',
        external_id: externalId,
        name: t.name,
        source: at,
        draft: { name: t.name, description: `imported from ${this.source}`, kind: t.kind, to: t.to },
        notes: t.note ? [t.note] : [],
      });
    }
    return { target: { kind: 'notification_target', external_id: externalId }, event };
  }

  /** The targets named so far. */
  objects(): PlannedObject[] {
    return [...this.targets.values()];
  }
}
