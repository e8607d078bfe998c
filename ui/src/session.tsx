// Who is signed in. Sign-in asks the server for a cookie session: the token stays in an HttpOnly
// cookie the page's script never reads, so nothing secret is kept in storage or the DOM.
import { Button, Paper, Stack, Text, TextInput, Title } from '@mantine/core';
import { createContext, useCallback, useContext, useEffect, useState, type FormEvent, type ReactNode } from 'react';
import { ApiError, get, onSignedOut, post } from './api';
import { ErrorNote, Loading } from './ui';

export interface Me {
  id: string;
  username: string;
  role: 'admin' | 'operator' | 'viewer';
  kind: 'user' | 'agent';
}

interface Session {
  me: Me;
  signOut: () => Promise<void>;
}

const SessionContext = createContext<Session | undefined>(undefined);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in console');
  return session;
}

const RANK = { viewer: 0, operator: 1, admin: 2 } as const;

/** Whether the signed-in account's role reaches `role` (the server checks again on every call). */
export function useHasRole(role: keyof typeof RANK): boolean {
  return RANK[useSession().me.role] >= RANK[role];
}

export function SessionProvider({ children }: { children: ReactNode }) {
  const [me, setMe] = useState<Me | null>();
  const [expired, setExpired] = useState(false);
  const [problem, setProblem] = useState<unknown>();

  const load = useCallback(async () => {
    try {
      setMe(await get<Me>('/v1/auth/me'));
      setProblem(undefined);
    } catch (err) {
      // Not signed in (401), or the server did not answer: either way, the sign-in page, saying so.
      if (!(err instanceof ApiError && err.status === 401)) setProblem(err);
      setMe(null);
    }
  }, []);

  useEffect(() => {
    void load();
    return onSignedOut(() => {
      setMe((current) => {
        if (current) setExpired(true);
        return null;
      });
    });
  }, [load]);

  const signOut = useCallback(async () => {
    try {
      await post('/v1/auth/logout');
    } finally {
      setExpired(false);
      setMe(null);
    }
  }, []);

  if (me === undefined) return <main className="center-page"><Loading label="Opening the console" /></main>;
  if (me === null) {
    return (
      <SignIn
        expired={expired}
        problem={problem}
        onSignedIn={async () => {
          setExpired(false);
          await load();
        }}
      />
    );
  }
  return <SessionContext.Provider value={{ me, signOut }}>{children}</SessionContext.Provider>;
}

/** Where the server's OpenID Connect or SAML sign-in starts, when it offers one (GET /auth/oidc, GET /auth/saml). */
function useProviderLogin(protocol: 'oidc' | 'saml'): string | undefined {
  const [loginUrl, setLoginUrl] = useState<string>();
  useEffect(() => {
    get<{ enabled: boolean; login_url?: string }>(`/auth/${protocol}`)
      .then((answer) => setLoginUrl(answer.enabled ? answer.login_url : undefined))
      .catch(() => setLoginUrl(undefined));
  }, [protocol]);
  return loginUrl;
}

function SignIn({ onSignedIn, expired, problem }: { onSignedIn: () => Promise<void>; expired: boolean; problem: unknown }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const oidcLogin = useProviderLogin('oidc');
  const samlLogin = useProviderLogin('saml');

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      await post('/v1/auth/login', { username, password, cookie: true });
      setPassword('');
      await onSignedIn();
    } catch (err) {
      setPassword('');
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="center-page">
      <Paper withBorder shadow="sm" p="xl" className="sign-in" component="section" aria-labelledby="sign-in-title">
        <form onSubmit={submit}>
          <Stack>
            <div className="brand-large">
              <Title order={1} id="sign-in-title">Sign in to Cairn</Title>
            </div>
            {expired && <Text role="status">Your session ended. Sign in again to go on.</Text>}
            <ErrorNote error={problem} />
            <TextInput label="Username" autoComplete="username" required value={username} onChange={(e) => setUsername(e.currentTarget.value)} autoFocus />
            <TextInput type="password" label="Password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.currentTarget.value)} />
            <ErrorNote error={error} />
            <Button type="submit" loading={busy}>
              Sign in
            </Button>
            {oidcLogin && (
              // A navigation, not a call: the provider's pages take over and send the browser back signed in.
              <Button component="a" href={oidcLogin} variant="default">
                Sign in with OpenID Connect
              </Button>
            )}
            {samlLogin && (
              <Button component="a" href={samlLogin} variant="default">
                Sign in with SAML
              </Button>
            )}
            <Text size="xs" c="dimmed">
              The console signs in persons with a password{oidcLogin || samlLogin ? ' or through your identity provider' : ''}. API and agent tokens work with the API only.
            </Text>
          </Stack>
        </form>
      </Paper>
    </main>
  );
}
