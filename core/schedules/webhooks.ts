import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256, sha256Hex } from '../sha256';

/**
 * Webhook deliveries from git forges (spec part A 4.7, part B 5.1): the hook's secrets, the
 * signature check over the raw body, and what a push says. Pure: no HTTP, SQL or clock.
 *
 * A delivery's headers are read by lowercase name, as Node gives them.
 */
export type DeliveryHeaders = Readonly<Record<string, string | string[] | undefined>>;

/** A hook's path token: 32 random bytes; the path `/hooks/<token>` is one half of the hook's credential. */
export function newHookToken(): string {
  return `cairn_hook_${randomBytes(32).toString('base64url')}`;
}

/** A trigger's signing secret: 32 random bytes, the key of the HMAC a forge signs deliveries with. */
export function newSigningSecret(): string {
  return `cairn_whsec_${randomBytes(32).toString('base64url')}`;
}

/** The sealing context of a trigger's signing secret, so a sealed secret moved to another trigger does not open. */

/**
 * The headers a delivery may be authenticated by, in the forms the major forges send:
 *
 * - `hmac`: HMAC-SHA256 of the raw body under the signing secret, in hex. GitHub and Gitea or
 *   Forgejo send `X-Hub-Signature-256: sha256=<hex>`; Gitea also `X-Gitea-Signature: <hex>`,
 *   Forgejo `X-Forgejo-Signature`, and both the Gogs form `X-Gogs-Signature`. Bitbucket Cloud
 *   sends `X-Hub-Signature: sha256=<hex>`.
 * - `token`: the signing secret itself, sent as a shared token (GitLab's `X-Gitlab-Token`).
 *
 * GitHub's own `X-Hub-Signature` carries SHA-1 (`sha1=<hex>`): that header counts only in its
 * `sha256=` form (`countedOnlyWithPrefix`), so a SHA-1 value is neither checked nor counted.
 */
const SIGNATURE_HEADERS: readonly { header: string; kind: 'hmac' | 'token'; prefix: string; countedOnlyWithPrefix?: true }[] = [
  { header: 'x-hub-signature-256', kind: 'hmac', prefix: 'sha256=' },
  { header: 'x-hub-signature', kind: 'hmac', prefix: 'sha256=', countedOnlyWithPrefix: true },
  { header: 'x-gitea-signature', kind: 'hmac', prefix: '' },
  { header: 'x-forgejo-signature', kind: 'hmac', prefix: '' },
  { header: 'x-gogs-signature', kind: 'hmac', prefix: '' },
  { header: 'x-gitlab-token', kind: 'token', prefix: '' },
];

/** The signature headers Cairn reads, for the words of a refusal. */
export const SIGNATURE_HEADER_NAMES = ['X-Hub-Signature-256', 'X-Hub-Signature', 'X-Gitea-Signature', 'X-Forgejo-Signature', 'X-Gogs-Signature', 'X-Gitlab-Token'] as const;

/** A signature header's value as received, when the delivery carries that header in a form that counts. */
function signatureValue(headers: DeliveryHeaders, entry: (typeof SIGNATURE_HEADERS)[number]): string | undefined {
  const value = headers[entry.header];
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value.join(', ') : value;
  return entry.countedOnlyWithPrefix && !text.toLowerCase().startsWith(entry.prefix) ? undefined : text;
}

export type SignatureVerdict =
  /** Every signature header the delivery carries matches, and it carries at least one. */
  | { verdict: 'valid'; headers: string[] }
  /** It carries none. */
  | { verdict: 'missing' }
  /** At least one it carries does not match (named, never its value). */
  | { verdict: 'invalid'; header: string };

/** Whether the delivery carries any signature header at all; a check is needed only then, or when one is required. */
export function hasSignature(headers: DeliveryHeaders): boolean {
  return SIGNATURE_HEADERS.some((entry) => signatureValue(headers, entry) !== undefined);
}

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;

/**
 * Checks every signature header the delivery carries against the signing secret, over the exact
 * bytes received. Each comparison takes the same time whatever the bytes compared: the HMAC is
 * compared as 32 bytes with timingSafeEqual, and a shared token by its SHA-256, so neither its
 * length nor its first differing byte shows in the time taken. A header given twice (Node joins
 * the values) or not in its form is a mismatch. The secret is keyed as its UTF-8 bytes.
 */
export function checkSignature(headers: DeliveryHeaders, rawBody: Uint8Array, secret: string): SignatureVerdict {
  const matched: string[] = [];
  let expectedHmac: Buffer | undefined;
  for (const entry of SIGNATURE_HEADERS) {
    const { header, kind, prefix } = entry;
    const text = signatureValue(headers, entry);
    if (text === undefined) continue;
    let ok: boolean;
    if (kind === 'token') {
      // Node reads a header's bytes as Latin-1 characters: compared as those bytes, the secret's UTF-8.
      ok = timingSafeEqual(sha256(Buffer.from(text, 'latin1')), sha256(Buffer.from(secret, 'utf8')));
    } else {
      expectedHmac ??= createHmac('sha256', secret).update(rawBody).digest();
      const hex = text.startsWith(prefix) ? text.slice(prefix.length) : '';
      ok = HEX_SHA256.test(hex) && timingSafeEqual(Buffer.from(hex, 'hex'), expectedHmac);
    }
    if (!ok) return { verdict: 'invalid', header: displayName(header) };
    matched.push(displayName(header));
  }
  return matched.length ? { verdict: 'valid', headers: matched } : { verdict: 'missing' };
}

