import { grant, person, type Person } from '../support/access';
import { startTestServer, type TestServer } from '../support/server';

/**
 * Stored inventories (spec part A 4.12; part B 7.3, 8): CRUD in INI and YAML with hosts counted,
 * summaries without content, secret-looking values masked below admin, bodies up to 26 MiB on
 * this route only, and access by the grant model.
 */

let t: TestServer;
let alice: Person; // operator
let bob: Person; // operator
let vic: Person; // viewer

beforeAll(async () => {
  t = await startTestServer();
  alice = await person(t.api, 'operator');
  bob = await person(t.api, 'operator');
  vic = await person(t.api, 'viewer');
});
afterAll(async () => {
  await t?.stop();
});

const INI = `# web tier
[web]
web[01:03].example.com ansible_user=deploy
db.example.com:2222 ansible_password=s3cret-pass api_token="tok en"

[web:vars]
ansible_become_pass=topsecret
http_port=80

[all:children]
web
`;

const YAML = `all:
  vars:
    vault_password: hunter2hunter2
    region: eu
  children:
    app:
      hosts:
        app-[a:c]:
          ansible_host: 10.0.0.1
        single:
      vars:
        db_secret: |
          line one
          line two
        plain: yes
`;

describe('inventory CRUD', () => {
  test('create INI and YAML, hosts counted; read, list without content; replace; delete', async () => {
    const ini = await t.api.post('/v1/inventories', { name: 'web', content: INI });
    expect(ini.status).toBe(201);
    expect(ini.headers.get('location')).toBe(`/v1/inventories/${ini.body.id}`);
    expect(ini.body).toMatchObject({
      id: expect.stringMatching(/^inv_/),
      name: 'web',
      kind: 'static',
      format: 'ini',
      host_count: 4,
      size_bytes: Buffer.byteLength(INI),
      content: INI,
      content_masked: false,
      created_by: 'admin',
    });

    const yaml = await t.api.post('/v1/inventories', { name: 'app', content: YAML });
    expect(yaml.status).toBe(201);
    expect(yaml.body).toMatchObject({ format: 'yaml', host_count: 4 });

    const list = await t.api.get('/v1/inventories');
    expect(list.body).toMatchObject({ count: 2, total: 2 });
    for (const row of list.body.inventories) {
      expect(row.content).toBeUndefined();
      expect(row.hosts).toBeUndefined();
      expect(row).toMatchObject({ name: expect.any(String), kind: 'static', size_bytes: expect.any(Number), owner_id: expect.any(String) });
    }
    expect((await t.api.get(`/v1/inventories?id=${ini.body.id}`)).body.count).toBe(1);

    const replaced = await t.api.request('PUT', `/v1/inventories/${ini.body.id}`, { body: { ...ini.body, content: '[web]\nonly\n' } });
    expect(replaced.status).toBe(200);
    expect(replaced.body).toMatchObject({ host_count: 1, content: '[web]\nonly\n' });
    const taken = await t.api.request('PUT', `/v1/inventories/${ini.body.id}`, { body: { name: 'app', content: '' } });
    expect(taken.status).toBe(409);
    expect((await t.api.post('/v1/inventories', { name: 'app', content: '' })).status).toBe(409);

    expect((await t.api.request('DELETE', `/v1/inventories/${ini.body.id}`)).status).toBe(204);
    expect((await t.api.get(`/v1/inventories/${ini.body.id}`)).status).toBe(404);
    expect((await t.api.request('DELETE', `/v1/inventories/${yaml.body.id}`)).status).toBe(204);
  });

  test('bad content and fields are 400s naming the field', async () => {
    const badYaml = await t.api.post('/v1/inventories', { name: 'bad', content: 'all:\n  hosts: [1, 2\n', format: 'yaml' });
    expect(badYaml.status).toBe(400);
    expect(badYaml.text).toContain('content');
    const badIni = await t.api.post('/v1/inventories', { name: 'bad', content: '[web:nonsense]\nh1\n' });
    expect(badIni.status).toBe(400);
    expect(badIni.text).toContain('content');
    const tooMany = await t.api.post('/v1/inventories', { name: 'bad', content: '[web]\nh[1:200000]\n' });
    expect(tooMany.status).toBe(400);
    expect(tooMany.text).toContain('more than 100000 hosts');
    expect((await t.api.post('/v1/inventories', { name: 'bad', content: 'x', format: 'toml' })).status).toBe(400);
    expect((await t.api.post('/v1/inventories', { content: 'x' })).status).toBe(400);
  });

  test('the chain entry and fingerprint carry no content', async () => {
    const created = await t.api.post('/v1/inventories', { name: 'audited', content: '[web]\nh1 ansible_password=do-not-chain\n' });
    expect(created.status).toBe(201);
    const audit = await t.api.get('/v1/audit?limit=1000');
    expect(audit.text).not.toContain('do-not-chain');
    expect(audit.text).toContain('inventory.created');
    await t.api.request('DELETE', `/v1/inventories/${created.body.id}`);
  });
});

