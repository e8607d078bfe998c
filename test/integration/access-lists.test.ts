import { everyPage, grant, org, person, quiet, team, template, tokenOf, type Person } from '../support/access';
import type { ApiClient } from '../support/http';
import { testLicense } from '../support/license';
import { startTestServer, waitForRun, waitForRunEnd, type TestServer } from '../support/server';

/**
 * Lists and their totals hold only what the caller may read, on every page; teams, organizations
 * and grants give and take access as they are made and deleted; queues need a use grant.
 */

let t: TestServer;
beforeAll(async () => {
  const license = await testLicense('team');
  t = await startTestServer({ CAIRN_LICENSE_FILE: license.file }, { licenseKeys: [license.publicJwk] });
});
afterAll(async () => {
  await t?.stop();
});

const as = (who: Person | string): ApiClient => t.as(typeof who === 'string' ? who : who.token);
const sorted = (ids: string[]) => [...ids].sort();

async function launched(templateId: string, by: ApiClient): Promise<any> {
  const res = await by.post(`/v1/templates/${templateId}/launch`, {});
  if (res.status !== 201) throw new Error(`launch: ${res.status} ${res.text}`);
  return res.body;
}

describe('lists hold what the caller may read', () => {
  test('an operator lists exactly the templates it owns or is granted, directly, through a team or an organization, on every page', async () => {
    const owner = await person(t.api, 'operator', 'user', 'owner');
    const reader = await person(t.api, 'operator', 'user', 'reader');
    const others = [];
    for (let i = 0; i < 6; i++) others.push(await template(as(owner)));
    const adminOwn = await template(t.api);
    const own = await template(as(reader));
    const viaOrg = await template(as(owner), { org_id: await org(t.api, [[reader, 'member'], [owner, 'member']]) });
    await grant(t.api, others[0].id, 'read', { user_id: reader.id });
    await grant(as(owner), others[3].id, 'use', { team_id: await team(t.api, [reader]) });
    await grant(t.api, adminOwn.id, 'manage', { user_id: reader.id });
    const readable = sorted([own.id, others[0].id, others[3].id, adminOwn.id, viaOrg.id]);

    const whole = await as(reader).get('/v1/templates');
    expect(whole.body).toMatchObject({ count: 5, total: 5, has_more: false, next_offset: null });
    expect(sorted(whole.body.templates.map((x: any) => x.id))).toEqual(readable);

    const paged = await everyPage(as(reader), '/v1/templates', 'templates', 2);
    expect(sorted(paged.ids)).toEqual(readable);
    expect(new Set(paged.totals)).toEqual(new Set([5]));

    // Asked by id, an unreadable template is left out as if it did not exist, and total counts only the readable.
    const byId = await as(reader).get(`/v1/templates?id=${others[1].id}&id=${others[0].id}&id=tpl_nothing`);
    expect(byId.body).toMatchObject({ count: 1, total: 1, templates: [{ id: others[0].id }] });

    // An unreadable template is answered exactly as one that does not exist.
    const unreadable = await as(reader).get(`/v1/templates/${others[1].id}`);
    const missing = await as(reader).get('/v1/templates/tpl_nothing');
    expect([unreadable.status, unreadable.body]).toEqual([404, { error: `template ${others[1].id} not found` }]);
    expect([missing.status, missing.body]).toEqual([404, { error: 'template tpl_nothing not found' }]);
    expect((await as(reader).get(`/v1/templates/${others[0].id}`)).status).toBe(200);
    // The admin lists every one.
    const all = await t.api.get('/v1/templates');
    expect(all.body.total).toBeGreaterThanOrEqual(9);
    expect(all.body.templates.map((x: any) => x.id)).toEqual(expect.arrayContaining([...readable, others[1].id]));
  });

  test('runs: a viewer lists the runs of templates it may read, never another account’s plain runs, and total counts only those, on every page', async () => {
    const owner = await person(t.api, 'operator', 'user', 'owner');
    const viewer = await person(t.api, 'viewer', 'user', 'viewer');
    const shared = await template(as(owner), { command: 'echo shared' });
    const unshared = await template(as(owner), { command: 'echo unshared' });
    await grant(as(owner), shared.id, 'read', { user_id: viewer.id });
    const seen = [await launched(shared.id, as(owner)), await launched(shared.id, as(owner)), await launched(shared.id, t.api)];
    const hidden = [await launched(unshared.id, as(owner))];
    const plain = await as(owner).post('/v1/runs', { tool: 'bash', command: 'echo plain' });
    expect(plain.status).toBe(201);
    hidden.push(plain.body);
    for (const run of [...seen, ...hidden]) await waitForRunEnd(t.api, run.id);

    const list = await as(viewer).get('/v1/runs');
    expect(list.body).toMatchObject({ count: 3, total: 3 });
    expect(sorted(list.body.runs.map((r: any) => r.id))).toEqual(sorted(seen.map((r) => r.id)));
    const paged = await everyPage(as(viewer), '/v1/runs', 'runs', 2);
    expect(sorted(paged.ids)).toEqual(sorted(seen.map((r) => r.id)));
    expect(new Set(paged.totals)).toEqual(new Set([3]));
    // Filters narrow what the caller may read; they never widen it.
    expect((await as(viewer).get('/v1/runs?q=unshared')).body).toMatchObject({ count: 0, total: 0 });
    expect((await as(viewer).get('/v1/runs?status=succeeded&limit=1')).body).toMatchObject({ count: 1, total: 3, next_offset: 1 });

    for (const run of hidden) {
      for (const path of ['', '/logs', '/events', '/evidence', '/receipt', '/decisions']) {
        expect([path, (await as(viewer).get(`/v1/runs/${run.id}${path}`)).status]).toEqual([path, 404]);
      }
      expect((await as(viewer).post(`/v1/runs/${run.id}/stream-ticket`)).status).toBe(404);
    }
    for (const path of ['', '/logs', '/events', '/evidence', '/receipt']) {
      expect([path, (await as(viewer).get(`/v1/runs/${seen[2].id}${path}`)).status]).toEqual([path, 200]);
    }
    expect((await as(viewer).post(`/v1/runs/${seen[0].id}/stream-ticket`)).status).toBe(201);

    // The owner lists its own runs and every run of its templates, the admin's launch included;
    // the admin's plain runs are not among them.
    const adminPlain = (await t.api.post('/v1/runs', { tool: 'bash', command: 'echo admin' })).body;
    const mine = await everyPage(as(owner), '/v1/runs', 'runs', 1);
    expect(sorted(mine.ids)).toEqual(sorted([...seen, ...hidden].map((r) => r.id)));
    expect((await as(owner).get(`/v1/runs/${adminPlain.id}`)).status).toBe(404);
  });

  test('waiting approval steps are listed only to those who may read their workflow', async () => {
    const owner = await person(t.api, 'operator', 'user', 'owner');
    const member = await person(t.api, 'viewer', 'user', 'member');
    const outsider = await person(t.api, 'operator', 'user', 'outsider');
    const organization = await org(t.api, [[member, 'member']]);
    const workflow = await template(as(owner), {
      tool: undefined,
      command: undefined,
      org_id: null,
      steps: [{ name: 'gate', type: 'approval', description: 'go?' }, { name: 'after', tool: 'bash', command: 'true', depends_on: ['gate'] }],
    });
    const run = await launched(workflow.id, as(owner));
    const stepOf = async (api: ApiClient) => (await api.get('/v1/approvals')).body.approvals.find((a: any) => a.workflow_run_id === run.id);
    const deadline = Date.now() + 30_000;
    while (!(await stepOf(t.api)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(await stepOf(t.api)).toBeDefined();
    expect(await stepOf(as(owner))).toBeDefined();
    expect(await stepOf(as(member))).toBeUndefined();
    expect(await stepOf(as(outsider))).toBeUndefined();
    expect((await as(outsider).get('/v1/approvals')).body).toMatchObject({ count: 0, total: 0 });

    // Moved into the member's organization, the workflow and its waiting step are the member's to read.
    const read = (await as(owner).get(`/v1/templates/${workflow.id}`)).body;
    const moved = await as(owner).request('PUT', `/v1/templates/${workflow.id}`, { body: { ...read, org_id: organization } });
    expect(moved.status).toBe(400); // the owner does not belong to that organization
    expect(moved.body).toMatchObject({ field: 'org_id' });
    await t.api.post(`/v1/orgs/${organization}/members`, { user_id: owner.id, role: 'member' });
    expect((await as(owner).request('PUT', `/v1/templates/${workflow.id}`, { body: { ...read, org_id: organization } })).status).toBe(200);
    expect(await stepOf(as(member))).toBeDefined();
    expect((await as(member).get(`/v1/runs/${run.id}/steps`)).body.count).toBe(2);
    await t.api.post(`/v1/runs/${(await stepOf(t.api)).id}/reject`, {});
  });

  test('teams, organizations and their members are listed to their members and the admin only', async () => {
    const alice = await person(t.api, 'operator');
    const bob = await person(t.api, 'viewer');
    const teams = [await team(t.api, [alice]), await team(t.api, [alice, bob]), await team(t.api)];
    const orgs = [await org(t.api, [[alice, 'admin']]), await org(t.api, [[bob, 'member']])];

    expect(sorted((await everyPage(as(alice), '/v1/teams', 'teams', 1)).ids)).toEqual(sorted(teams.slice(0, 2)));
    expect((await as(bob).get('/v1/teams')).body).toMatchObject({ total: 1, teams: [{ id: teams[1] }] });
    expect((await as(alice).get('/v1/orgs')).body).toMatchObject({ total: 1, orgs: [{ id: orgs[0] }] });
    expect((await as(bob).get(`/v1/orgs?id=${orgs[0]}&id=${orgs[1]}`)).body).toMatchObject({ total: 1, orgs: [{ id: orgs[1] }] });
    expect((await t.api.get(`/v1/teams?id=${teams.join('&id=')}`)).body.total).toBe(3);

    const members = await as(bob).get(`/v1/teams/${teams[1]}/members`);
    expect(members.body).toMatchObject({ total: 2 });
    expect(sorted(members.body.members.map((m: any) => m.user_id))).toEqual(sorted([alice.id, bob.id]));
    expect(members.body.members[0]).not.toHaveProperty('role');
    expect((await as(bob).get(`/v1/teams/${teams[0]}/members`)).status).toBe(404);
    expect((await as(alice).get(`/v1/orgs/${orgs[0]}/members`)).body).toMatchObject({ total: 1, members: [{ user_id: alice.id, role: 'admin' }] });
    expect((await as(alice).get(`/v1/orgs/${orgs[1]}/members`)).status).toBe(404);
  });

  test('grants are listed to the admin, to their grantees and to those who manage their object', async () => {
    const owner = await person(t.api, 'operator', 'user', 'owner');
    const grantee = await person(t.api, 'viewer', 'user', 'grantee');
    const teammate = await person(t.api, 'operator', 'user', 'teammate');
    const stranger = await person(t.api, 'operator', 'user', 'stranger');
    const mine = await template(as(owner));
    const direct = await grant(as(owner), mine.id, 'read', { user_id: grantee.id });
    const viaTeam = await grant(as(owner), mine.id, 'use', { team_id: await team(t.api, [teammate]) });

    expect(sorted((await everyPage(as(owner), '/v1/grants', 'grants', 1)).ids)).toEqual(sorted([direct, viaTeam]));
    expect((await as(grantee).get('/v1/grants')).body).toMatchObject({ total: 1, grants: [{ id: direct, object: mine.id, kind: 'template', permission: 'read', user_id: grantee.id }] });
    expect((await as(teammate).get('/v1/grants')).body).toMatchObject({ total: 1, grants: [{ id: viaTeam }] });
    expect((await as(stranger).get('/v1/grants')).body).toMatchObject({ total: 0, grants: [] });
    expect((await t.api.get(`/v1/grants?id=${direct}&id=${viaTeam}`)).body.total).toBe(2);
    // A grantee sees its grant but cannot take it back from others; a stranger does not see it at all.
    expect((await as(teammate).request('DELETE', `/v1/grants/${direct}`)).status).toBe(404);
    expect((await as(grantee).request('DELETE', `/v1/grants/${direct}`)).status).toBe(403);
    expect((await as(owner).request('DELETE', `/v1/grants/${direct}`)).status).toBe(204);
    expect((await as(grantee).get(`/v1/templates/${mine.id}`)).status).toBe(404);
  });
});

describe('access follows teams, organizations and accounts as they change', () => {
  test('deleting a team removes its memberships and its grants: its members lose what it gave', async () => {
    const owner = await person(t.api, 'operator');
    const member = await person(t.api, 'operator');
    const shared = await template(as(owner));
    const group = await team(t.api, [member]);
    const given = await grant(as(owner), shared.id, 'use', { team_id: group });
    const run = await as(member).post(`/v1/templates/${shared.id}/launch`, {});
    expect(run.status).toBe(201);
    await waitForRunEnd(t.api, run.body.id);

    expect((await t.api.request('DELETE', `/v1/teams/${group}`)).status).toBe(204);
    expect((await as(member).get(`/v1/templates/${shared.id}`)).status).toBe(404);
    expect((await as(member).post(`/v1/templates/${shared.id}/launch`, {})).status).toBe(404);
    // The run it launched is still its own to read, and counted as such.
    expect((await as(member).get('/v1/runs')).body).toMatchObject({ total: 1, runs: [{ id: run.body.id }] });
    expect((await as(member).get(`/v1/runs?status=succeeded&q=${run.body.id}`)).body).toMatchObject({ total: 1 });
    expect((await as(member).get('/v1/runs?status=failed')).body).toMatchObject({ total: 0 });
    expect((await t.api.get(`/v1/grants?id=${given}`)).body.total).toBe(0);
    expect((await t.api.get(`/v1/teams/${group}/members`)).status).toBe(404);
    const entry = (await t.api.get('/v1/audit?limit=1')).body.entries[0];
    expect(entry.body).toMatchObject({ kind: 'team.deleted', team_id: group, members_removed: 1, grants_removed: 1 });
  });

  test('organization admin manages the organization’s templates on an operator account and only uses them on a viewer account; a member reads them', async () => {
    const owner = await person(t.api, 'operator');
    const opAdmin = await person(t.api, 'operator');
    const viewerAdmin = await person(t.api, 'viewer');
    const member = await person(t.api, 'operator');
    const organization = await org(t.api, [[opAdmin, 'admin'], [viewerAdmin, 'admin'], [member, 'member'], [owner, 'member']]);
    const owned = await template(as(owner), { org_id: organization });
    expect(owned).toMatchObject({ org_id: organization, owner_id: owner.id });
    const edit = (who: Person) => as(who).request('PUT', `/v1/templates/${owned.id}`, { body: { ...owned, command: 'echo edited' } });

    expect((await edit(opAdmin)).status).toBe(200);
    expect((await as(opAdmin).post(`/v1/templates/${owned.id}/launch`, {})).status).toBe(201);
    // The viewer's role caps what the organization gives it: it reads and uses, never manages.
    expect((await as(viewerAdmin).get(`/v1/templates/${owned.id}`)).status).toBe(200);
    expect((await edit(viewerAdmin)).status).toBe(403);
    expect((await as(viewerAdmin).post('/v1/grants', { object: owned.id, permission: 'read', user_id: member.id })).body).toMatchObject({
      required_grant: 'manage',
      object: owned.id,
    });
    // A member reads, and may neither launch nor edit.
    expect((await as(member).get(`/v1/templates/${owned.id}`)).status).toBe(200);
    expect((await as(member).post(`/v1/templates/${owned.id}/launch`, {})).body).toMatchObject({ required_grant: 'use' });
    expect((await edit(member)).status).toBe(403);

    // Deleting the organization removes its memberships and releases its templates.
    expect((await t.api.request('DELETE', `/v1/orgs/${organization}`)).status).toBe(204);
    expect((await t.api.get(`/v1/templates/${owned.id}`)).body.org_id).toBeNull();
    expect((await edit(opAdmin)).status).toBe(404);
    expect((await as(member).get(`/v1/templates/${owned.id}`)).status).toBe(404);
    expect((await as(owner).get(`/v1/templates/${owned.id}`)).status).toBe(200);
  });

  test('deleting an account removes its memberships and grants; its templates stay, managed by admins and grantees', async () => {
    const leaving = await person(t.api, 'operator');
    const staying = await person(t.api, 'operator');
    const group = await team(t.api, [leaving, staying]);
    const organization = await org(t.api, [[leaving, 'admin']]);
    const left = await template(as(leaving));
    await grant(as(leaving), left.id, 'manage', { user_id: staying.id });
    await grant(t.api, 'queue:gpu', 'use', { user_id: leaving.id });

    expect((await t.api.request('DELETE', `/v1/users/${leaving.id}`)).status).toBe(204);
    expect((await t.api.get(`/v1/teams/${group}/members`)).body).toMatchObject({ total: 1, members: [{ user_id: staying.id }] });
    expect((await t.api.get(`/v1/orgs/${organization}/members`)).body).toMatchObject({ total: 0 });
    expect((await t.api.get('/v1/grants')).body.grants.filter((g: any) => g.user_id === leaving.id)).toEqual([]);
    expect((await t.api.get(`/v1/templates/${left.id}`)).body).toMatchObject({ owner_id: null, created_by: leaving.username });
    expect((await as(staying).request('DELETE', `/v1/templates/${left.id}`)).status).toBe(204);
  });

  test('an agent token holds what its account holds, and never changes access itself', async () => {
    const account = await person(t.api, 'operator', 'user', 'bot-owner');
    const agent = await tokenOf(t.api, account, 'agent');
    const owner = await person(t.api, 'operator');
    const usable = await template(as(owner));
    expect((await as(agent).get(`/v1/templates/${usable.id}`)).status).toBe(404);
    await grant(as(owner), usable.id, 'use', { user_id: account.id });
    const run = await as(agent).post(`/v1/templates/${usable.id}/launch`, {});
    expect(run.status).toBe(201);
    expect(run.body).toMatchObject({ status: 'held', actor_kind: 'agent' });
    expect((await as(agent).request('PUT', `/v1/templates/${usable.id}`, { body: { ...usable, command: 'echo bot' } })).status).toBe(403);
    // Its own template it manages, as its account does; but it may not share it.
    const its = await template(as(agent));
    expect((await as(agent).request('PUT', `/v1/templates/${its.id}`, { body: { ...its, command: 'echo bot' } })).status).toBe(200);
    const refused = await as(agent).post('/v1/grants', { object: its.id, permission: 'read', user_id: owner.id });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatch(/an agent may not change teams, organizations or grants/);
  });
});

describe('runs follow their template', () => {
  test('rerun needs use on the template; cancel needs its requester or manage; a plain run is its requester’s', async () => {
    const owner = await person(t.api, 'operator', 'user', 'owner');
    const user = await person(t.api, 'operator', 'user', 'user');
    const reader = await person(t.api, 'operator', 'user', 'reader');
    const manager = await person(t.api, 'operator', 'user', 'manager');
    const shared = await template(as(owner), { command: 'sleep 30' });
    await grant(as(owner), shared.id, 'use', { user_id: user.id });
    await grant(as(owner), shared.id, 'read', { user_id: reader.id });
    await grant(as(owner), shared.id, 'manage', { user_id: manager.id });
    const run = await launched(shared.id, as(owner));

    expect((await as(reader).post(`/v1/runs/${run.id}/cancel`)).body).toMatchObject({ required_grant: 'manage' });
    expect((await as(user).post(`/v1/runs/${run.id}/cancel`)).status).toBe(403);
    expect((await as(manager).post(`/v1/runs/${run.id}/cancel`)).status).toBeLessThan(300);
    await waitForRun(t.api, run.id, (r) => r.finished_at);
    expect((await as(reader).post(`/v1/runs/${run.id}/rerun`)).body).toMatchObject({ required_grant: 'use', object: shared.id });
    const again = await as(user).post(`/v1/runs/${run.id}/rerun`);
    expect(again.status).toBe(201);
    await as(user).post(`/v1/runs/${again.body.id}/cancel`);

    const plain = (await as(owner).post('/v1/runs', { tool: 'bash', command: 'true' })).body;
    await waitForRunEnd(t.api, plain.id);
    expect((await as(manager).post(`/v1/runs/${plain.id}/rerun`)).status).toBe(404);
    expect((await as(owner).post(`/v1/runs/${plain.id}/rerun`)).status).toBe(201);
  });
});

describe('queues', () => {
  test('a run on a named queue needs use on queue:<name> below admin; the default queue needs none', async () => {
    const operator = await person(t.api, 'operator');
    const submit = (queue: string, api: ApiClient = as(operator)) => api.post('/v1/runs', { tool: 'bash', command: 'true', queue, timeout: 1 });
    expect((await submit('')).status).toBe(201);
    const refused = await submit('gpu-a');
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ field: 'queue', required_grant: 'use', object: 'queue:gpu-a' });
    expect((await submit('gpu-a', t.api)).status).toBe(201);

    await grant(t.api, 'queue:gpu-a', 'read', { user_id: operator.id });
    expect((await submit('gpu-a')).status).toBe(403);
    await grant(t.api, 'queue:gpu-a', 'use', { team_id: await team(t.api, [operator]) });
    expect((await submit('gpu-a')).status).toBe(201);
    expect((await submit('gpu-b')).status).toBe(403);

    // A template's launch onto a queue needs the same.
    const owner = await person(t.api, 'operator');
    const queued = await template(t.api, { queue: 'gpu-b' });
    await grant(t.api, queued.id, 'use', { user_id: owner.id });
    expect((await as(owner).post(`/v1/templates/${queued.id}/launch`, {})).body).toMatchObject({ object: 'queue:gpu-b' });

    const defaultQueue = await t.api.post('/v1/grants', { object: 'queue:', permission: 'use', user_id: operator.id });
    expect(defaultQueue.status).toBe(400);
    expect(defaultQueue.body).toMatchObject({ field: 'object', error: expect.stringMatching(/the default queue needs no grant/) });
  });
});

