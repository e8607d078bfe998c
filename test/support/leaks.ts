import type { ApiClient, ApiResponse } from './http';

/** Every read a user has of each run: the run, its events, logs, evidence and receipt. */
export async function runReads(api: ApiClient, runIds: string[]): Promise<ApiResponse[]> {
  return Promise.all(
    runIds.flatMap((id) => [
      api.get(`/v1/runs/${id}`),
      api.get(`/v1/runs/${id}/events?limit=1000`),
      api.get(`/v1/runs/${id}/logs`),
      api.get(`/v1/runs/${id}/evidence?format=json`),
      api.get(`/v1/runs/${id}/receipt`),
    ]),
  );
}

/**
 * Requires every read answered 200 and no secret in any of them or in the server log's lines;
 * names the secret found, never quoting it.
 */
export function expectNoSecrets(reads: ApiResponse[], serverLog: string[], secrets: Record<string, string>): void {
  for (const read of reads) expect([read.status, read.text.slice(0, 200)]).toEqual([200, expect.any(String)]);
  const everything = [...reads.map((r) => r.text), ...serverLog].join('\n');
  for (const [name, secret] of Object.entries(secrets)) {
    if (everything.includes(secret)) throw new Error(`the secret ${name} was found in an API read or the server log`);
  }
}
