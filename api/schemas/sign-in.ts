import { z } from 'zod';

/** `GET /auth/oidc/login` and `GET /auth/saml/login`: `mode=console` (the default) lands the browser in the console signed in; `mode=token` answers the token as JSON. */
export const signInLoginQuery = z.strictObject({
  mode: z.enum(['console', 'token'], { message: 'mode must be console or token' }).optional(),
});

/** `POST /auth/saml/acs`: the form the identity provider has the browser post (HTTP-POST binding). RelayState and other fields are ignored. */
export const samlAcsForm = z.object({
  SAMLResponse: z.string({ message: 'SAMLResponse is required' }).min(1, 'SAMLResponse is required'),
});
