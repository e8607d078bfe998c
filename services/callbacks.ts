import { createHash } from 'node:crypto';
import type { InventoryFormat, InventoryHost } from '../core/inventory';
import {
  callbackKeyContext,
  hostsAt,
  keysMatch,
  limitSelects,
  newHostConfigKey,
  readCallbackFields,
  type CallbackHost,
} from '../core/callbacks';
import { ApiError, badRequest, conflict, forbidden, notFound } from '../core/errors';
import { encryptionKeyRequired, sealedValueFault } from '../core/run-secrets';
import { getAccountById } from '../store/accounts';
import {
  claimCallback,
  deleteCallbackKey,
  findExternalTemplate,
  getCallbackKey,
  noteExternalCallback,
  putCallbackKey,
  releaseCallbackClaim,
  setTemplateExtras,
  settleCallbackClaim,
} from '../store/callbacks';
import type { Db } from '../store/db';
import { getInventory } from '../store/inventories';
import { inventoryHostAddresses } from './inventories';
import { claimHit, type RateLimit } from '../store/rate-limits';
import { getTemplate, getTemplateForUpdate, type Template } from '../store/templates';
import { actorKindOf, type Caller } from '../store/tokens';
import { requireAccess } from './access';
import { recordMutation, withholdFields, type AuditOrigin } from './audit';
import type { ServerContext } from './context';
import { launchUnattended, UnattendedSurveyRefusal } from './launch';
import { templateView, type TemplateDraft } from './templates';

/**
 * Provisioning callbacks (spec part A 1.1 rule 2, 2.3, 4.6; part B 5.3, 7.3, 7.5): a host of a
 * template's stored inventory asks, with the template's host config key and no token, for the
 * template to run against itself.
 *
 * The key is minted (or rotated) by whoever manages the template, shown once, and kept only
 * sealed under the install key (context `callback:<template id>:host-config-key`); minting needs
 * SERVICE_ENCRYPTION_KEY and SERVICE_ENCRYPTION_SALT. A callback fires as the account that minted
 * the key, through launchUnattended, so the approval gate judges it as that account's own launch
 * and the run records source `callback` (id: the template) and `limit` the calling host.
 */

/** The flag that sets how many callbacks one address may send a minute. */
export const CALLBACK_RATE_FLAG = '--callback-rate-limit';
/** How long a callback's launch may hold its host's claim before the claim counts as abandoned. */
const LAUNCH_CLAIM_SECONDS = 60;

/**
 * Writes a template's project and callback settings in the transaction that saved the rest
 * (`services/templates.ts` create and replace). On update an omitted `allow_callbacks`,
 * `callback_limit` or `external_callback` keeps the stored value (spec part A 2.3); turning
 * `allow_callbacks` off revokes the key. Naming a project needs use on it; `external_callback`
 * may be turned on only for a template an import bound to an external id.
 */
export async function saveTemplateExtras(tx: Db, caller: Caller, template: Template, draft: TemplateDraft, current?: Template): Promise<Template> {
  const projectId = draft.project_id ?? null;
  if (projectId !== null && projectId !== current?.project_id) {
    if (template.kind !== 'job') throw badRequest('project_id: a workflow template sets no project_id; it applies to a job template', { field: 'project_id' });
    await requireAccess(tx, caller, projectId, 'use', { action: `running template ${template.id} in project ${projectId}`, field: 'project_id' });
  }
  const allow = draft.allow_callbacks ?? current?.allow_callbacks ?? false;
  const external = draft.external_callback ?? current?.external_callback ?? false;
  if (external && !template.external_job_template_id) {
    throw badRequest('external_callback: the external-compatible callback address may be turned on only for a template an import bound to an external job template', {
      field: 'external_callback',
    });
  }
  const saved = await setTemplateExtras(tx, template.id, {
    project_id: projectId,
    allow_callbacks: allow,
    callback_limit: draft.callback_limit ?? current?.callback_limit ?? 'intersect',
    external_callback: external,
  });
  if (!allow) await deleteCallbackKey(tx, template.id);
  return saved!;
}

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
 * The hosts of a stored inventory a callback can match, or undefined when the inventory is gone.
 * The stored host list keeps names only, so the content is read on demand (INI by Cairn's parser,
 * YAML by PyYAML in the sandbox: activities/inventory-jobs.ts) for each host's `ansible_host` and
 * `ansible_ssh_host` as Ansible resolves them: its own entries over its groups' variables, a child
 * group's over its parent's, `all`'s lowest (core/inventory.ts resolveHostAddresses).
 */
export type CallbackHostSource = (ctx: ServerContext, inventoryId: string) => Promise<CallbackHost[] | { resolvedAtStart: 'smart' | 'constructed' } | undefined>;

/**
 * The few contents resolved last, by hash, so callbacks from many hosts of one inventory (a fleet
 * booting) read it once; a content that cannot be read is not kept.
 */
const ADDRESS_CACHE_SIZE = 4;
const addressCache = new Map<string, Promise<readonly Readonly<InventoryHost>[]>>();

