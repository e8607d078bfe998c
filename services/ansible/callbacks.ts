import { callbackKeyContext } from '../../core/credentials/seal-contexts';
import { callbackRunLimit, hostsAt, keysMatch, limitSelects, newHostConfigKey, readCallbackFields, type CallbackHost } from '../../core/ansible/callbacks';
import { DomainError, badRequest, conflict, forbidden, notFound, statusOf } from '../../core/errors';
import { encryptionKeyRequired, sealedValueFault } from '../../core/runs/run-secrets';
import {
  claimCallback,
  deleteCallbackKey,
  findExternalTemplate,
  getCallbackKey,
  noteExternalCallback,
  putCallbackKey,
  releaseCallbackClaim,
  settleCallbackClaim,
} from '../../store/callbacks';
import { getInventory } from '../../store/inventories';
import { InventoryError, type InventoryLayout } from '../../core/ansible/inventory';
import { cachedInventoryReading, resolveContent } from './inventories';
import { claimHit, type RateLimit } from '../../store/rate-limits';
import { getTemplate, getTemplateForUpdate, type Template } from '../../store/templates';
import { actorKindOf, type Caller } from '../../store/tokens';
import { requireAccess } from '../access/access';
import { recordMutation, withholdFields, type AuditOrigin } from '../audit/audit';
import type { ServerContext } from '../context';
import { firingOwner, launchUnattended, UnattendedSurveyRefusal } from '../runs/launch';
import { templateView } from '../runs/templates';

/**
 * Provisioning callbacks (spec part A 1.1 rule 2, 2.3, 4.6; part B 5.3, 7.3, 7.5): a host of a
 * template's stored inventory asks, with the template's host config key and no token, for the
 * template to run against itself.
 *
 * The key is minted (or rotated) by whoever manages the template, shown once, and kept only
 * sealed under the install key (context `callback:<template id>:host-config-key`); minting needs
 * SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT. A callback fires as the account that minted
 * the key, through launchUnattended, so the approval gate judges it as that account's own launch
 * and the run records source `callback` (id: the template) and its `limit`: the template's limit
 * and the calling host (`intersect`), or the calling host alone (`replace`).
 */

/** The flag that sets how many callbacks one address may send a minute. */
export const CALLBACK_RATE_FLAG = '--callback-rate-limit';
/** How long a callback's launch may hold its host's claim before the claim counts as abandoned. */
const LAUNCH_CLAIM_SECONDS = 60;

/** The versioned callback path of a template. */
export const callbackPath = (templateId: string) => `/v1/templates/${templateId}/callback`;

/**
 * Mints or rotates the template's host config key for a caller who manages it; the key is in the
 * answer this once. 409 when the template does not accept callbacks, or the server has no
 * encryption key.
 */
