// A real OpenID provider for the sign-in tests: the certified `oidc-provider` package in a process
// of its own (it is ESM-only), listening on 127.0.0.1 on a free port, with one confidential client
// whose redirect URI the test names, PKCE required, and its development login and consent forms
// (any login is accepted as that subject). It prints `oidc provider listening at <issuer>` once it
// serves.
//
// Environment: OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI.
//
// Two test-only routes beside the provider's own:
// - POST /test/accounts {"<sub>": {claims…}}: the claims the provider releases for those subjects
//   (default: preferred_username = sub, an email, no groups);
// - POST /test/next-id-token {"tamper": "expired" | "other-key" | "nonce"}: the next token answer's
//   ID token is re-signed with that fault (expired an hour ago; signed by a key the provider does
//   not publish, under the published key's kid; or a nonce from another sign-in), so a relying
//   party can be shown each forged token exactly as a compromised or confused provider would send it.
import http from 'node:http';
import Provider from 'oidc-provider';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

const { OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_REDIRECT_URI } = process.env;
if (!OIDC_CLIENT_ID || !OIDC_CLIENT_SECRET || !OIDC_REDIRECT_URI) {
  console.error('OIDC_CLIENT_ID, OIDC_CLIENT_SECRET and OIDC_REDIRECT_URI are required');
  process.exit(2);
}

const KID = 'test-signing-key';
const published = await generateKeyPair('RS256', { extractable: true });
const other = await generateKeyPair('RS256', { extractable: true });
const publishedJwk = { ...(await exportJWK(published.privateKey)), kid: KID, alg: 'RS256', use: 'sig' };

/** Claims by subject, as the test sets them. */
const accounts = new Map();
/** The fault the next ID token is sent with, if any. */
let tamper;

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: OIDC_CLIENT_ID,
      client_secret: OIDC_CLIENT_SECRET,
      redirect_uris: [OIDC_REDIRECT_URI],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: { keys: [publishedJwk] },
  cookies: { keys: ['test-provider-cookie-key'] },
  claims: { openid: ['sub'], profile: ['preferred_username', 'name'], email: ['email'], groups: ['groups'] },
  // The claims a scope names go into the ID token too, where a relying party reads them.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: { devInteractions: { enabled: true } },
  ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600 },
  async findAccount(_ctx, sub) {
    return {
      accountId: sub,
      async claims() {
        return { sub, preferred_username: sub, email: `${sub}@example.test`, groups: [], ...(accounts.get(sub) ?? {}) };
      },
    };
  },
});

/** Re-signs the token answer's ID token with the fault asked for. */
async function forged(idToken, fault) {
  const payload = JSON.parse(Buffer.from(idToken.split('.')[1], 'base64url').toString('utf8'));
  let key = published.privateKey;
  if (fault === 'expired') {
    const now = Math.floor(Date.now() / 1000);
    payload.iat = now - 7200;
    payload.exp = now - 3600;
  } else if (fault === 'other-key') {
    key = other.privateKey;
  } else if (fault === 'nonce') {
    payload.nonce = 'a-nonce-from-another-sign-in';
  } else {
    throw new Error(`unknown tamper ${fault}`);
  }
  return new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: KID }).sign(key);
}

provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/token' && ctx.status === 200 && tamper && ctx.body?.id_token) {
    const fault = tamper;
    tamper = undefined;
    ctx.body = { ...ctx.body, id_token: await forged(ctx.body.id_token, fault) };
  }
});

const readJson = (req) =>
  new Promise((resolve, reject) => {
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      try {
        resolve(JSON.parse(text || '{}'));
      } catch (err) {
        reject(err);
      }
    });
  });

const handle = provider.callback();
server.on('request', async (req, res) => {
  if (req.method === 'POST' && (req.url === '/test/accounts' || req.url === '/test/next-id-token')) {
    const body = await readJson(req);
    if (req.url === '/test/accounts') for (const [sub, claims] of Object.entries(body)) accounts.set(sub, claims);
    else tamper = body.tamper;
    res.writeHead(204).end();
    return;
  }
  handle(req, res);
});

console.log(`oidc provider listening at ${issuer}`);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
