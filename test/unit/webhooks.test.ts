import {
  checkSignature,
  deliveryIdempotencyKey,
  deliveryIdOf,
  deliveryJsonText,
  hasSignature,
  hubSignature256,
  newHookToken,
  newSigningSecret,
  pushExtraVars,
  readDelivery,
} from '../../core/schedules/webhooks';
import { loggablePath } from '../../api/hook-path';
import { bitbucketPush, forgeHeaders, giteaPush, githubPush, gitlabPush, hmacHex, SAMPLE_PUSH, SAMPLE_PUSH_VARS } from '../support/forge-deliveries';

const SECRET = 'cairn_whsec_test-secret-0123456789abcdef';
const body = JSON.stringify(githubPush());
const bytes = Buffer.from(body);

describe('signature check over the raw body', () => {
  test.each(['github', 'gitlab', 'gitea', 'bitbucket'] as const)('a %s delivery signed with the secret is valid', (forge) => {
    const verdict = checkSignature(forgeHeaders(forge, body, SECRET), bytes, SECRET);
    expect(verdict.verdict).toBe('valid');
  });

  test('a Gitea delivery is valid only when every signature it carries matches', () => {
    const headers = forgeHeaders('gitea', body, SECRET);
    expect(checkSignature(headers, bytes, SECRET)).toEqual({ verdict: 'valid', headers: ['X-Hub-Signature-256', 'X-Gitea-Signature', 'X-Gogs-Signature'] });
    expect(checkSignature({ ...headers, 'x-gitea-signature': hmacHex(body, 'another secret') }, bytes, SECRET)).toEqual({ verdict: 'invalid', header: 'X-Gitea-Signature' });
  });

  test('Forgejo signature header is checked too', () => {
    expect(checkSignature({ 'x-forgejo-signature': hmacHex(body, SECRET) }, bytes, SECRET).verdict).toBe('valid');
    expect(checkSignature({ 'x-forgejo-signature': hmacHex(body, 'x') }, bytes, SECRET).verdict).toBe('invalid');
  });

  test('upper-case hex is the same signature', () => {
    expect(checkSignature({ 'x-hub-signature-256': `sha256=${hmacHex(body, SECRET).toUpperCase()}` }, bytes, SECRET).verdict).toBe('valid');
  });

  test('a signature under another secret, over other bytes, or in another form is invalid', () => {
    const wrongSecret = { 'x-hub-signature-256': hubSignature256(body, 'not the secret') };
    const otherBytes = { 'x-hub-signature-256': hubSignature256(body + ' ', SECRET) };
    const noPrefix = { 'x-hub-signature-256': hmacHex(body, SECRET) };
    const truncated = { 'x-hub-signature-256': hubSignature256(body, SECRET).slice(0, -2) };
    const notHex = { 'x-hub-signature-256': `sha256=${'z'.repeat(64)}` };
    const twice = { 'x-hub-signature-256': `${hubSignature256(body, SECRET)}, ${hubSignature256(body, SECRET)}` };
    for (const headers of [wrongSecret, otherBytes, noPrefix, truncated, notHex, twice]) {
      expect(checkSignature(headers, bytes, SECRET)).toEqual({ verdict: 'invalid', header: 'X-Hub-Signature-256' });
    }
  });

  test('the signature covers the bytes as sent: the same JSON re-serialized does not match', () => {
    const pretty = JSON.stringify(JSON.parse(body), null, 2);
    expect(checkSignature({ 'x-hub-signature-256': hubSignature256(body, SECRET) }, Buffer.from(pretty), SECRET).verdict).toBe('invalid');
  });

  test("GitLab's shared token must equal the secret exactly", () => {
    expect(checkSignature({ 'x-gitlab-token': SECRET }, bytes, SECRET).verdict).toBe('valid');
    for (const token of ['', SECRET.slice(0, -1), `${SECRET} `, SECRET.toUpperCase()]) {
      expect(checkSignature({ 'x-gitlab-token': token }, bytes, SECRET)).toEqual({ verdict: 'invalid', header: 'X-Gitlab-Token' });
    }
  });

  test('no signature header at all is missing; the SHA-1 X-Hub-Signature alone does not count', () => {
    const unsigned = forgeHeaders('github', body, SECRET, { unsigned: true });
    expect(hasSignature(unsigned)).toBe(false);
    expect(checkSignature(unsigned, bytes, SECRET)).toEqual({ verdict: 'missing' });
    const sha1Only = { 'x-hub-signature': `sha1=${'0'.repeat(40)}` };
    expect(hasSignature(sha1Only)).toBe(false);
    expect(checkSignature(sha1Only, bytes, SECRET)).toEqual({ verdict: 'missing' });
  });

  test("GitHub's documented example delivery checks: its secret, with spaces and an apostrophe, and its payload", () => {
    // "Validating webhook deliveries" (GitHub Docs), testing the webhook payload validation:
    // secret "It's a Secret to Everybody", payload "Hello, World!", and the signature it gives.
    const secret = "It's a Secret to Everybody";
    const headers = { 'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17' };
    expect(checkSignature(headers, Buffer.from('Hello, World!'), secret)).toEqual({ verdict: 'valid', headers: ['X-Hub-Signature-256'] });
    expect(checkSignature(headers, Buffer.from('Hello, World?'), secret)).toEqual({ verdict: 'invalid', header: 'X-Hub-Signature-256' });
    // GitLab carries such a secret as its token, in a header: spaces inside it arrive as sent.
    expect(checkSignature({ 'x-gitlab-token': secret }, bytes, secret).verdict).toBe('valid');
  });

  test("a secret beyond ASCII is compared by its UTF-8 bytes: the HMAC's key, and GitLab's token as its header's bytes", () => {
    const secret = 'Schlüssel für die Hooks, bitte';
    expect(checkSignature({ 'x-hub-signature-256': `sha256=${hmacHex(body, secret)}` }, bytes, secret).verdict).toBe('valid');
    // Node hands a header's bytes over as Latin-1 characters: the token's UTF-8 bytes, read so.
    expect(checkSignature({ 'x-gitlab-token': Buffer.from(secret, 'utf8').toString('latin1') }, bytes, secret).verdict).toBe('valid');
    expect(checkSignature({ 'x-gitlab-token': secret }, bytes, secret).verdict).toBe('invalid');
  });

  test("Bitbucket's X-Hub-Signature carries SHA-256 and is checked; GitHub's SHA-1 form of the same header is not counted", () => {
    const bitbucket = { 'x-hub-signature': `sha256=${hmacHex(body, SECRET)}` };
    expect(hasSignature(bitbucket)).toBe(true);
    expect(checkSignature(bitbucket, bytes, SECRET)).toEqual({ verdict: 'valid', headers: ['X-Hub-Signature'] });
    expect(checkSignature({ 'x-hub-signature': `sha256=${hmacHex(body, 'another secret')}` }, bytes, SECRET)).toEqual({ verdict: 'invalid', header: 'X-Hub-Signature' });
    expect(checkSignature({ 'x-hub-signature': `sha256=${hmacHex(body, SECRET).slice(2)}` }, bytes, SECRET)).toEqual({ verdict: 'invalid', header: 'X-Hub-Signature' });
    // GitHub sends its SHA-1 X-Hub-Signature beside X-Hub-Signature-256: only the SHA-256 one counts.
    expect(checkSignature(forgeHeaders('github', body, SECRET), bytes, SECRET)).toEqual({ verdict: 'valid', headers: ['X-Hub-Signature-256'] });
  });

  test('hubSignature256 is what GitHub sends', () => {
    expect(hubSignature256('Hello, World!', "It's a Secret to Everybody")).toBe(
      // The example in GitHub's documentation on validating webhook deliveries.
      'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    );
  });
});

describe('what a push says', () => {
  const expected = { ref: 'refs/heads/main', branch: 'main', tag: '', commit: SAMPLE_PUSH.commit, repository: 'acme/web', pusher: 'octocat', deleted: false };

  test.each([
    ['github', githubPush()],
    ['gitlab', gitlabPush()],
    ['gitea', giteaPush()],
  ] as const)('a %s branch push gives ref, branch, commit, repository and pusher', (forge, payload) => {
    const reading = readDelivery(forgeHeaders(forge, '', SECRET), payload);
    expect(reading).toEqual({ kind: 'push', push: { forge, ...expected } });
  });

  test('a Bitbucket Cloud repo:push gives the first change\'s ref, its commit, the repository and the actor', () => {
    expect(readDelivery(forgeHeaders('bitbucket', '', SECRET), bitbucketPush())).toEqual({ kind: 'push', push: { forge: 'bitbucket', ...expected } });
    const tag = readDelivery(forgeHeaders('bitbucket', '', SECRET), bitbucketPush({ ...SAMPLE_PUSH, ref: 'refs/tags/v3.1.0' }));
    expect(tag).toMatchObject({ kind: 'push', push: { forge: 'bitbucket', ref: 'refs/tags/v3.1.0', tag: 'v3.1.0', branch: '', commit: SAMPLE_PUSH.commit } });
    // A deleted branch: `new` is null, `closed` true; the ref is read from `old`.
    const payload = bitbucketPush() as { push: { changes: Record<string, unknown>[] } };
    payload.push.changes[0] = { ...payload.push.changes[0], new: null, closed: true };
    expect(readDelivery(forgeHeaders('bitbucket', '', SECRET), payload)).toMatchObject({ kind: 'push', push: { forge: 'bitbucket', ref: 'refs/heads/main', deleted: true, commit: '' } });
    // Without a nickname, the display name.
    expect(readDelivery(forgeHeaders('bitbucket', '', SECRET), bitbucketPush(SAMPLE_PUSH, { actor: { display_name: 'Mona Lisa' } }))).toMatchObject({ push: { pusher: 'Mona Lisa' } });
    expect(readDelivery(forgeHeaders('bitbucket', '', SECRET, { event: 'pullrequest:created' }), {})).toEqual({ kind: 'other', forge: 'bitbucket', event: 'pullrequest:created' });
    expect(readDelivery(forgeHeaders('bitbucket', '', SECRET), { push: { changes: [] } })).toEqual({ kind: 'unreadable', forge: 'bitbucket', missing: 'push.changes' });
    expect(deliveryIdOf(forgeHeaders('bitbucket', '', SECRET, { delivery: 'b-1' }))).toBe('b-1');
  });

  test('a tag push names the tag and no branch', () => {
    const facts = { ...SAMPLE_PUSH, ref: 'refs/tags/v1.4.2' };
    for (const [forge, payload] of [['github', githubPush(facts)], ['gitlab', gitlabPush(facts)], ['gitea', giteaPush(facts)]] as const) {
      const reading = readDelivery(forgeHeaders(forge, '', SECRET, forge === 'gitlab' ? { event: 'Tag Push Hook' } : {}), payload);
      expect(reading).toMatchObject({ kind: 'push', push: { forge, ref: 'refs/tags/v1.4.2', branch: '', tag: 'v1.4.2' } });
    }
  });

  test('a push that deletes its ref is marked deleted, with no commit', () => {
    const zero = '0'.repeat(40);
    expect(readDelivery(forgeHeaders('github', '', SECRET), githubPush(SAMPLE_PUSH, { deleted: true, after: zero }))).toMatchObject({ kind: 'push', push: { deleted: true, commit: '' } });
    expect(readDelivery(forgeHeaders('gitlab', '', SECRET), gitlabPush(SAMPLE_PUSH, { after: zero, checkout_sha: null }))).toMatchObject({ kind: 'push', push: { deleted: true, commit: '' } });
  });

  test("a ping is a ping; another event is named with its forge's word", () => {
    expect(readDelivery(forgeHeaders('github', '', SECRET, { event: 'ping' }), { zen: 'Keep it logically awesome.', hook_id: 1 })).toEqual({ kind: 'ping', forge: 'github' });
    expect(readDelivery(forgeHeaders('github', '', SECRET, { event: 'issues' }), { action: 'opened' })).toEqual({ kind: 'other', forge: 'github', event: 'issues' });
    expect(readDelivery(forgeHeaders('gitlab', '', SECRET, { event: 'Merge Request Hook' }), { object_kind: 'merge_request' })).toEqual({ kind: 'other', forge: 'gitlab', event: 'Merge Request Hook' });
    expect(readDelivery(forgeHeaders('gitea', '', SECRET, { event: 'create' }), {})).toEqual({ kind: 'other', forge: 'gitea', event: 'create' });
  });

  test('Gitea is told apart from GitHub though it sends GitHub headers too', () => {
    expect(readDelivery(forgeHeaders('gitea', '', SECRET), giteaPush())).toMatchObject({ push: { forge: 'gitea', pusher: 'octocat' } });
  });

  test('without event headers, the body says: GitLab by object_kind, otherwise the GitHub shape', () => {
    expect(readDelivery({}, gitlabPush())).toMatchObject({ kind: 'push', push: { forge: 'gitlab', repository: 'acme/web' } });
    expect(readDelivery({}, githubPush())).toMatchObject({ kind: 'push', push: { forge: 'github', repository: 'acme/web' } });
  });

  test('a push without a ref or a commit is unreadable, naming the field', () => {
    expect(readDelivery(forgeHeaders('github', '', SECRET), { after: 'abc' })).toEqual({ kind: 'unreadable', forge: 'github', missing: 'ref' });
    expect(readDelivery(forgeHeaders('github', '', SECRET), { ref: 'refs/heads/x' })).toEqual({ kind: 'unreadable', forge: 'github', missing: 'after' });
    expect(readDelivery(forgeHeaders('gitlab', '', SECRET), { ref: 'refs/heads/x' })).toEqual({ kind: 'unreadable', forge: 'gitlab', missing: 'checkout_sha' });
    expect(readDelivery({}, [1, 2])).toEqual({ kind: 'unreadable', forge: undefined, missing: 'ref' });
  });

  test('the extra vars a push gives: every name always set', () => {
    const reading = readDelivery(forgeHeaders('github', '', SECRET), githubPush(SAMPLE_PUSH, { pusher: {} }));
    if (reading.kind !== 'push') throw new Error('expected a push');
    expect(pushExtraVars(reading.push)).toEqual({ ...SAMPLE_PUSH_VARS, git_pusher: '' });
  });
});

describe('deliveries and their ids', () => {
  test.each(['github', 'gitlab', 'gitea'] as const)("a %s delivery's id is read from its header", (forge) => {
    expect(deliveryIdOf(forgeHeaders(forge, '', SECRET, { delivery: 'd-1' }))).toBe('d-1');
  });

  test('no delivery header, no id', () => {
    expect(deliveryIdOf({ 'content-type': 'application/json' })).toBeUndefined();
    expect(deliveryIdOf({ 'x-github-delivery': '  ' })).toBeUndefined();
  });

  test('the idempotency key names trigger and delivery, and stays within 255 bytes', () => {
    expect(deliveryIdempotencyKey('trg_1', 'abc')).toBe('hook:trg_1:abc');
    const long = deliveryIdempotencyKey('trg_01hzzzzzzzzzzzzzzzzzzzzzzz', 'é'.repeat(1000));
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(255);
    expect(long).not.toBe(deliveryIdempotencyKey('trg_01hzzzzzzzzzzzzzzzzzzzzzzz', 'é'.repeat(1001)));
  });

  test("GitHub's form-encoded delivery carries its JSON in payload", () => {
    const json = JSON.stringify(githubPush());
    const form = new URLSearchParams({ payload: json }).toString();
    expect(deliveryJsonText(form, 'application/x-www-form-urlencoded')).toBe(json);
    expect(deliveryJsonText(form, 'application/x-www-form-urlencoded; charset=utf-8')).toBe(json);
    expect(deliveryJsonText('a=b', 'application/x-www-form-urlencoded')).toBeUndefined();
    expect(deliveryJsonText(json, 'application/json')).toBe(json);
    expect(deliveryJsonText(json, undefined)).toBe(json);
  });

  test('tokens and secrets are fresh and long', () => {
    expect(newHookToken()).toMatch(/^cairn_hook_[A-Za-z0-9_-]{43}$/);
    expect(newSigningSecret()).toMatch(/^cairn_whsec_[A-Za-z0-9_-]{43}$/);
    expect(newHookToken()).not.toBe(newHookToken());
  });
});

test("server logs show a hook's path without its token, and every other path as it is", () => {
  const token = newHookToken();
  expect(loggablePath(`/hooks/${token}`)).toBe('/hooks/[token]');
  for (const path of ['/v1/triggers', '/v1/triggers/trg_1/rotate-secret', '/hooks', '/hooks/a/b']) expect(loggablePath(path)).toBe(path);
});
