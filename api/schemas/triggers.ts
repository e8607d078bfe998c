import { z } from 'zod';
import { fitsBytes } from './common';
import { httpUrlFault } from '../../core/notifications/http-url';
import { REVIEW_FORGES } from '../../core/schedules/review';

/**
 * The bodies of `/v1/triggers` (spec part A 4.7). A `PUT` changes what it names: an omitted (or
 * null) `name` or `enforce_signature` keeps the trigger's; a read sent back is a valid `PUT` body, its
 * read-only fields accepted and ignored, but its `template_id` cannot change. `review` makes a pull
 * request review trigger (core/schedules/review.ts): the forge, its API base and an API token.
 */

const name = z
  .string({ error: (issue) => (issue.input === undefined ? 'name is required' : 'name must be a string') })
  .min(1, 'name must not be empty')
  .refine(fitsBytes(255), 'name must be at most 255 bytes');

const templateId = z
  .string({ error: (issue) => (issue.input === undefined ? 'template_id is required' : 'template_id must be a string') })
  .min(1, 'template_id must not be empty')
  .refine(fitsBytes(512), 'template_id must be at most 512 bytes');

const enforceSignature = z.boolean({ message: 'enforce_signature must be true or false' }).nullable().optional();

/**
 * A signing secret of the caller's own, as the forges take one: printable text (spaces and any
 * Unicode letters included; no control characters, line or paragraph separators, or lone
 * surrogates), with no space at either end (GitLab sends it as a header, whose ends HTTP trims),
 * 16 characters to 255 bytes of UTF-8.
 */
const secret = z
  .string({ message: 'secret must be a string' })
  .regex(/^[^\p{Cc}\p{Cs}\p{Zl}\p{Zp}]*$/u, 'secret must be printable text: no control characters or line breaks')
  .refine((value) => value.trim() === value, 'secret must not start or end with a space')
  .refine((value) => [...value].length >= 16, 'secret must be at least 16 characters')
  .refine(fitsBytes(255), 'secret must be at most 255 bytes')
  .optional();

/** A pull request review trigger's settings; `token` (the forge API token Cairn reports with) is write-only. */
const review = z
  .strictObject({
    forge: z.enum(REVIEW_FORGES, { message: `review.forge must be one of ${REVIEW_FORGES.join(', ')}` }),
    api_url: z
      .string({ message: 'review.api_url must be a string' })
      .refine(fitsBytes(2048), 'review.api_url must be at most 2048 bytes')
      .superRefine((value, ctx) => {
        const fault = httpUrlFault(value);
        if (fault) ctx.addIssue({ code: 'custom', message: `review.api_url ${fault}` });
      })
      .nullable()
      .optional(),
    token: z
      .string({ message: 'review.token must be a string' })
      .min(1, 'review.token must not be empty')
      .refine(fitsBytes(1024), 'review.token must be at most 1024 bytes')
      .regex(/^[\x21-\x7e]+$/, 'review.token must be printable ASCII without spaces')
      .optional(),
  }, { message: 'review must be an object with forge, api_url and token' })
  .nullable()
  .optional();

export const triggerCreateInput = z.strictObject({
  name,
  template_id: templateId,
  enforce_signature: enforceSignature,
  secret,
  review,
});

export const triggerUpdateInput = z.strictObject({
  name: name.nullable().optional(),
  enforce_signature: enforceSignature,
  template_id: templateId.optional(),
  review,
  // Read-only fields of a read, ignored (`id` is checked against the path by the route).
  id: z.unknown().optional(),
  kind: z.unknown().optional(),
  created_by: z.unknown().optional(),
  created_at: z.unknown().optional(),
  updated_at: z.unknown().optional(),
  secret_rotated_at: z.unknown().optional(),
  last_error: z.unknown().optional(),
  last_error_at: z.unknown().optional(),
  last_delivery_at: z.unknown().optional(),
});

export const rotateSecretInput = z.strictObject({ secret });