export async function mintCallbackKey(ctx: ServerContext, caller: Caller, origin: AuditOrigin, templateId: string) {
  const key = newHostConfigKey();
  const template = await recordMutation(ctx.sql, origin, 200, async (tx, entry) => {
    const current = await getTemplateForUpdate(tx, templateId);
    if (!current) throw notFound(`template ${templateId}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `minting the host config key of template ${current.id}` });
    if (!current.allow_callbacks) throw conflict(`template ${current.id} does not accept callbacks: set allow_callbacks to true first`, { field: 'allow_callbacks' });
    if (!ctx.sealer) throw encryptionKeyRequired('the host config key', [`template ${current.id}`]);
    const rotated = (await getCallbackKey(tx, current.id)) !== undefined;
    await putCallbackKey(tx, {
      template_id: current.id,
      key_sealed: ctx.sealer.seal(key, callbackKeyContext(current.id)),
      owner_account_id: caller.account.id,
      owner_actor_kind: actorKindOf(caller),
      created_by: caller.account.username,
    });
    entry.body = { kind: rotated ? 'template.callback_key_rotated' : 'template.callback_key_minted', template_id: current.id };
    return current;
  });
  return { template: templateView(template), host_config_key: key, callback_path: callbackPath(template.id) };
}

/** Revokes the template's key: every host holding it is refused from the commit on. 404 when it has none. */
export async function revokeCallbackKey(ctx: ServerContext, caller: Caller, origin: AuditOrigin, templateId: string): Promise<void> {
  await recordMutation(ctx.sql, origin, 204, async (tx, entry) => {
    const current = await getTemplateForUpdate(tx, templateId);
    if (!current) throw notFound(`template ${templateId}`);
    await requireAccess(tx, caller, current.id, 'manage', { action: `revoking the host config key of template ${current.id}` });
    if (!(await deleteCallbackKey(tx, current.id))) throw notFound(`host config key of template ${current.id}`);
    entry.body = { kind: 'template.callback_key_revoked', template_id: current.id };
  });
}

/**
 * The hosts of a stored inventory a callback can match, and its groups, or undefined when the
 * inventory is gone. The stored host list keeps names only, so the content is read on demand (INI
 * by Cairn's parser, YAML by PyYAML in the sandbox: runtime/inventory-jobs.ts) for its groups
 * (what the template's limit is evaluated over) and each host's `ansible_host` and
 * `ansible_ssh_host` as Ansible resolves them: its own entries over its groups' variables, a child
 * group's over its parent's, `all`'s lowest (core/inventory.ts resolveHostAddresses).
 */
export interface CallbackInventory {
  hosts: CallbackHost[];
  layout: InventoryLayout;
  /** The content, for a limit only Ansible can evaluate. */
  format: 'ini' | 'yaml';
  content: string;
}

/** A smart or constructed inventory is resolved at run start: it answers `resolvedAtStart` (a 409 of spec part B 7.5). */
async function storedInventoryHosts(ctx: ServerContext, inventoryId: string): Promise<CallbackInventory | { resolvedAtStart: 'smart' | 'constructed' } | undefined> {
  const inventory = await getInventory(ctx.sql, inventoryId);
  if (!inventory) return undefined;
  if (inventory.kind !== 'static') return { resolvedAtStart: inventory.kind };
  const { layout, hosts } = await cachedInventoryReading(ctx, inventory.format, inventory.content);
  return {
    layout,
    hosts: hosts.map((h) => ({ name: h.name, addresses: [h.ansible_host, h.ansible_ssh_host].filter((a): a is string => a !== undefined) })),
    format: inventory.format,
    content: inventory.content,
  };
}

/**
 * Whether the template's limit selects the calling host, as Ansible evaluates it over the stored
 * inventory's hosts and groups (core/host-patterns.ts); a limit holding a pattern only Ansible can
 * evaluate (a `~` regular expression, a subscript) is asked of `ansible --list-hosts` in the
 * sandbox. 409 when this server cannot run it or the limit cannot apply; 503 when the job failed.
 */
async function templateLimitSelects(ctx: ServerContext, limit: string, host: string, inventory: CallbackInventory): Promise<boolean> {
  const selected = limitSelects(limit, host, inventory.layout);
  if (selected !== undefined) return selected;
  try {
    return (await resolveContent(ctx, inventory.format, inventory.content, limit)).hosts.includes(host);
  } catch (err) {
    if (err instanceof InventoryError) {
      throw conflict(`this template cannot launch from a callback: it keeps the limit ${JSON.stringify(limit)}, which this server cannot evaluate: ${err.message}`, { field: 'limit' });
    }
    ctx.logger.error({ err }, "a callback could not evaluate its template's limit");
    throw new DomainError('unavailable', "the template's limit could not be evaluated; nothing was launched");
  }
}

/** A callback as received. */
export interface CallbackRequest {
  /** By template id (`/v1/templates/{id}/callback`) or by external id (`/api/v2/...`). */
  target: { templateId: string } | { externalId: string };
  /** The caller's socket address, IPv4-mapped addresses written as IPv4. */
  address: string;
  /** The body's fields, read from JSON or a form; throws a 400 when the body is neither. */
  readFields: () => Record<string, unknown>;
  /** The request's path as received, for the audit entry. */
  path: string;
}

/** A template's Ansible limit, when it keeps one (the ansible tool's templates); null for none. */
function templateLimit(template: Template): string | null {
  const limit = template.ansible?.limit;
  return typeof limit === 'string' && limit.trim() !== '' ? limit : null;
}

const WRONG_KEY = 'the host config key is not valid for this template';

/**
 * Answers a callback, in the order of spec part B 7.5 (every refusal an DomainError):
 *
 * 1. The address's rate: past `--callback-rate-limit` in the last minute, 429 with Retry-After
 *    (every callback counts, a wrong key too). A limit that cannot be counted is 503.
 * 2. The template: unknown, or at the external address one not bound or with the address off,
 *    403 as a wrong key; at the external address, one deleted 410.
 * 3. The body: `extra_vars` 400; `host_config_key` missing 400 naming it.
 * 4. Callbacks off, no key, or a key that does not match: 403. A key that cannot be opened here
 *    (the install key changed) 409 naming the fix.
 * 5. The inventory: none, or gone, or smart or constructed (resolved only when a run starts), 409
 *    (part B 7.3: naming, never quoting); the caller's address matching no host, or more than one, 400.
 * 6. With `callback_limit` `intersect` and a limit the template keeps: a host outside it 403; a
 *    limit only Ansible can evaluate that this server cannot (no inventory tool) 409, or whose
 *    evaluation failed 503. The run keeps the limit with the host (`<limit>,&<host>`).
 * 7. One callback run per host at a time: 409 while one is pending or running.
 * 8. The launch, as the key's minter: 201 naming the run (held, when a policy holds it); a survey
 *    nobody can answer 400; a deny rule 403; a configuration error 409; a failure of the server
 *    or its stores 503, nothing launched.
 *
 * Refusals before a host is matched record no chain entry; the run's submission records its own.
 */
export async function answerCallback(ctx: ServerContext, request: CallbackRequest): Promise<{ runId: string; status: string; host: string; templateId: string }> {
  await admitCallback(ctx, request.address);

  const template = await findTarget(ctx, request.target);
  const body = readCallbackFields(request.readFields());
  if (body.extraVars) throw badRequest('extra_vars: a callback may not carry extra_vars; the template supplies them', { field: 'extra_vars' });
  if (typeof body.hostConfigKey !== 'string' || body.hostConfigKey === '') {
    throw badRequest('host_config_key is required: the template\'s host config key, as a JSON field or a form field', { field: 'host_config_key' });
  }
  if (!template.allow_callbacks) throw forbidden(`template ${template.id} does not accept callbacks`);
  const key = await getCallbackKey(ctx.sql, template.id);
  if (!key) throw forbidden(WRONG_KEY);
  let stored: string;
  try {
    if (!ctx.sealer) throw new Error('no sealer');
    stored = ctx.sealer.open(key.key_sealed, callbackKeyContext(template.id));
  } catch (err) {
    throw conflict(sealedValueFault(`the host config key of template ${template.id}`, ctx.sealer, err));
  }
  if (!keysMatch(body.hostConfigKey, stored)) throw forbidden(WRONG_KEY);

  if (!template.inventory_id) throw conflict('this template cannot launch from a callback: it has no stored inventory to match the calling host in');
  let hosts: Awaited<ReturnType<typeof storedInventoryHosts>>;
  try {
    hosts = await storedInventoryHosts(ctx, template.inventory_id);
  } catch (err) {
    ctx.logger.error({ templateId: template.id, err }, "a callback could not read its template's inventory");
    throw new DomainError('bad_gateway', 'this template cannot launch: inventory content could not be read');
  }
  if (!hosts) throw conflict('this template cannot launch: inventory not found');
  if ('resolvedAtStart' in hosts) {
    throw conflict(`this template cannot launch from a callback: its inventory is a ${hosts.resolvedAtStart} inventory, resolved when a run starts, so the calling host cannot be matched in it`, {
      inventory_id: template.inventory_id,
    });
  }
  const matched = hostsAt(request.address, hosts.hosts);
  if (matched.length !== 1) {
    throw badRequest(
      matched.length === 0
        ? `no host of the template's inventory is at ${request.address}`
        : `${matched.length} hosts of the template's inventory are at ${request.address}; a callback needs exactly one`,
      { address: request.address, matched: matched.length },
    );
  }
  const host = matched[0];

  const limit = templateLimit(template);
  if (template.callback_limit === 'intersect' && limit !== null && !(await templateLimitSelects(ctx, limit, host, hosts))) {
    throw forbidden(`host ${host} is outside the limit this template keeps`, { host });
  }

  const claim = await claimCallback(ctx.sql, template.id, host, LAUNCH_CLAIM_SECONDS);
  if (!claim.claimed) {
    throw conflict(`a callback run for host ${host} is still ${claim.runId ? 'pending or running' : 'being launched'}${claim.runId ? ` (run ${claim.runId})` : ''}; call again when it has ended`, {
      host,
      ...(claim.runId ? { run_id: claim.runId } : {}),
    });
  }
  try {
    const owner = await firingOwner(ctx.sql, key.owner_account_id, `the account that minted this template's host config key (${key.created_by})`, 'a callback fires as that account: mint the key again').catch((err: unknown) => {
      throw err instanceof DomainError ? conflict(`this template cannot launch: ${err.message}`) : err;
    });
    const origin: AuditOrigin = {
      actor: owner.username,
      method: 'POST',
      path: request.path,
      request: { method: 'POST', path: request.path, query: {}, body: body.fields },
      withheld: new Set(),
    };
    withholdFields(origin, ['host_config_key']);
    if (ctx.faults.fire('callback-record-once')) throw new Error('injected fault: the callback could not be recorded');
    const { run } = await launchUnattended(
      ctx,
      origin,
      template,
      { kind: 'callback', id: template.id, name: host, owner, actorKind: key.owner_actor_kind },
      { limit: callbackRunLimit(limit, host, template.callback_limit) },
    );
    await settleCallbackClaim(ctx.sql, template.id, host, claim.claimedAt, run.id);
    if ('externalId' in request.target) await noteExternalCallback(ctx.sql, template.id);
    return { runId: run.id, status: run.status, host, templateId: template.id };
  } catch (err) {
    await releaseCallbackClaim(ctx.sql, template.id, host, claim.claimedAt).catch(() => undefined);
    throw launchRefusal(ctx, template, err);
  }
}

/** How a launch that started no run is answered (spec part B 7.3, 7.5). */
function launchRefusal(ctx: ServerContext, template: Template, err: unknown): DomainError {
  if (err instanceof UnattendedSurveyRefusal) return badRequest(err.message.replace('cannot launch unattended', 'cannot launch from a callback'), { questions: err.questions });
  if (err instanceof DomainError) {
    if (err.code === 'forbidden' || err.code === 'bad_gateway' || err.code === 'unavailable') return err;
    if (statusOf(err.code) < 500) return err.code === 'conflict' && err.message.startsWith('this template cannot launch: ') ? err : conflict(`this template cannot launch: ${err.message}`, err.details);
  }
  ctx.logger.error({ templateId: template.id, err }, 'a callback could not launch its template');
  return new DomainError('unavailable', 'the callback could not be recorded; nothing was launched');
}

/** Counts the callback against its address; 429 past the limit, 503 when it cannot be counted. */
async function admitCallback(ctx: ServerContext, address: string): Promise<void> {
  const limit: RateLimit = { bucket: 'callback_address', max: ctx.config.callbackRateLimit, windowSeconds: 60 };
  let claim;
  try {
    claim = await claimHit(ctx.sql, limit, address);
  } catch (err) {
    ctx.logger.error({ err }, 'the callback rate limit could not be counted');
    throw new DomainError('unavailable', 'the callback rate limit could not be evaluated; nothing was launched');
  }
  if (!claim.granted) {
    throw new DomainError('rate_limited',
      `too many callbacks from ${address}: at most ${limit.max} a minute (set by ${CALLBACK_RATE_FLAG}); try again in ${claim.retryAfterSeconds} seconds`,
      { limit: limit.max, window_seconds: limit.windowSeconds, flag: CALLBACK_RATE_FLAG, retry_after: claim.retryAfterSeconds },
      { 'Retry-After': String(claim.retryAfterSeconds) },
    );
  }
}

/** The template a callback names; refusals per spec part B 7.5 (an unknown one answers as a wrong key). */
async function findTarget(ctx: ServerContext, target: CallbackRequest['target']): Promise<Template> {
  if ('templateId' in target) {
    const template = /^tpl_[a-z0-9]+$/.test(target.templateId) ? await getTemplate(ctx.sql, target.templateId) : undefined;
    if (!template) throw forbidden(WRONG_KEY);
    return template;
  }
  const found = await findExternalTemplate(ctx.sql, target.externalId);
  if (!found) throw forbidden(WRONG_KEY);
  if ('deleted' in found) throw new DomainError('gone', `the template bound to external job template ${target.externalId} was deleted`);
  const template = await getTemplate(ctx.sql, found.templateId);
  if (!template) throw new DomainError('gone', `the template bound to external job template ${target.externalId} was deleted`);
  if (!template.external_callback) throw forbidden(WRONG_KEY);
  return template;
}
