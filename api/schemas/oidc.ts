import { z } from 'zod';

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
