import { parseFlags, loadConfig } from '../../core/config';
import { beforeHistory, changeOutcome } from '../../core/ansible/estate';
import { FACTS_MANIFEST, FACTS_PREFIX, factCacheInvocation, factCacheOf, maskFacts, MAX_FACTS_BYTES, sameFactCache, skipReason } from '../../core/ansible/facts';
import { sha256Hex } from '../../core/sha256';
import { stateDigest } from '../../core/runs/state-digest';
import { ansibleTool } from '../../tools/ansible';

describe('the fact cache rules', () => {
  test('a template turns it on only for an ansible job template with an inventory', () => {
    const base = { use_fact_cache: true, fact_cache_timeout: 60, inventory_id: 'inv_1', tool: 'ansible', kind: 'job' };
    expect(factCacheOf(base)).toEqual({ timeout_seconds: 60 });
    expect(factCacheOf({ ...base, use_fact_cache: false })).toBeUndefined();
    expect(factCacheOf({ ...base, inventory_id: null })).toBeUndefined();
    expect(factCacheOf({ ...base, tool: 'bash' })).toBeUndefined();
    expect(factCacheOf({ ...base, kind: 'workflow' })).toBeUndefined();
    expect(sameFactCache(undefined, undefined)).toBe(true);
    expect(sameFactCache({ timeout_seconds: 0 }, undefined)).toBe(false);
    expect(sameFactCache({ timeout_seconds: 0 }, { timeout_seconds: 30 })).toBe(false);
  });

  test("the tool's files and environment: Ansible's jsonfile cache in the work dir, a manifest of what was supplied", () => {
    const none = factCacheInvocation({}, { facts: { h1: '{}' } }, sha256Hex);
    expect(none).toEqual({ files: {}, env: {} });
    const on = factCacheInvocation({ fact_cache: { timeout_seconds: 0 } }, { facts: { h1: '{"a": 1}', 'bad/host': '{}', '..': '{}' } }, sha256Hex);
    expect(Object.keys(on.files).sort()).toEqual([FACTS_MANIFEST, `${FACTS_PREFIX}h1`].sort());
    expect(JSON.parse(on.files[FACTS_MANIFEST])).toEqual({ h1: sha256Hex('{"a": 1}') });
    expect(on.env).toMatchObject({ ANSIBLE_CACHE_PLUGIN: 'jsonfile', ANSIBLE_CACHE_PLUGIN_CONNECTION: '.', ANSIBLE_CACHE_PLUGIN_PREFIX: FACTS_PREFIX, ANSIBLE_GATHERING: 'smart' });

    const spec = { command: '- hosts: all', extra_vars: {}, inventory_id: 'inv_1', fact_cache: { timeout_seconds: 0 } };
    const invocation = ansibleTool.invocation(spec, { inventory: { format: 'ini', content: 'h1\n' }, facts: { facts: { h1: '{}' } } });
    expect(invocation.files[`${FACTS_PREFIX}h1`]).toBe('{}');
    expect(invocation.env.ANSIBLE_CACHE_PLUGIN).toBe('jsonfile');
    const plain = ansibleTool.invocation({ command: '- hosts: all', extra_vars: {} });
    expect(plain.env).not.toHaveProperty('ANSIBLE_CACHE_PLUGIN');
    expect(Object.keys(plain.files).some((f) => f.startsWith(FACTS_PREFIX) || f === FACTS_MANIFEST)).toBe(false);
  });

  test('the approval binds to the setting: it is in the state digest, and absent leaves a digest as it was', () => {
    const settings = { tool: 'ansible', queue: '', timeout_seconds: 60 };
    const spec = { command: 'x', extra_vars: {} };
    const plain = stateDigest({ ...settings, spec });
    expect(stateDigest({ ...settings, spec: { ...spec, fact_cache: undefined } })).toBe(plain);
    const on = stateDigest({ ...settings, spec: { ...spec, fact_cache: { timeout_seconds: 0 } } });
    expect(on).not.toBe(plain);
    expect(stateDigest({ ...settings, spec: { ...spec, fact_cache: { timeout_seconds: 30 } } })).not.toBe(on);
  });

  test('a document over 1 MiB, or not an object, is not kept', () => {
    expect(skipReason(MAX_FACTS_BYTES, {})).toBeUndefined();
    expect(skipReason(MAX_FACTS_BYTES + 1, undefined)).toMatch(/over the 1 MiB/);
    expect(skipReason(10, [])).toMatch(/not a JSON object/);
  });

  test('masking: values under secret-looking keys, at any depth', () => {
    expect(maskFacts({ a: 1, db_password: 'x', nested: { private_key: 'k', ok: [{ token: 't', fine: 2 }] } })).toEqual({
      a: 1,
      db_password: '[masked]',
      nested: { private_key: '[masked]', ok: [{ token: '[masked]', fine: 2 }] },
    });
  });
});

describe('estate and change rules', () => {
  test('before_history', () => {
    expect(beforeHistory(new Date(1), null)).toBe(false);
    expect(beforeHistory(new Date(1), new Date(2))).toBe(true);
    expect(beforeHistory(new Date(2), new Date(2))).toBe(false);
  });

  test("a change's outcome", () => {
    expect(changeOutcome({})).toBe('none');
    expect(changeOutcome({ succeeded: 2, running: 1 })).toBe('in_progress');
    expect(changeOutcome({ succeeded: 2 })).toBe('succeeded');
    expect(changeOutcome({ failed: 1 })).toBe('failed');
    expect(changeOutcome({ failed: 1, succeeded: 1 })).toBe('partial');
    expect(changeOutcome({ canceled: 1, succeeded: 1 })).toBe('partial');
    expect(changeOutcome({ rejected: 2 })).toBe('rejected');
    expect(changeOutcome({ rejected: 1, canceled: 1 })).toBe('canceled');
  });
});

describe('--fact-cache-admin-only', () => {
  test('a switch: bare means true, a value or the variable sets it', () => {
    expect(parseFlags(['--fact-cache-admin-only']).values.factCacheAdminOnly).toBe('true');
    expect(parseFlags(['--fact-cache-admin-only', '--listen', '127.0.0.1:1']).values).toMatchObject({ factCacheAdminOnly: 'true', listen: '127.0.0.1:1' });
    expect(parseFlags(['--fact-cache-admin-only=false']).values.factCacheAdminOnly).toBe('false');
    expect(loadConfig({}, {}).factCacheAdminOnly).toBe(false);
    expect(loadConfig({ factCacheAdminOnly: 'true' }, {}).factCacheAdminOnly).toBe(true);
    expect(loadConfig({}, { CAIRN_FACT_CACHE_ADMIN_ONLY: '1' }).factCacheAdminOnly).toBe(true);
    expect(() => loadConfig({}, { CAIRN_FACT_CACHE_ADMIN_ONLY: 'maybe' })).toThrow(/--fact-cache-admin-only/);
  });
});
