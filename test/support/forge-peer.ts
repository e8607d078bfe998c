import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A forge's OAuth 2.0 authorization server and current-user API, on loopback: GitHub Enterprise's
 * documented paths (`/login/oauth/authorize`, `/login/oauth/access_token`, `/api/v3/user`), which
 * Gitea and Forgejo share for OAuth (their user API is `/api/v1/user`, also served), and GitLab's
 * (`/oauth/authorize`, `/oauth/token`, `/api/v4/user`). It checks what a forge checks: the client
 * id and secret, the redirect URI, a code used once, and PKCE (S256) when a challenge was given.
 * The person "signed in" at the forge is whoever `signIn` names; the authorize page approves at once.
 * It also serves GitHub's REST commit status and issue comment writes (see `posts`).
 */
export interface ForgeUser {
  id: number;
  login: string;
}

/** A write Cairn made to the forge's REST API: a commit status or an issue comment, as posted. */
export interface ForgePost {
  kind: 'status' | 'comment';
  /** `owner/repo`. */
  repository: string;
  /** The commit (status) or the pull request number (comment). */
  subject: string;
  authorization: string;
  body: Record<string, any>;
}

export interface ForgePeer {
  url: string;
  /**
   * GitHub's REST API (Enterprise's `/api/v3` base): `POST /repos/{owner}/{repo}/statuses/{sha}`
   * and `POST /repos/{owner}/{repo}/issues/{number}/comments`, with the token `apiToken` names
   * (Bearer or `token`). Every write accepted is recorded here, in order.
   */
  posts: ForgePost[];
  /** The API token the REST API accepts; another is answered 401 Bad credentials. */
  apiToken: string;
  /** Answers the next `n` REST writes 502, as a forge having an outage does. */
  failNext(n: number): void;
  /** Resolves once `posts` holds one matching `match` (polled by the caller's clock). */
  waitForPost(match: (post: ForgePost) => boolean, timeoutMs?: number): Promise<ForgePost>;
  /** Who the next authorization approves as. */
  signIn(user: ForgeUser): void;
  /** Access tokens the peer has issued (so a test can look for them where they must not be). */
  issuedTokens: string[];
  stop(): Promise<void>;
}

export async function startForgePeer(client: { id: string; secret: string; redirectUri: string }): Promise<ForgePeer> {
  let current: ForgeUser = { id: 1, login: 'octocat' };
  const codes = new Map<string, { user: ForgeUser; challenge?: string; redirectUri: string }>();
  const tokens = new Map<string, ForgeUser>();
  const issuedTokens: string[] = [];
  const posts: ForgePost[] = [];
  const apiToken = `ghp_${randomBytes(18).toString('hex')}`;
  let failing = 0;

  const readBody = (req: http.IncomingMessage) =>
    new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://peer');
    if (req.method === 'GET' && (url.pathname === '/login/oauth/authorize' || url.pathname === '/oauth/authorize')) {
      const q = url.searchParams;
      if (q.get('client_id') !== client.id || q.get('redirect_uri') !== client.redirectUri || q.get('response_type') !== 'code') {
        res.writeHead(400);
        res.end('bad authorization request');
        return;
      }
      if (q.get('code_challenge') && q.get('code_challenge_method') !== 'S256') {
        res.writeHead(400);
        res.end('only S256');
        return;
      }
      const code = randomBytes(16).toString('hex');
      codes.set(code, { user: current, challenge: q.get('code_challenge') ?? undefined, redirectUri: q.get('redirect_uri')! });
      const back = new URL(client.redirectUri);
      back.searchParams.set('code', code);
      back.searchParams.set('state', q.get('state') ?? '');
      res.writeHead(302, { location: back.toString() });
      res.end();
      return;
    }
    if (req.method === 'POST' && (url.pathname === '/login/oauth/access_token' || url.pathname === '/oauth/token')) {
      const form = new URLSearchParams(await readBody(req));
      const code = form.get('code') ?? '';
      const grant = codes.get(code);
      codes.delete(code);
      if (form.get('client_id') !== client.id || form.get('client_secret') !== client.secret) return json(res, 401, { error: 'invalid_client' });
      if (!grant || form.get('redirect_uri') !== grant.redirectUri) return json(res, 400, { error: 'invalid_grant' });
      if (grant.challenge) {
        const verifier = form.get('code_verifier') ?? '';
        if (createHash('sha256').update(verifier).digest('base64url') !== grant.challenge) return json(res, 400, { error: 'invalid_grant' });
      }
      const token = `gho_${randomBytes(18).toString('hex')}`;
      tokens.set(token, grant.user);
      issuedTokens.push(token);
      return json(res, 200, { access_token: token, token_type: 'bearer', scope: 'read:user' });
    }
    if (req.method === 'GET' && ['/api/v3/user', '/api/v1/user', '/api/v4/user'].includes(url.pathname)) {
      const auth = req.headers.authorization ?? '';
      const user = tokens.get(auth.replace(/^(token|Bearer) /, ''));
      if (!user) return json(res, 401, { message: 'Bad credentials' });
      return json(res, 200, url.pathname === '/api/v4/user' ? { id: user.id, username: user.login } : { id: user.id, login: user.login });
    }
    const rest = req.method === 'POST' ? /^\/api\/v3\/repos\/([^/]+\/[^/]+)\/(statuses\/([0-9a-f]{7,64})|issues\/(\d+)\/comments)$/.exec(url.pathname) : null;
    if (rest) {
      const authorization = req.headers.authorization ?? '';
      const text = await readBody(req);
      if (authorization.replace(/^(token|Bearer) /, '') !== apiToken) return json(res, 401, { message: 'Bad credentials' });
      if (failing > 0) {
        failing--;
        return json(res, 502, { message: 'Server Error' });
      }
      let body: Record<string, any>;
      try {
        body = JSON.parse(text);
      } catch {
        return json(res, 400, { message: 'Problems parsing JSON' });
      }
      if (rest[3]) {
        if (!['error', 'failure', 'pending', 'success'].includes(body.state)) return json(res, 422, { message: 'Validation Failed' });
        posts.push({ kind: 'status', repository: rest[1], subject: rest[3], authorization, body });
        return json(res, 201, { id: posts.length, state: body.state, context: body.context ?? 'default' });
      }
      if (typeof body.body !== 'string' || !body.body) return json(res, 422, { message: 'Validation Failed' });
      posts.push({ kind: 'comment', repository: rest[1], subject: rest[4], authorization, body });
      return json(res, 201, { id: posts.length, body: body.body });
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    signIn: (user) => {
      current = user;
    },
    issuedTokens,
    posts,
    apiToken,
    failNext: (n) => {
      failing = n;
    },
    async waitForPost(match, timeoutMs = 60_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = posts.find(match);
        if (found) return found;
        if (Date.now() > until) throw new Error(`the forge peer saw no such post; it saw ${JSON.stringify(posts.map((p) => [p.kind, p.subject, p.body.state ?? p.body.body]))}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
