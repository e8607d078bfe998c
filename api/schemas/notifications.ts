import { z } from 'zod';
import { ATTACHMENT_EVENTS, EVENT_ALIASES, NOTIFICATION_KINDS, OBJECT_KINDS } from '../../core/notifications/notification-kinds';
import { holdsControlCharacters } from '../../core/notifications/http-url';
import { fitsBytes } from './common';

/**
 * Bodies of the notification routes (spec part A 2.11, 4.8) and the `notifications` entries a
 * template or run carries. Which fields a kind requires is checked by services/notifications.ts,
 * after an edit's blank or masked secrets have been merged with the stored ones.
 */

const kind = z.enum(NOTIFICATION_KINDS, { message: `kind must be one of ${NOTIFICATION_KINDS.join(', ')}` });
const optionalText = (field: string, maxBytes: number) =>
  z
    .string({ message: `${field} must be a string` })
    .refine(fitsBytes(maxBytes), `${field} must be at most ${maxBytes} bytes`)
    .nullable()
    .optional();

/**
 * A kind's destination fields: `url` and `key` are secrets, `to` a recipient list. A url holding a
 * control character is malformed (core/http-url.ts) even where it would otherwise keep the stored
 * one; services/notifications.ts checks the rest of a new url.
 */
const destinationFields = {
  kind,
  url: z
    .string({ message: 'url must be a string' })
    .refine(fitsBytes(2048), 'url must be at most 2048 bytes')
    .refine((url) => !holdsControlCharacters(url), 'url must not hold control characters (such as a line break or tab)')
    .nullable()
    .optional(),
  key: optionalText('key', 1024),
  to: optionalText('to', 2048),
};

/** One entry of a template's or run's `notifications` (spec part A 2.11 rules 1-3). */
export const notificationEntry = z.strictObject({
  ...destinationFields,
  on_failure: z.boolean({ message: 'on_failure must be true or false' }).optional(),
});

export const notificationEntries = z.array(notificationEntry, { message: 'notifications must be a list' }).max(20, 'notifications holds at most 20 entries');

export type NotificationEntryInput = z.output<typeof notificationEntry>;

/** `POST` and `PUT /v1/notifications`; a read sent back is accepted (its read-only fields are ignored). */
export const targetInput = z.strictObject({
  name: z.string({ message: 'name is required and must be a string' }).min(1, 'name must not be empty').refine(fitsBytes(255), 'name must be at most 255 bytes'),
  description: optionalText('description', 2000),
  org_id: optionalText('org_id', 512),
  ...destinationFields,
  // The version an edit was made against (a read's `version`): a PUT is refused with 409 when the
  // target is no longer at it. Ignored on create.
  version: z.number({ message: 'version must be a whole number' }).int('version must be a whole number').min(1, 'version must be at least 1').nullable().optional(),
  // Read-only fields of a read, ignored.
  id: z.unknown().optional(),
  key_set: z.unknown().optional(),
  needs_secret: z.unknown().optional(),
  delivery: z.unknown().optional(),
  created_by: z.unknown().optional(),
  created_at: z.unknown().optional(),
  updated_at: z.unknown().optional(),
});

export type TargetInput = z.output<typeof targetInput>;

const eventNames = [...ATTACHMENT_EVENTS, ...Object.keys(EVENT_ALIASES)];

/** `POST /v1/notifications/{id}/attachments`; `error` and `approvals` are read as `failure` and `approval`. */
export const attachmentInput = z.strictObject({
  object_kind: z.enum(OBJECT_KINDS, { message: `object_kind must be one of ${OBJECT_KINDS.join(', ')}` }),
  object_id: z.string({ message: 'object_id is required and must be a string' }).min(1, 'object_id must not be empty').refine(fitsBytes(512), 'object_id must be at most 512 bytes'),
  event: z
    .string({ message: 'event is required and must be a string' })
    .refine((e) => eventNames.includes(e), `event must be one of ${eventNames.join(', ')}`)
    .transform((e) => EVENT_ALIASES[e] ?? (e as (typeof ATTACHMENT_EVENTS)[number])),
});

export const deliveryListQuery = {
  status: z.enum(['pending', 'retrying', 'arrived', 'failed', 'skipped'], { message: 'status must be pending, retrying, arrived, failed or skipped' }).optional(),
};
