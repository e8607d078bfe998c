import nodemailer from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import type { Socket } from 'node:net';
import { isPermanentRefusal, type NotificationKind } from '../../core/notifications/notification-kinds';
import { httpMessage, mailMessage, smsText, type Announcement } from '../../core/notifications/notification-messages';
import type { DeliverySettings } from '../../core/notifications/notification-settings';
import { connectChecked, EgressRefused, sendHttp, withPath } from './notification-egress';

/**
 * Sends one announcement to one destination, whichever kind it is: a named target's, a
 * template's or run's own entry, or a server-wide channel. Every kind goes through the same
 * formatters (core/notification-messages.ts) and the same egress check.
 */

/** Where a message goes, secrets opened: a kind's `url`, `key` and recipients. */
export interface Destination {
  kind: NotificationKind;
  url?: string;
  key?: string;
  to?: string;
}

export type SendResult = { ok: true } | { ok: false; retry: boolean; reason: string };

/** How long one attempt may take before it counts as failed. */
export const ATTEMPT_TIMEOUT_MS = 10_000;

const noTransport = (reason: string): SendResult => ({ ok: false, retry: false, reason });

export async function sendAnnouncement(settings: DeliverySettings, destination: Destination, announcement: Announcement, signal?: AbortSignal): Promise<SendResult> {
  try {
    switch (destination.kind) {
      case 'sms':
        return await sendSms(settings, destination.to ?? '', announcement, signal);
      case 'email':
        return await sendMail(settings, destination.to ?? '', announcement);
      case 'incident': {
        const message = httpMessage('incident', announcement, destination.key);
        return answerOf(await sendHttp(settings, new URL(settings.incidentUrl), message, ATTEMPT_TIMEOUT_MS, signal));
      }
      default: {
        const message = httpMessage(destination.kind, announcement, destination.key);
        return answerOf(await sendHttp(settings, withPath(destination.url ?? '', message.path), message, ATTEMPT_TIMEOUT_MS, signal));
      }
    }
  } catch (err) {
    if (err instanceof EgressRefused) return { ok: false, retry: false, reason: err.message };
    return { ok: false, retry: true, reason: (err as Error).message };
  }
}

function answerOf(answer: { status: number; statusText: string }): SendResult {
  if (answer.status >= 200 && answer.status < 300) return { ok: true };
  const reason = `the receiver answered ${answer.status}${answer.statusText ? ` ${answer.statusText}` : ''}`;
  return { ok: false, retry: !isPermanentRefusal(answer.status), reason };
}

/** A text message through the server's SMS account (Twilio Messages API form). */
async function sendSms(settings: DeliverySettings, to: string, announcement: Announcement, signal?: AbortSignal): Promise<SendResult> {
  const { sms } = settings;
  if (!sms.account || !sms.from || !sms.token) {
    return noTransport('no SMS account is configured on this server (--sms-account, --sms-from and CAIRN_SMS_TOKEN)');
  }
  const url = withPath(sms.url, `/2010-04-01/Accounts/${encodeURIComponent(sms.account)}/Messages.json`);
  const body = new URLSearchParams({ To: to, From: sms.from, Body: smsText(announcement) }).toString();
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    authorization: `Basic ${Buffer.from(`${sms.account}:${sms.token}`).toString('base64')}`,
    ...(announcement.delivery ? { 'idempotency-key': announcement.delivery.id } : {}),
  };
  return answerOf(await sendHttp(settings, url, { method: 'POST', headers, body }, ATTEMPT_TIMEOUT_MS, signal));
}

/** Mail through the server's SMTP transport (nodemailer), the connection made through the egress check. */
async function sendMail(settings: DeliverySettings, to: string, announcement: Announcement): Promise<SendResult> {
  const { smtp } = settings;
  if (!smtp.url) return noTransport('no mail transport is configured on this server (--smtp-url)');
  const url = new URL(smtp.url);
  const secure = url.protocol === 'smtps:';
  const port = Number(url.port || (secure ? 465 : 587));
  const transport = nodemailer.createTransport({
    host: url.hostname,
    port,
    secure,
    auth: smtp.user ? { user: smtp.user, pass: smtp.password ?? '' } : undefined,
    connectionTimeout: ATTEMPT_TIMEOUT_MS,
    greetingTimeout: ATTEMPT_TIMEOUT_MS,
    socketTimeout: ATTEMPT_TIMEOUT_MS,
    // The socket is opened by the egress check; nodemailer speaks SMTP (and TLS) over it.
    getSocket: (_options: unknown, callback: (err: Error | null, socket?: { connection: Socket }) => void) => {
      connectChecked(settings, url.hostname, port, false, ATTEMPT_TIMEOUT_MS).then(
        (connection) => callback(null, { connection }),
        (err: Error) => callback(err),
      );
    },
  } as SMTPTransport.Options);
  const { subject, text } = mailMessage(announcement);
  try {
    await transport.sendMail({
      from: smtp.from ?? `cairn@${url.hostname}`,
      to,
      subject,
      text,
      headers: announcement.delivery ? { 'Idempotency-Key': announcement.delivery.id } : {},
    });
    return { ok: true };
  } catch (err) {
    if (err instanceof EgressRefused) return { ok: false, retry: false, reason: err.message };
    const code = (err as { responseCode?: number }).responseCode;
    // A 5xx SMTP reply is permanent (a refused recipient, a refused login); 4xx and lost connections are tried again.
    const permanent = code !== undefined && code >= 500;
    return { ok: false, retry: !permanent, reason: `the mail server refused the message: ${(err as Error).message}` };
  } finally {
    transport.close();
  }
}