describe('grant and membership input', () => {
  test('a grant names a template or a queue, never accounts or /v1/users, to exactly one account or team, by ids of at most 512 bytes', async () => {
    const operator = await person(t.api, 'operator');
    const manager = await person(t.api, 'operator');
    const owned = await template(as(manager));
    await grant(t.api, owned.id, 'manage', { user_id: operator.id });
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ object: operator.id, permission: 'manage', user_id: operator.id }, 'object', /accounts and \/v1\/users need the admin role/],
      [{ object: '/v1/users', permission: 'manage', user_id: operator.id }, 'object', /a grant names a template \(tpl_…\), .*or a queue \(queue:<name>\)/],
      [{ object: 'x'.repeat(513), permission: 'read', user_id: operator.id }, 'object', /object must be at most 512 bytes/],
      [{ object: owned.id, permission: 'read', user_id: 'u'.repeat(513) }, 'user_id', /user_id must be at most 512 bytes/],
      [{ object: owned.id, permission: 'read' }, 'user_id', /exactly one of user_id and team_id/],
      [{ object: owned.id, permission: 'read', user_id: operator.id, team_id: 'team_x' }, 'user_id', /exactly one of user_id and team_id/],
      [{ object: owned.id, permission: 'own', user_id: operator.id }, 'permission', /permission must be read, use, manage/],
      [{ object: owned.id, permission: 'read', user_id: 'usr_nobody' }, 'user_id', /user usr_nobody not found/],
      [{ object: owned.id, permission: 'read', team_id: 'team_nobody' }, 'team_id', /team team_nobody not found/],
      [{ object: 'tpl_nothing', permission: 'read', user_id: operator.id }, 'object', /template tpl_nothing not found/],
      [{ object: `queue:${'q'.repeat(256)}`, permission: 'read', user_id: operator.id }, 'object', /at most 255 bytes/],
    ];
    await quiet(t.api);
    const before = (await t.api.get('/v1/audit?limit=1')).body.total;
    for (const [body, field, message] of cases) {
      const res = await as(operator).post('/v1/grants', body);
      expect([JSON.stringify(body).slice(0, 80), res.status, res.body.field]).toEqual([JSON.stringify(body).slice(0, 80), 400, field]);
      expect(res.body.error).toMatch(message);
    }
    expect((await t.api.post(`/v1/teams/${await team(t.api)}/members`, { user_id: 'u'.repeat(513) })).body).toMatchObject({ field: 'user_id' });
    expect((await t.api.get('/v1/audit?limit=1')).body.total).toBe(before + 1); // the team made above, nothing else

    // A manage grant never delegates /v1/users: the manager is still refused there.
    expect((await as(operator).get('/v1/users')).status).toBe(403);
    // The same grant again changes nothing and answers 200 with it.
    const first = await as(operator).post('/v1/grants', { object: owned.id, permission: 'read', user_id: manager.id });
    const repeat = await as(operator).post('/v1/grants', { object: owned.id, permission: 'read', user_id: manager.id });
    expect([first.status, repeat.status, repeat.body.id]).toEqual([201, 200, first.body.id]);
  });

  test('organization roles: adding again with the same role changes nothing; with another role, the role changes', async () => {
    const member = await person(t.api, 'operator');
    const organization = await org(t.api);
    const add = (role?: string) => t.api.post(`/v1/orgs/${organization}/members`, { user_id: member.id, ...(role ? { role } : {}) });
    expect((await add()).body).toMatchObject({ user_id: member.id, username: member.username, role: 'member' });
    await quiet(t.api);
    const total = (await t.api.get('/v1/audit?limit=1')).body.total;
    expect((await add('member')).status).toBe(200);
    expect((await t.api.get('/v1/audit?limit=1')).body.total).toBe(total);
    const changed = await add('admin');
    expect([changed.status, changed.body.role]).toEqual([200, 'admin']);
    expect((await t.api.get('/v1/audit?limit=1')).body.entries[0].body).toMatchObject({ kind: 'org.member_role_changed', role: 'admin', previous_role: 'member' });
    expect((await add('owner')).body).toMatchObject({ field: 'role' });
    expect((await t.api.post('/v1/teams', { name: (await t.api.get(`/v1/orgs?id=${organization}`)).body.orgs[0].name })).status).toBe(201);
    expect((await t.api.post('/v1/orgs', { name: (await t.api.get(`/v1/orgs?id=${organization}`)).body.orgs[0].name })).body).toMatchObject({ field: 'name' });
  });
});
