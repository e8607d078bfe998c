import { randomBytes } from 'node:crypto';
import type { ApiClient, ApiResponse } from './http';

/** Accounts, tokens, teams, organizations and grants made through the API by an admin, for access tests. */

export type Role = 'admin' | 'operator' | 'viewer';

export interface Person {
  id: string;
  username: string;
  token: string;
}

const unique = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

async function expectCreated(what: string, res: { status: number; text: string; body: any }): Promise<any> {
  if (res.status !== 201) throw new Error(`${what}: ${res.status} ${res.text}`);
  return res.body;
}

/** A fresh account in the role with a token of the kind (a person's by default), minted by the admin. */
export async function person(admin: ApiClient, role: Role, kind: 'user' | 'agent' = 'user', name: string = role): Promise<Person> {
  const username = unique(name);
  const user = await expectCreated(`creating ${username}`, await admin.post('/v1/users', { username, role }));
  const minted = await expectCreated(`minting for ${username}`, await admin.post('/v1/tokens', { name: 'test', username, kind }));
  return { id: user.id, username, token: minted.token };
}

/** Another token for the same account: an agent token of a person's account, say. */
export async function tokenOf(admin: ApiClient, account: Person, kind: 'user' | 'agent'): Promise<string> {
  return (await expectCreated(`minting for ${account.username}`, await admin.post('/v1/tokens', { name: kind, username: account.username, kind }))).token;
}

export async function team(admin: ApiClient, members: Person[] = []): Promise<string> {
  const { id } = await expectCreated('creating a team', await admin.post('/v1/teams', { name: unique('team') }));
  for (const member of members) await expectCreated('adding a team member', await admin.post(`/v1/teams/${id}/members`, { user_id: member.id }));
  return id;
}

export async function org(admin: ApiClient, members: [Person, 'admin' | 'member'][] = []): Promise<string> {
  const { id } = await expectCreated('creating an organization', await admin.post('/v1/orgs', { name: unique('org') }));
  for (const [member, role] of members) {
    await expectCreated('adding an organization member', await admin.post(`/v1/orgs/${id}/members`, { user_id: member.id, role }));
  }
  return id;
}

/** A grant made by `by`, or the same grant made before (answered 200); its id. */
export async function grant(
  by: ApiClient,
  object: string,
  permission: 'read' | 'use' | 'manage',
  to: { user_id: string } | { team_id: string },
): Promise<string> {
  const res = await by.post('/v1/grants', { object, permission, ...to });
  if (res.status !== 201 && res.status !== 200) throw new Error(`granting ${permission} on ${object}: ${res.status} ${res.text}`);
  return res.body.id;
}

/** A template made by `by`; its read. */
export async function template(by: ApiClient, body: Record<string, unknown> = {}): Promise<any> {
  return expectCreated('creating a template', await by.post('/v1/templates', { name: unique('tpl'), tool: 'bash', command: 'echo hi', ...body }));
}

/** Every page of a configuration list or run list, `limit` rows at a time, checking the envelope of each. */
export async function everyPage(api: ApiClient, path: string, name: string, limit: number): Promise<{ ids: string[]; totals: number[] }> {
  const ids: string[] = [];
  const totals: number[] = [];
  const sep = path.includes('?') ? '&' : '?';
  for (let offset: number | null = 0; offset !== null; ) {
    const res: ApiResponse = await api.get(`${path}${sep}limit=${limit}&offset=${offset}`);
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${res.text}`);
    const rows = res.body[name] as { id?: string; user_id?: string }[];
    ids.push(...rows.map((row) => (row.id ?? row.user_id)!));
    totals.push(res.body.total);
    const expectedNext = offset + rows.length < res.body.total ? offset + rows.length : null;
    if (res.body.next_offset !== expectedNext || res.body.count !== rows.length || res.body.has_more !== (expectedNext !== null)) {
      throw new Error(`GET ${path} at offset ${offset}: an envelope that does not add up: ${res.text.slice(0, 300)}`);
    }
    offset = res.body.next_offset;
  }
  return { ids, totals };
}

/**
 * Waits until no run is pending or running, so that no run's end (an audit entry, events) lands
 * while a test compares what a call wrote. Held runs wait for a decision and write nothing, and
 * so do the steps of a held run and a workflow waiting at an approval step, which `waiting` names.
 */
export async function quiet(admin: ApiClient, waiting: string[] = [], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const list = async (status: string) => (await admin.get(`/v1/runs?status=${status}&limit=1000`)).body.runs as { id: string; parent_run_id: string | null }[];
  for (;;) {
    const still = new Set([...waiting, ...(await list('held')).map((run) => run.id)]);
    const busy = [...(await list('pending')), ...(await list('running'))]
      .filter((run) => !still.has(run.id) && !(run.parent_run_id && still.has(run.parent_run_id)))
      .map((run) => run.id);
    if (busy.length === 0) return;
    if (Date.now() > deadline) throw new Error(`runs still pending or running after ${timeoutMs} ms: ${busy.join(', ')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
