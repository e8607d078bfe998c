/** A response as tests read it: status, headers, the body as text and, when it is JSON, parsed. */
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  text: string;
  body: T;
}

export interface ApiClient {
  request<T = any>(method: string, path: string, options?: { body?: unknown; rawBody?: string | Uint8Array; headers?: Record<string, string>; token?: string | null }): Promise<ApiResponse<T>>;
  get<T = any>(path: string, token?: string | null): Promise<ApiResponse<T>>;
  post<T = any>(path: string, body?: unknown, token?: string | null): Promise<ApiResponse<T>>;
}

export function apiClient(baseUrl: string, defaultToken?: string): ApiClient {
  const client: ApiClient = {
    async request(method, path, options = {}) {
      const token = options.token === undefined ? defaultToken : options.token;
      const headers: Record<string, string> = { ...(options.headers ?? {}) };
      if (token) headers.authorization = `Bearer ${token}`;
      let body: string | Uint8Array | undefined = options.rawBody;
      if (options.body !== undefined) {
        body = JSON.stringify(options.body);
        headers['content-type'] = 'application/json';
      }
      const response = await fetch(`${baseUrl}${path}`, { method, headers, body: body as BodyInit | undefined, redirect: 'manual' });
      const text = await response.text();
      let parsed: unknown = undefined;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: response.status, headers: response.headers, text, body: parsed as any };
    },
    get: (path, token) => client.request('GET', path, { token }),
    post: (path, body, token) => client.request('POST', path, { body: body ?? {}, token }),
  };
  return client;
}
