import { createLogger } from '../../cli/serve';
import { loadConfig } from '../../core/config';
import { connectDatabase } from '../../store/db';
import { createTestDatabase, schemaBefore } from '../support/database';
import { apiClient } from '../support/http';
import { startServerInProcess, testSettings } from '../support/server';

/** Templates saved before owners existed are owned by the account that created them. */

test('a template saved before owners existed is managed by the account that created it, and one whose creator is gone by admins only', async () => {
  const database = await createTestDatabase({ empty: true });
  const sql = connectDatabase(database.url, { max: 1 });
  try {
    await schemaBefore(sql, '009');
    for (const [id, username] of [
      ['usr_legacydana', 'dana'],
      ['usr_legacyeve', 'eve'],
    ]) {
      await sql`INSERT INTO accounts (id, username, role) VALUES (${id}, ${username}, 'operator')`;
    }
    await sql`INSERT INTO templates (id, name, kind, tool, command, created_by) VALUES ('tpl_legacydana', 'danas', 'job', 'bash', 'true', 'dana')`;
    await sql`INSERT INTO templates (id, name, kind, tool, command, created_by) VALUES ('tpl_legacyghost', 'ghosts', 'job', 'bash', 'true', 'ghost')`;

    const config = loadConfig({}, testSettings(database.url));
    const server = await startServerInProcess(config, createLogger(config));
    try {
      const admin = apiClient(server.url, server.adminToken);
      const tokenOf = async (username: string) => apiClient(server.url, (await admin.post('/v1/tokens', { name: 'legacy', username })).body.token);
      const dana = await tokenOf('dana');
      const eve = await tokenOf('eve');
      const read = (await dana.get('/v1/templates/tpl_legacydana')).body;
      expect(read).toMatchObject({ owner_id: 'usr_legacydana', org_id: null, created_by: 'dana' });
      expect((await dana.request('PUT', '/v1/templates/tpl_legacydana', { body: { ...read, command: 'echo mine' } })).status).toBe(200);
      expect((await dana.post('/v1/templates/tpl_legacydana/launch', {})).status).toBe(201);
      expect((await eve.get('/v1/templates/tpl_legacydana')).status).toBe(404);
      expect((await dana.get('/v1/templates')).body).toMatchObject({ total: 1, templates: [{ id: 'tpl_legacydana' }] });

      expect((await admin.get('/v1/templates/tpl_legacyghost')).body).toMatchObject({ owner_id: null, created_by: 'ghost' });
      expect((await dana.get('/v1/templates/tpl_legacyghost')).status).toBe(404);
      expect((await admin.request('DELETE', '/v1/templates/tpl_legacyghost')).status).toBe(204);
    } finally {
      await server.stop();
    }
  } finally {
    await sql.end();
    await database.drop();
  }
});
