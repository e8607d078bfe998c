import { z } from 'zod';

/** `GET /auth/oidc/login`: `mode=console` (the default) lands the browser in the console signed in; `mode=token` answers the token as JSON. */
export const oidcLoginQuery = z.strictObject({
  mode: z.enum(['console', 'token'], { message: 'mode must be console or token' }).optional(),
});

const param = (name: string) => z.string({ message: `${name} must be a single value` }).max(4096, `${name} must be at most 4096 characters`).optional();

/**
 * `GET /auth/oidc/callback`: the provider's authorization response. Other parameters a provider
 * adds (`session_state`, `scope`, `error_description`, …) are ignored, not refused.
 */
export const oidcCallbackQuery = z.object({
  code: param('code'),
  state: param('state'),
  iss: param('iss'),
  error: param('error'),
});
