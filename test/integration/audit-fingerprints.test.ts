import { createHash, randomBytes } from 'node:crypto';
import { canonicalJson } from '../../core/audit/canonical';
import { requestFingerprint } from '../../services/audit/audit';
import type { ApiClient } from '../support/http';
import { startTestServer, type TestServer } from '../support/server';

/**
 * A chain entry's fingerprint is readable by admins (GET /v1/audit) and, for a run's entries, by
 * any viewer (the evidence document). A secret in the request must leave no trace in it that a
 * reader could test guesses against: hashing every 4-digit guess must single none out.
 */

let t: TestServer;
let viewer: ApiClient;
let viewerId: string;

beforeAll(async () => {
  t = await startTestServer({
    SERVICE_ENCRYPTION_KEY: randomBytes(36).toString('base64url'),
    SERVICE_ENCRYPTION_SALT: randomBytes(18).toString('base64url'),
  });
  const vic = await t.api.post('/v1/users', { username: 'vic', role: 'viewer' });
  expect(vic.status).toBe(201);
  viewerId = vic.body.id;
  viewer = t.as((await t.api.post('/v1/tokens', { name: 'v', username: 'vic' })).body.token);
});
afterAll(async () => {
  await t?.stop();
});

const GUESSES = Array.from({ length: 10_000 }, (_, i) => String(i).padStart(4, '0'));

/**
 * The fingerprint as Cairn computed it before fields were withheld by schema: the canonical request
 * hashed unsalted, with only keys named like secrets withheld. Anyone can rebuild it from a guess.
 */
const NAMED_LIKE_SECRETS = /^(password|current_password|new_password|reason|masked_reason|text|token|secret|.*_secret|.*_token)$/i;
function nameOnlyFingerprint(method: string, path: string, body: unknown): string {
  const withhold = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(withhold);
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, NAMED_LIKE_SECRETS.test(k) ? '[withheld]' : withhold(v)]));
  };
  const text = canonicalJson({ method, path, query: {}, body: withhold(body) });
  return 'sha256:' + createHash('sha256').update(text, 'utf8').digest('hex');
}

/** Which guesses rebuild `fingerprint` under each way of computing it. */
function guessesMatching(fingerprint: string, method: string, path: string, bodyFor: (guess: string) => unknown, withheld: string[]) {
  const old: string[] = [];
  const current: string[] = [];
  for (const guess of GUESSES) {
    if (nameOnlyFingerprint(method, path, bodyFor(guess)) === fingerprint) old.push(guess);
    if (requestFingerprint(method, path, {}, bodyFor(guess), new Set(withheld)) === fingerprint) current.push(guess);
  }
  return { old, current };
}

async function chainEntry(predicate: (entry: any) => boolean) {
  const entries = (await t.api.get('/v1/audit?limit=1000')).body.entries;
  const found = entries.filter(predicate);
  expect(found).toHaveLength(1);
  return found[0];
}

test('a 4-digit secret answer cannot be recovered from the launch entry’s fingerprint, in the audit list or the evidence document', async () => {
  const template = await t.api.post('/v1/templates', {
    name: 'pin launch',
    tool: 'bash',
    command: 'true',
    survey: [
      { var: 'pin', type: 'secret', pattern: '[0-9]{4}', required: true },
      { var: 'site', type: 'text' },
    ],
  });
  expect(template.status).toBe(201);
  // The viewer reads the template's runs, and so their evidence.
  expect((await t.api.post('/v1/grants', { object: template.body.id, permission: 'read', user_id: viewerId })).status).toBe(201);
  const path = `/v1/templates/${template.body.id}/launch`;
  const bodyFor = (pin: string) => ({ answers: { pin, site: 'ams' } });
  const launched = await t.api.post(path, bodyFor('4821'));
  expect(launched.status).toBe(201);

  const listed = await chainEntry((e) => e.path === path);
  const evidence = await viewer.get(`/v1/runs/${launched.body.id}/evidence?format=json`);
  expect(evidence.status).toBe(200);
  const inEvidence = evidence.body.chain.filter((e: any) => e.path === path);
  expect(inEvidence).toHaveLength(1);
  expect(inEvidence[0].fingerprint).toBe(listed.fingerprint);

  const { old, current } = guessesMatching(listed.fingerprint, 'POST', path, bodyFor, ['answers.pin']);
  // The name-only fingerprint gives the answer away; withheld by the survey, every guess fits alike.
  expect(old).toEqual([]);
  expect(current).toHaveLength(GUESSES.length);

  // What is not secret still counts: another site is another fingerprint.
  expect(requestFingerprint('POST', path, {}, { answers: { pin: '4821', site: 'fra' } }, new Set(['answers.pin']))).not.toBe(listed.fingerprint);
});

test('a 4-digit secret default cannot be recovered from the fingerprint of a template create or update', async () => {
  // `password` is an alias of secret: the schema, not the name of the key, makes the default secret.
  const bodyFor = (name: string) => (pin: string) => ({
    name,
    tool: 'bash',
    command: 'true',
    survey: [
      { var: 'site', type: 'text', default: 'ams' },
      { var: 'pin', type: 'password', default: pin },
    ],
  });
  const created = await t.api.post('/v1/templates', bodyFor('pin default')('4821'));
  expect(created.status).toBe(201);
  const createEntry = await chainEntry((e) => e.body.kind === 'template.created' && e.body.template_id === created.body.id);
  const onCreate = guessesMatching(createEntry.fingerprint, 'POST', '/v1/templates', bodyFor('pin default'), ['survey[1].default']);
  expect(onCreate.old).toEqual([]);
  expect(onCreate.current).toHaveLength(GUESSES.length);

  const path = `/v1/templates/${created.body.id}`;
  const updated = await t.api.request('PUT', path, { body: bodyFor('pin default, renamed')('7390') });
  expect(updated.status).toBe(200);
  const updateEntry = await chainEntry((e) => e.body.kind === 'template.updated' && e.body.template_id === created.body.id);
  const onUpdate = guessesMatching(updateEntry.fingerprint, 'PUT', path, bodyFor('pin default, renamed'), ['survey[1].default']);
  expect(onUpdate.old).toEqual([]);
  expect(onUpdate.current).toHaveLength(GUESSES.length);
});

test('a password is withheld by the schema that takes it', async () => {
  const body = (password: string) => ({ username: 'pat', role: 'operator', password });
  expect((await t.api.post('/v1/users', body('correct horse battery'))).status).toBe(201);
  const entry = await chainEntry((e) => e.body.kind === 'user.created' && e.path === '/v1/users' && e.body.role === 'operator');
  expect(entry.fingerprint).toBe(requestFingerprint('POST', '/v1/users', {}, body('any other password at all'), new Set(['password'])));
  expect(entry.fingerprint).not.toBe(requestFingerprint('POST', '/v1/users', {}, { ...body('x'), role: 'viewer' }, new Set(['password'])));
});
