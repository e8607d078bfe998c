import net from 'node:net';
import path from 'node:path';
import { startChild, type ChildHandle } from './processes';

/** A free port on 127.0.0.1, for a server whose address another must know before it starts. */
export async function reservePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface TestProvider {
  issuer: string;
  /** The claims the provider releases for these subjects. */
  setClaims(claims: Record<string, Record<string, unknown>>): Promise<void>;
  /** The next ID token the token endpoint answers with carries this fault (test/support/oidc-provider.mjs). */
  tamperNextIdToken(fault: 'expired' | 'other-key' | 'nonce'): Promise<void>;
  stop(): Promise<void>;
}

/** The real OpenID provider (oidc-provider, in its own Node process) with one client registered for `redirectUri`. */
export async function startTestProvider(client: { id: string; secret: string; redirectUri: string }): Promise<TestProvider> {
  const child: ChildHandle = startChild(process.execPath, [path.join(__dirname, 'oidc-provider.mjs')], {
    ...process.env,
    OIDC_CLIENT_ID: client.id,
    OIDC_CLIENT_SECRET: client.secret,
    OIDC_REDIRECT_URI: client.redirectUri,
  });
  const [, issuer] = await child.waitFor(/oidc provider listening at (\S+)/, 30_000);
  const control = async (route: string, body: unknown) => {
    const res = await fetch(`${issuer}${route}`, { method: 'POST', body: JSON.stringify(body) });
    if (res.status !== 204) throw new Error(`${route} answered ${res.status}`);
  };
  return {
    issuer,
    setClaims: (claims) => control('/test/accounts', claims),
    tamperNextIdToken: (fault) => control('/test/next-id-token', { tamper: fault }),
    stop: () => child.stop(),
  };
}

export interface BrowserResponse {
  status: number;
  location: string | undefined;
  headers: Headers;
  text: string;
  body: any;
}

/**
 * A browser as far as sign-in needs one: a cookie jar per host (paths ignored), requests that do
 * not follow redirects by themselves, and the provider's login and consent forms filled in.
 */
export class TestBrowser {
  private readonly jar = new Map<string, Map<string, string>>();

  cookie(url: string, name: string): string | undefined {
    return this.jar.get(new URL(url).host)?.get(name);
  }

  async request(url: string, init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {}): Promise<BrowserResponse> {
    const { host } = new URL(url);
    const cookies = [...(this.jar.get(host) ?? new Map()).entries()].map(([k, v]) => `${k}=${v}`).join('; ');
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (cookies) headers.cookie = cookies;
    let body: string | undefined;
    if (init.form) {
      body = new URLSearchParams(init.form).toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    }
    const res = await fetch(url, { method: init.method ?? 'GET', headers, body, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      const cleared = value === '' || attributes.some((a) => /^max-age=0$/i.test(a) || /^expires=thu, 01 jan 1970/i.test(a));
      const forHost = this.jar.get(host) ?? new Map<string, string>();
      this.jar.set(host, forHost);
      if (cleared) forHost.delete(name);
      else forHost.set(name, value);
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const location = res.headers.get('location');
    return { status: res.status, location: location ? new URL(location, url).href : undefined, headers: res.headers, text, body: parsed };
  }

  /**
   * Goes from `start` through redirects and the provider's forms, signing in as `subject` when the
   * provider asks, until a redirect leads to `stopAt`; that address (the callback with its code and
   * state), not yet requested.
   */
  async travel(start: string, stopAt: string, subject: string): Promise<string> {
    let res = await this.request(start);
    let at = start;
    for (let step = 0; step < 20; step++) {
      if (res.location) {
        if (res.location.startsWith(stopAt)) return res.location;
        at = res.location;
        res = await this.request(at);
        continue;
      }
      const action = /<form[^>]*action="([^"]+)"/.exec(res.text)?.[1];
      const prompt = /name="prompt" value="(\w+)"/.exec(res.text)?.[1];
      if (res.status !== 200 || !action || !prompt) throw new Error(`the sign-in stopped at ${at} with ${res.status}: ${res.text.slice(0, 500)}`);
      const form: Record<string, string> = prompt === 'login' ? { prompt, login: subject, password: 'any password' } : { prompt };
      at = new URL(action, at).href;
      res = await this.request(at, { method: 'POST', form });
    }
    throw new Error(`the sign-in did not come back to ${stopAt} within 20 steps`);
  }
}