describe('an inventory\'s named queue (Team tier, spec part A 1.2)', () => {
  test('is refused without the license on create and edit; a run or launch inheriting one from an inventory or template is refused the same way', async () => {
    const refused = await t.api.post('/v1/inventories', { name: 'queued', content: '[web]\nh1\n', queue: 'gpu' });
    expect(refused).toMatchObject({ status: 403, body: { feature: 'named_queue', field: 'queue', tier: 'community' } });
    expect(refused.body.error).toBe('a named queue needs the Team tier; this install runs Community');
    const plain = await t.api.post('/v1/inventories', { name: 'queued later', content: '[web]\nh1 ansible_connection=local\n' });
    expect(plain.body).toMatchObject({ queue: '' });
    const edited = await t.api.request('PUT', `/v1/inventories/${plain.body.id}`, { body: { ...plain.body, queue: 'gpu' } });
    expect(edited).toMatchObject({ status: 403, body: { feature: 'named_queue', field: 'queue' } });
    expect(edited.body.error).toBe('a named queue needs the Team tier; this install runs Community');

    // Saved while the install held a Team license that has since lapsed.
    const tpl = (await t.api.post('/v1/templates', { name: 'queued tpl', tool: 'bash', command: 'true' })).body;
    const job = (await t.api.post('/v1/templates', { name: 'over the queued inventory', tool: 'ansible', command: '- hosts: all\n  tasks: []\n', inventory_id: plain.body.id })).body;
    await t.server.context.sql`UPDATE inventories SET queue = 'gpu' WHERE id = ${plain.body.id}`;
    await t.server.context.sql`UPDATE templates SET queue = 'arm' WHERE id = ${tpl.id}`;
    const run = await t.api.post('/v1/runs', { tool: 'ansible', command: '- hosts: all\n  tasks: []\n', inventory_id: plain.body.id });
    expect(run).toMatchObject({ status: 403, body: { feature: 'named_queue', tier: 'community' } });
    for (const id of [job.id, tpl.id]) {
      const launch = await t.api.post(`/v1/templates/${id}/launch`, {});
      expect(launch).toMatchObject({ status: 403, body: { feature: 'named_queue', tier: 'community' } });
    }
    expect((await t.api.get('/v1/runs?limit=1000')).body.runs.filter((r: any) => r.template_id === job.id || r.template_id === tpl.id)).toEqual([]);
  });
});

describe('the 26 MiB body bound', () => {
  const LIMIT = 26 * 1024 * 1024;
  /** A body of exactly `size` bytes: an INI inventory of one host and a long comment. */
  const bodyOf = (size: number, name: string) => {
    const head = `{"name":"${name}","content":"[web]\\nh1\\n#`;
    const tail = '"}';
    return head + 'x'.repeat(size - head.length - tail.length) + tail;
  };
  const send = (method: string, path: string, text: string) =>
    fetch(`${t.url}${path}`, { method, headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'application/json' }, body: text });

  test('exactly 26 MiB is stored; one byte more is 413 naming the limit; other writes stay at 1 MiB', async () => {
    const ok = await send('POST', '/v1/inventories', bodyOf(LIMIT, 'big'));
    expect(ok.status).toBe(201);
    const stored = await ok.json();
    expect(stored).toMatchObject({ host_count: 1, size_bytes: LIMIT - `{"name":"big","content":"`.length - 2 - 2 });

    const over = await send('POST', '/v1/inventories', bodyOf(LIMIT + 1, 'bigger'));
    expect(over.status).toBe(413);
    const refusal = await over.json();
    expect(refusal.error).toContain('26 MiB');

    const put = await send('PUT', `/v1/inventories/${stored.id}`, bodyOf(LIMIT + 1, 'big'));
    expect(put.status).toBe(413);
    expect((await send('PUT', `/v1/inventories/${stored.id}`, bodyOf(LIMIT, 'big'))).status).toBe(200);

    const template = await send('POST', '/v1/templates', bodyOf(2 * 1024 * 1024, 'tpl'));
    expect(template.status).toBe(413);
    expect((await template.json()).error).toContain('1 MiB');
    await t.api.request('DELETE', `/v1/inventories/${stored.id}`);
  }, 120_000);
});

