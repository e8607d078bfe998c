// Every call the console makes: same-origin, the session cookie plus the console's header (the
// server honours the cookie only beside it), JSON in and out, the API's error shape kept whole.

export const CONSOLE_HEADERS = { 'X-Cairn-Console': '1' };

/** An error the API answered: its status, its sentence and its details (`field`, `masked_reason`, …). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: Record<string, any> = {},
  ) {
    super(message);
  }
  get field(): string | undefined {
    return typeof this.body.field === 'string' ? this.body.field : undefined;
  }
}

type Listener = () => void;
const signedOutListeners = new Set<Listener>();

/** Called when a request finds the session gone (expired, revoked, signed out elsewhere). */
export function onSignedOut(listener: Listener): () => void {
  signedOutListeners.add(listener);
  return () => signedOutListeners.delete(listener);
}

/** The raw answer of one request; a non-2xx answer is thrown as an ApiError. */
export async function request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const init: RequestInit = { method, credentials: 'same-origin', headers: { ...CONSOLE_HEADERS, ...headers } };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    (init.headers as Record<string, string>)['Content-Type'] = 'application/json';
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    let parsed: Record<string, any> = {};
    try {
      parsed = await response.json();
    } catch {
      /* not JSON */
    }
    const error = new ApiError(response.status, parsed.error ?? `${response.status} ${response.statusText}`, parsed);
    if (response.status === 401 && path !== '/v1/auth/login') signedOutListeners.forEach((listener) => listener());
    throw error;
  }
  return response;
}

/** A JSON call; 204 answers undefined. */
export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await request(method, path, body);
  if (response.status === 204) return undefined as T;
  const type = response.headers.get('content-type') ?? '';
  return (type.includes('json') ? response.json() : response.text()) as Promise<T>;
}

export const get = <T = any>(path: string) => api<T>('GET', path);
export const post = <T = any>(path: string, body: unknown = {}) => api<T>('POST', path, body);
export const put = <T = any>(path: string, body: unknown) => api<T>('PUT', path, body);
export const del = (path: string) => api<void>('DELETE', path);

/** A query string from the set values of an object (arrays repeat their key). */
export function query(params: Record<string, string | number | boolean | undefined | null | string[]>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined || value === null || value === '') continue;
    if (Array.isArray(value)) value.forEach((v) => search.append(key, v));
    else search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** Saves an answer as a file: fetched with the session, handed to the browser as a blob (never a URL holding a credential). */
export async function download(path: string, filename: string): Promise<void> {
  const response = await request('GET', path);
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
