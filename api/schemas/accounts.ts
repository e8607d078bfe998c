import { z } from 'zod';
import { holdsControlCharacters, httpUrlFault } from '../../core/notifications/http-url';
import { mixedScripts } from '../../core/access/username';
import { fitsBytes } from './common';

const singleLine = (field: string) =>
  z
    .string({ message: `${field} must be a string` })
    .max(320, `${field} must be at most 320 characters`)
    .refine((v) => !/[\r\n]/.test(v), `${field} must be a single line`);

export const ROLES = ['admin', 'operator', 'viewer'] as const;
export const role = z.enum(ROLES, { message: 'role must be admin, operator or viewer' });

export const username = z
  .string({ message: 'username is required' })
  .min(1, 'username must not be empty')
  .refine((v) => !/[\s\p{C}]/u.test(v), 'username must not hold spaces or control characters')
  .refine(fitsBytes(255), { error: 'username must be at most 255 bytes' });

/**
 * A name for a new account: one script, so that it cannot pass for another account's name by
 * hiding a letter of another script. Names are looked up (sign-in, tokens) without this rule, so
 * accounts named before it keep working.
 */
const newUsername = username.superRefine((value, ctx) => {
  const scripts = mixedScripts(value);
  if (scripts.length) {
    ctx.addIssue({
      code: 'custom',
      message: `username mixes scripts (${scripts.join(', ')}): a username keeps to one script, or to Latin with Han and kana, Han and Bopomofo, or Han and Hangul`,
    });
  }
});

export const password = z.string({ message: 'password must be a string' }).min(8, 'password must be at least 8 characters').max(1024, 'password must be at most 1024 characters');

/** Profile values are personal data: messages name the field and never echo what was sent. */
export const profile = z.strictObject({
  full_name: singleLine('full_name').optional(),
  email: singleLine('email').optional(),
  phone: singleLine('phone').optional(),
  title: singleLine('title').optional(),
  notes: z.string({ message: 'notes must be a string' }).max(2000, 'notes must be at most 2000 characters').optional(),
  links: z
    .array(
      z
        .string({ message: 'each link must be a string' })
        .max(320, 'each link must be at most 320 characters')
        .refine((v) => !holdsControlCharacters(v), 'each link must not hold control characters (such as a line break or tab)')
        .refine((v) => httpUrlFault(v) === undefined, 'each link must be an http or https address'),
      { message: 'links must be a list' },
    )
    .max(8, 'links holds at most 8 addresses')
    .optional(),
});

export const userCreate = z.strictObject({
  username: newUsername,
  role,
  password: password.optional(),
  profile: profile.optional(),
});

export const userUpdate = z.strictObject({
  role: role.optional(),
  password: password.optional(),
  profile: profile.optional(),
  disabled: z.boolean({ message: 'disabled must be true or false' }).optional(),
});

/** A token lives at most ten years: a bound well inside what a stored expiry time can hold. */
const MAX_TOKEN_SECONDS = 10 * 365 * 24 * 3600;

export const tokenCreate = z.strictObject({
  name: z.string({ message: 'name is required' }).min(1, 'name must not be empty').refine(fitsBytes(255), { error: 'name must be at most 255 bytes' }),
  username: username.optional(),
  kind: z.enum(['user', 'agent'], { message: 'kind must be user or agent' }).optional(),
  expires_in: z
    .number({ message: 'expires_in must be a number of seconds' })
    .int('expires_in must be whole seconds')
    .min(60, 'expires_in must be at least 60 seconds')
    .max(MAX_TOKEN_SECONDS, `expires_in must be at most ${MAX_TOKEN_SECONDS} seconds (ten years)`)
    .optional(),
});

export const login = z.strictObject({
  username: z.string({ message: 'username is required' }).min(1, 'username is required'),
  password: z.string({ message: 'password is required' }).min(1, 'password is required'),
  // The web console asks for its session as an HttpOnly cookie instead of a token in the body.
  cookie: z.boolean({ message: 'cookie must be true or false' }).optional(),
});