describe('inventory access', () => {
  test('owner manages; others need grants; viewers cannot write; content masked below admin', async () => {
    const as = (p: Person) => t.as(p.token);
    expect((await as(vic).post('/v1/inventories', { name: 'v', content: '' })).status).toBe(403);

    const created = await as(alice).post('/v1/inventories', { name: 'alice inv', content: INI });
    expect(created.status).toBe(201);
    const id = created.body.id;
    // Its owner is not an admin: secret-looking values are masked in every read below admin.
    expect(created.body.content_masked).toBe(true);
    expect(created.body.content).not.toContain('s3cret-pass');
    expect(created.body.content).not.toContain('topsecret');
    expect(created.body.content).not.toContain('tok en');
    expect(created.body.content).toContain('ansible_password=[masked]');
    expect(created.body.content).toContain('http_port=80');
    expect(created.body.content).toContain('web[01:03].example.com ansible_user=deploy');
    expect((await t.api.get(`/v1/inventories/${id}`)).body.content).toBe(INI);

    // Bob sees nothing of it until granted.
    expect((await as(bob).get(`/v1/inventories/${id}`)).status).toBe(404);
    expect((await as(bob).get('/v1/inventories')).body.inventories.map((i: any) => i.id)).not.toContain(id);
    expect((await as(bob).request('PUT', `/v1/inventories/${id}`, { body: { name: 'x', content: '' } })).status).toBe(404);
    const unreadable = await as(bob).post('/v1/runs', { tool: 'ansible', command: '- hosts: all\n  tasks: []\n', inventory_id: id });
    expect(unreadable.status).toBe(400);
    expect(unreadable.text).toContain('inventory_id');

    await grant(as(alice), id, 'read', { user_id: bob.id });
    const read = await as(bob).get(`/v1/inventories/${id}`);
    expect(read.status).toBe(200);
    expect(read.body.content).not.toContain('s3cret-pass');
    expect((await as(bob).get('/v1/inventories')).body.inventories.map((i: any) => i.id)).toContain(id);
    expect((await as(bob).request('DELETE', `/v1/inventories/${id}`)).status).toBe(403);
    const noUse = await as(bob).post('/v1/runs', { tool: 'ansible', command: '- hosts: all\n  tasks: []\n', inventory_id: id });
    expect(noUse.status).toBe(403);
    expect(noUse.body).toMatchObject({ required_grant: 'use', field: 'inventory_id', object: id });

    await grant(as(alice), id, 'manage', { user_id: bob.id });
    const renamed = await as(bob).request('PUT', `/v1/inventories/${id}`, { body: { name: 'bob now', content: '[web]\nh1\n' } });
    expect(renamed.status).toBe(200);
    expect((await as(bob).request('DELETE', `/v1/inventories/${id}`)).status).toBe(204);
  });
});

describe('inventory preview', () => {
  test('unsaved content: the hosts reached, the engine and its version; a limit applied; 422 with the reason', async () => {
    const res = await t.api.post('/v1/inventories/preview', { content: INI });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ engine: 'ansible-inventory', ansible_core: expect.stringMatching(/^2\.\d+/), count: 4, limit: '', inventory_id: null });
    expect([...res.body.hosts].sort()).toEqual(['db.example.com', 'web01.example.com', 'web02.example.com', 'web03.example.com']);

    const limited = await t.api.post('/v1/inventories/preview', { content: YAML, limit: 'app-a,single' });
    expect(limited.status).toBe(200);
    expect([...limited.body.hosts].sort()).toEqual(['app-a', 'single']);

    const bad = await t.api.post('/v1/inventories/preview', { content: 'all:\n  hosts: [1, 2\n', format: 'yaml' });
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatch(/could not resolve/);
    expect(bad.body.error).not.toContain('cairn-inventory-');
    expect((await t.as(vic.token).post('/v1/inventories/preview', { content: INI })).status).toBe(403);
  });

  test('a stored inventory: the caller must read it; a limit as a launch would apply it', async () => {
    const created = await t.as(alice.token).post('/v1/inventories', { name: 'preview me', content: INI });
    const id = created.body.id;
    const res = await t.as(alice.token).post(`/v1/inventories/${id}/preview`, { limit: 'web0*' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ inventory_id: id, limit: 'web0*', count: 3 });
    expect((await t.as(bob.token).post(`/v1/inventories/${id}/preview`, {})).status).toBe(404);
    expect((await t.api.post('/v1/inventories/inv_nope/preview', {})).status).toBe(404);
    await t.as(alice.token).request('DELETE', `/v1/inventories/${id}`);
  });
});
