import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../../embedded/postgres';
import { tempDir } from '../support/temp';

const quiet = () => undefined;

async function canConnect(url: string): Promise<boolean> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    await sql`SELECT 1`;
    return true;
  } catch {
    return false;
  } finally {
    await sql.end({ timeout: 1 });
  }
}

const withPassword = (url: string, password: string) => {
  const u = new URL(url);
  u.password = password;
  return u.toString();
};

const state = (dataDir: string) => JSON.parse(readFileSync(path.join(dataDir, 'postgres.state.json'), 'utf8'));

test("each install's embedded PostgreSQL has its own random password, kept in a state file only the server reads", async () => {
  const dataDir = path.join(tempDir('cairn-pg'), 'data');
  const pg = await startEmbeddedPostgres(dataDir, quiet);
  try {
    expect(await canConnect(pg.url)).toBe(true);
    expect(await canConnect(withPassword(pg.url, 'cairn'))).toBe(false);
    const password = decodeURIComponent(new URL(pg.url).password);
    expect(password.length).toBeGreaterThanOrEqual(24);
    expect(state(dataDir).password).toBe(password);
    expect(statSync(path.join(dataDir, 'postgres.state.json')).mode & 0o777).toBe(0o600);
    // Nobody else may list the data dir (a root server leaves it passable for the postgres account).
    expect(statSync(dataDir).mode & 0o044).toBe(0);
  } finally {
    await pg.stop();
  }
  const other = await startEmbeddedPostgres(path.join(tempDir('cairn-pg'), 'data'), quiet);
  try {
    expect(new URL(other.url).password).not.toBe(new URL(pg.url).password);
  } finally {
    await other.stop();
  }
});

test('an install made with the old fixed password gets a random one on its next start', async () => {
  const dataDir = path.join(tempDir('cairn-pg-legacy'), 'data');
  const first = await startEmbeddedPostgres(dataDir, quiet);
  const sql = postgres(first.url, { max: 1, onnotice: () => {} });
  await sql.unsafe(`ALTER ROLE cairn PASSWORD 'cairn'`);
  await sql.end();
  await first.stop();
  const { password: _, ...legacy } = state(dataDir);
  writeFileSync(path.join(dataDir, 'postgres.state.json'), JSON.stringify(legacy));

  const second = await startEmbeddedPostgres(dataDir, quiet);
  try {
    expect(new URL(second.url).password).not.toBe('cairn');
    expect(await canConnect(second.url)).toBe(true);
    expect(await canConnect(withPassword(second.url, 'cairn'))).toBe(false);
    expect(state(dataDir).password).toBe(decodeURIComponent(new URL(second.url).password));
  } finally {
    await second.stop();
  }
});

(process.getuid?.() === 0 ? test : test.skip)('as root, a data dir inside a private home directory still gets its cluster', async () => {
  const home = tempDir('cairn-home');
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const dataDir = path.join(home, 'checkout', 'data');
  const pg = await startEmbeddedPostgres(dataDir, quiet);
  try {
    expect(await canConnect(pg.url)).toBe(true);
    const location = readFileSync(path.join(dataDir, 'postgres.location'), 'utf8').trim();
    expect(location).toMatch(/^\/var\/lib\/cairn\/clusters\//);
  } finally {
    await pg.stop();
    rmSync(readFileSync(path.join(dataDir, 'postgres.location'), 'utf8').trim(), { recursive: true, force: true });
  }
});
