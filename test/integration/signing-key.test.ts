import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { loadConfig } from '../../core/config';
import { createLogger } from '../../cli/serve';
import { createTestDatabase } from '../support/database';
import { startServerInProcess, testSettings } from '../support/server';

const keys = {
  SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
  SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
};

async function serveOn(databaseUrl: string, extra: Record<string, string> = {}) {
  const config = loadConfig({}, testSettings(databaseUrl, extra));
  return startServerInProcess(config, createLogger(config));
}

async function storedIdentity(databaseUrl: string): Promise<Record<string, unknown>> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`SELECT value FROM settings WHERE key = 'install_identity'`;
    return row.value as Record<string, unknown>;
  } finally {
    await sql.end();
  }
}

test("with an encryption key the install's signing key is stored sealed, and signs as before", async () => {
  const database = await createTestDatabase();
  try {
    const server = await serveOn(database.url, keys);
    try {
      const stored = await storedIdentity(database.url);
      expect(stored.private_jwk).toBeUndefined();
      expect(typeof stored.private_jwk_sealed).toBe('string');
      expect(JSON.stringify(stored)).not.toMatch(/"d":/);
      const seal = await (await fetch(`${server.url}/.well-known/seal.json`)).json();
      expect(seal.key_id).toBe(stored.key_id);
      const bundle = await fetch(`${server.url}/v1/audit/bundle`, { headers: { authorization: `Bearer ${server.adminToken}` } });
      expect(bundle.status).toBe(200);
    } finally {
      await server.stop();
    }
  } finally {
    await database.drop();
  }
});

test('a key stored in clear is sealed by the first start with an encryption key; without the key that install refuses to start', async () => {
  const database = await createTestDatabase();
  try {
    const plain = await serveOn(database.url);
    await plain.stop();
    const before = await storedIdentity(database.url);
    expect(before.private_jwk).toBeDefined();

    const sealed = await serveOn(database.url, keys);
    await sealed.stop();
    const after = await storedIdentity(database.url);
    expect(after.private_jwk).toBeUndefined();
    expect(after.key_id).toBe(before.key_id);

    await expect(serveOn(database.url)).rejects.toThrow(/signing key.*SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT/);
  } finally {
    await database.drop();
  }
});
