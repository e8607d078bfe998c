import { z } from 'zod';
import { fitsBytes } from './common';

/**
 * The bodies of `/v1/triggers` (spec part A 4.7). A `PUT` changes what it names: an omitted (or
 * null) `name` or `enforce_signature` keeps the trigger's; a read sent back is a valid `PUT` body, its
 * read-only fields accepted and ignored, but its `template_id` cannot change. `review` (pull
 * request review triggers) is refused with a 400 saying it is not served yet.
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

const review = z
  .unknown()
  .optional()
  .refine((value) => value === undefined || value === null, 'review is not served yet: pull request review triggers come in a later release; this server makes push triggers');

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