function cachedHostAddresses(ctx: ServerContext, format: InventoryFormat, content: string): Promise<readonly Readonly<InventoryHost>[]> {
  const key = createHash('sha256').update(format).update('\0').update(content).digest('base64');
  let resolved = addressCache.get(key);
  if (resolved) {
    // The most recently used last.
    addressCache.delete(key);
  } else {
    resolved = inventoryHostAddresses(ctx, format, content);
    resolved.catch(() => addressCache.delete(key));
    if (addressCache.size >= ADDRESS_CACHE_SIZE) addressCache.delete(addressCache.keys().next().value!);
  }
  addressCache.set(key, resolved);
  return resolved;
}

/** A smart or constructed inventory is resolved at run start: it answers `resolvedAtStart` (a 409 of spec part B 7.5). */
export const storedInventoryHosts: CallbackHostSource = async (ctx, inventoryId) => {
  const inventory = await getInventory(ctx.sql, inventoryId);
  if (!inventory) return undefined;
  if (inventory.kind !== 'static') return { resolvedAtStart: inventory.kind };
  const hosts = await cachedHostAddresses(ctx, inventory.format, inventory.content);
  return hosts.map((h) => ({ name: h.name, addresses: [h.ansible_host, h.ansible_ssh_host].filter((a): a is string => a !== undefined) }));
};

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
 * Answers a callback, in the order of spec part B 7.5 (every refusal an ApiError):
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
 *    limit that cannot be evaluated without the inventory tool 409.
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
  let hosts: Awaited<ReturnType<CallbackHostSource>>;
  try {
    hosts = await storedInventoryHosts(ctx, template.inventory_id);
  } catch (err) {
    ctx.logger.error({ templateId: template.id, err }, "a callback could not read its template's inventory");
    throw new ApiError(502, 'this template cannot launch: inventory content could not be read');
  }
  if (!hosts) throw conflict('this template cannot launch: inventory not found');
  if ('resolvedAtStart' in hosts) {
    throw conflict(`this template cannot launch from a callback: its inventory is a ${hosts.resolvedAtStart} inventory, resolved when a run starts, so the calling host cannot be matched in it`, {
      inventory_id: template.inventory_id,
    });
  }
  const matched = hostsAt(request.address, hosts);
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
  if (template.callback_limit === 'intersect' && limit !== null) {
    const selected = limitSelects(limit, host, hosts.map((h) => h.name));
    if (selected === undefined) {
      throw conflict(`this template cannot launch from a callback: it keeps the limit ${JSON.stringify(limit)}, which this server cannot evaluate without the inventory tool`);
    }
    if (!selected) throw forbidden(`host ${host} is outside the limit this template keeps`, { host });
  }

  const claim = await claimCallback(ctx.sql, template.id, host, LAUNCH_CLAIM_SECONDS);
  if (!claim.claimed) {
    throw conflict(`a callback run for host ${host} is still ${claim.runId ? 'pending or running' : 'being launched'}${claim.runId ? ` (run ${claim.runId})` : ''}; call again when it has ended`, {
      host,
      ...(claim.runId ? { run_id: claim.runId } : {}),
    });
  }
  try {
    const owner = await getAccountById(ctx.sql, key.owner_account_id);
    if (!owner) throw conflict(`this template cannot launch: the account that minted its host config key (${key.created_by}) no longer exists; mint the key again`);
    if (owner.role === 'viewer') throw conflict(`this template cannot launch: ${owner.username}, who minted its host config key, is now a viewer; a callback fires as that account`);
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
      { limit: host },
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
function launchRefusal(ctx: ServerContext, template: Template, err: unknown): ApiError {
  if (err instanceof UnattendedSurveyRefusal) return badRequest(err.message.replace('cannot launch unattended', 'cannot launch from a callback'), { questions: err.questions });
  if (err instanceof ApiError) {
    if (err.status === 403 || err.status === 502 || err.status === 503) return err;
    if (err.status < 500) return err.status === 409 && err.message.startsWith('this template cannot launch: ') ? err : conflict(`this template cannot launch: ${err.message}`, err.details);
  }
  ctx.logger.error({ templateId: template.id, err }, 'a callback could not launch its template');
  return new ApiError(503, 'the callback could not be recorded; nothing was launched');
}

/** Counts the callback against its address; 429 past the limit, 503 when it cannot be counted. */
async function admitCallback(ctx: ServerContext, address: string): Promise<void> {
  const limit: RateLimit = { bucket: 'callback_address', max: ctx.config.callbackRateLimit, windowSeconds: 60 };
  let claim;
  try {
    claim = await claimHit(ctx.sql, limit, address);
  } catch (err) {
    ctx.logger.error({ err }, 'the callback rate limit could not be counted');
    throw new ApiError(503, 'the callback rate limit could not be evaluated; nothing was launched');
  }
  if (!claim.granted) {
    throw new ApiError(
      429,
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
  if ('deleted' in found) throw new ApiError(410, `the template bound to external job template ${target.externalId} was deleted`);
  const template = await getTemplate(ctx.sql, found.templateId);
  if (!template) throw new ApiError(410, `the template bound to external job template ${target.externalId} was deleted`);
  if (!template.external_callback) throw forbidden(WRONG_KEY);
  return template;
}