/** The `X-Hub-Signature-256` value a sender computes: for tests, the benchmark and documentation. */
export function hubSignature256(rawBody: Uint8Array | string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(rawBody).digest('hex')}`;
}

const displayName = (header: string) => SIGNATURE_HEADER_NAMES.find((name) => name.toLowerCase() === header) ?? header;

/** The forges whose push payloads Cairn reads. */
export type Forge = 'github' | 'gitlab' | 'gitea' | 'bitbucket';

/** What a push says, as the run's extra vars carry it (see {@link pushExtraVars}). */
export interface Push {
  forge: Forge;
  /** The full ref pushed, `refs/heads/main` or `refs/tags/v1.2.0`. */
  ref: string;
  /** The branch name for a branch push, else "". */
  branch: string;
  /** The tag name for a tag push, else "". */
  tag: string;
  /** The commit the ref now points at. */
  commit: string;
  /** The repository's full name, `owner/name` (GitLab: the project's path with its namespace). */
  repository: string;
  /** Who pushed: the forge's username. */
  pusher: string;
  /** The push deleted the ref: there is nothing to run. */
  deleted: boolean;
}

/** What a delivery is, read from its event header and body. */
export type DeliveryReading =
  | { kind: 'push'; push: Push }
  /** A forge's connectivity check (GitHub's `ping` when a hook is made). */
  | { kind: 'ping'; forge: Forge }
  /** An event other than a push; `event` is the forge's own name for it. */
  | { kind: 'other'; forge: Forge; event: string }
  /** A push whose body lacks what every push carries; `missing` names the field. */
  | { kind: 'unreadable'; forge: Forge | undefined; missing: string };

const headerText = (headers: DeliveryHeaders, name: string): string | undefined => {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * The forge and its event name, from the event headers. Gitea and Forgejo also send GitHub's
 * headers for compatibility, so their own are read first; Bitbucket's is `X-Event-Key`. A delivery with no event header is
 * read by its body: GitLab's carries `object_kind`; any other is read as GitHub's shape.
 */
export function forgeEvent(headers: DeliveryHeaders, body: Record<string, unknown>): { forge: Forge | undefined; event: string } {
  for (const name of ['x-forgejo-event', 'x-gitea-event', 'x-gogs-event']) {
    const event = headerText(headers, name);
    if (event !== undefined) return { forge: 'gitea', event };
  }
  const bitbucket = headerText(headers, 'x-event-key');
  if (bitbucket !== undefined) return { forge: 'bitbucket', event: bitbucket };
  const github = headerText(headers, 'x-github-event');
  if (github !== undefined) return { forge: 'github', event: github };
  const gitlab = headerText(headers, 'x-gitlab-event');
  if (gitlab !== undefined) return { forge: 'gitlab', event: gitlab };
  if (typeof body.object_kind === 'string') return { forge: 'gitlab', event: body.object_kind === 'tag_push' ? 'Tag Push Hook' : body.object_kind === 'push' ? 'Push Hook' : body.object_kind };
  return { forge: undefined, event: 'push' };
}

const PUSH_EVENTS: Record<Forge, readonly string[]> = {
  github: ['push'],
  gitea: ['push'],
  gitlab: ['Push Hook', 'Tag Push Hook'],
  // Bitbucket Cloud's push; Bitbucket Data Center's `repo:refs_changed` has another shape and is not read.
  bitbucket: ['repo:push'],
};

const ZERO_COMMIT = /^0+$/;

/** Reads a parsed delivery body: a push with what it says, a ping, another event, or a push missing a field. */
export function readDelivery(headers: DeliveryHeaders, body: unknown): DeliveryReading {
  const object = isObject(body) ? body : {};
  const { forge, event } = forgeEvent(headers, object);
  if (forge === 'github' && event === 'ping') return { kind: 'ping', forge };
  if (forge !== undefined && !PUSH_EVENTS[forge].includes(event)) return { kind: 'other', forge, event };
  if (forge === 'bitbucket') return readBitbucketPush(object);
  const read = forge ?? 'github';

  const ref = text(object.ref);
  if (!ref) return { kind: 'unreadable', forge, missing: 'ref' };
  const after = text(object.after);
  const deleted = object.deleted === true || (after !== '' && ZERO_COMMIT.test(after));
  // GitLab names the commit checked out after the push; it is null when the push deleted the ref.
  const commit = read === 'gitlab' ? text(object.checkout_sha) || after : after;
  if (!commit && !deleted) return { kind: 'unreadable', forge, missing: read === 'gitlab' ? 'checkout_sha' : 'after' };

  const repository =
    read === 'gitlab' ? text(field(object.project, 'path_with_namespace')) : text(field(object.repository, 'full_name'));
  const pusher =
    read === 'gitlab'
      ? text(object.user_username) || text(object.user_name)
      : read === 'gitea'
        ? text(field(object.pusher, 'login')) || text(field(object.pusher, 'username'))
        : text(field(object.pusher, 'name'));
  return {
    kind: 'push',
    push: {
      forge: read,
      ref,
      branch: ref.startsWith('refs/heads/') ? ref.slice('refs/heads/'.length) : '',
      tag: ref.startsWith('refs/tags/') ? ref.slice('refs/tags/'.length) : '',
      commit: deleted ? '' : commit,
      repository,
      pusher,
      deleted,
    },
  };
}

/**
 * A Bitbucket Cloud `repo:push`: its first change (`push.changes[0]`; a push of several refs at
 * once is read by the first), the ref from `new` (from `old` when the push deleted it: `new` is
 * null), the commit `new.target.hash`, the repository's `full_name`, and who pushed: the actor's
 * `nickname`, else its `display_name`.
 */
function readBitbucketPush(object: Record<string, unknown>): DeliveryReading {
  const changes = field(object.push, 'changes');
  const change = Array.isArray(changes) && isObject(changes[0]) ? changes[0] : undefined;
  if (!change) return { kind: 'unreadable', forge: 'bitbucket', missing: 'push.changes' };
  const deleted = change.new === null || change.new === undefined;
  const state = deleted ? change.old : change.new;
  const name = text(field(state, 'name'));
  const type = text(field(state, 'type'));
  if (!name || (type !== 'branch' && type !== 'tag')) return { kind: 'unreadable', forge: 'bitbucket', missing: `push.changes[0].${deleted ? 'old' : 'new'}.name` };
  const commit = deleted ? '' : text(field(field(state, 'target'), 'hash'));
  if (!deleted && !commit) return { kind: 'unreadable', forge: 'bitbucket', missing: 'push.changes[0].new.target.hash' };
  const ref = `refs/${type === 'tag' ? 'tags' : 'heads'}/${name}`;
  return {
    kind: 'push',
    push: {
      forge: 'bitbucket',
      ref,
      branch: type === 'branch' ? name : '',
      tag: type === 'tag' ? name : '',
      commit,
      repository: text(field(object.repository, 'full_name')),
      pusher: text(field(object.actor, 'nickname')) || text(field(object.actor, 'display_name')),
      deleted,
    },
  };
}

/**
 * What a push gives the run, as extra vars over the template's own and under its survey's
 * answers (so a survey question of the same name wins). Every name is always set, "" when the
 * push does not say, so a tool can rely on each variable being there.
 */
export function pushExtraVars(push: Push): Record<string, string> {
  return {
    git_forge: push.forge,
    git_ref: push.ref,
    git_branch: push.branch,
    git_tag: push.tag,
    git_commit: push.commit,
    git_repository: push.repository,
    git_pusher: push.pusher,
  };
}

/** Where a delivery's id is, by forge: a redelivery carries the same one. */
const DELIVERY_ID_HEADERS = ['x-github-delivery', 'x-gitlab-event-uuid', 'x-gitea-delivery', 'x-forgejo-delivery', 'x-gogs-delivery', 'x-request-uuid'];

/** The delivery's id, or undefined when it carries none. */
export function deliveryIdOf(headers: DeliveryHeaders): string | undefined {
  for (const name of DELIVERY_ID_HEADERS) {
    const id = headerText(headers, name)?.trim();
    if (id) return id;
  }
  return undefined;
}

/**
 * The Idempotency-Key a delivery's launch is submitted with, so a redelivery (same trigger, same
 * delivery id) returns the run the first one started. It is kept within the header's 255 bytes
 * (spec part B 8): a long delivery id is replaced by its SHA-256.
 */
export function deliveryIdempotencyKey(triggerId: string, deliveryId: string): string {
  return `hook:${triggerId}:${deliveryKey(deliveryId)}`;
}

/**
 * How a delivery id is kept: as sent up to 128 bytes, else its SHA-256 (`sha256:<hex>`). A kept
 * id keeps itself, so the Idempotency-Key made from it is the one made from the id as sent.
 */
export function deliveryKey(deliveryId: string): string {
  return Buffer.byteLength(deliveryId) <= 128 ? deliveryId : `sha256:${sha256Hex(deliveryId)}`;
}

/**
 * The JSON text of a delivery body: the body itself, or for a form post (GitHub's
 * `application/x-www-form-urlencoded` content type) its `payload` field. Undefined when a form
 * post has no `payload`.
 */
export function deliveryJsonText(text: string, contentType: string | undefined): string | undefined {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') return text;
  return new URLSearchParams(text).get('payload') ?? undefined;
}

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
const field = (value: unknown, key: string): unknown => (isObject(value) ? value[key] : undefined);
const text = (value: unknown): string => (typeof value === 'string' ? value : '');
