import { loadConfig } from '../../core/config';
import { hostVerdict, noHostFailure, parseAnsibleResults } from '../../core/ansible/ansible-results';
import { ansibleSpecOf, hostPatternFault } from '../../core/ansible/ansible-spec';
import { detectFormat, expandHostPattern, iniHostEntries, iniHosts, iniHostVars, InventoryError, keepMaskedSourceVars, maskInventory, maskSourceVars } from '../../core/ansible/inventory';
import { finalStateOf } from '../../core/runs/run-outcome';
import { ansibleArgs } from '../../tools/ansible';

describe('inventory rules', () => {
  test('host ranges expand numerically with padding, alphabetically and with steps', () => {
    expect(expandHostPattern('web[01:03].x', 100)).toEqual(['web01.x', 'web02.x', 'web03.x']);
    expect(expandHostPattern('db-[a:c]', 100)).toEqual(['db-a', 'db-b', 'db-c']);
    expect(expandHostPattern('h[1:9:4]', 100)).toEqual(['h1', 'h5', 'h9']);
    expect(expandHostPattern('r[1:2]-[a:b]', 100)).toEqual(['r1-a', 'r1-b', 'r2-a', 'r2-b']);
    expect(() => expandHostPattern('h[5:1]', 100)).toThrow(InventoryError);
    expect(() => expandHostPattern('h[1:1000]', 10)).toThrow(/more than/);
  });

  test('INI host names: group sections, ungrouped hosts, ports; vars and children name none', () => {
    const content = 'ungrouped1\n[web]\nw1 a=1\nw2:2222\n[web:vars]\nx=1\n[all:children]\nweb\n; comment\n';
    expect(iniHosts(content)).toEqual(['ungrouped1', 'w1', 'w2']);
    expect(() => iniHosts('[web:other]\n')).toThrow(InventoryError);
    expect(() => iniHosts('[web]\na=1\n')).toThrow(InventoryError);
  });

  test('INI host addresses: ansible_host and ansible_ssh_host from host lines, quoted or not, merged per host, over group vars; comments read as none', () => {
    const content = [
      '[web]',
      'web1 ansible_host=10.0.0.5 ansible_user=deploy',
      "web2 ansible_ssh_host='10.0.0.6' # ansible_host=10.0.0.99",
      'web[3:4] ansible_host="10.0.0.7"',
      'web5:2222 other="a b" ansible_host=10.0.0.8',
      'plain',
      '[db]',
      'web1 ansible_ssh_host=10.0.0.9',
      '[db:vars]',
      'ansible_host=10.9.9.9',
    ].join('\n');
    expect(iniHostEntries(content)).toEqual([
      { name: 'web1', ansible_host: '10.0.0.5', ansible_ssh_host: '10.0.0.9' },
      { name: 'web2', ansible_ssh_host: '10.0.0.6' },
      { name: 'web3', ansible_host: '10.0.0.7' },
      { name: 'web4', ansible_host: '10.0.0.7' },
      { name: 'web5', ansible_host: '10.0.0.8' },
      { name: 'plain' },
    ]);
    expect(iniHosts(content)).toEqual(['web1', 'web2', 'web3', 'web4', 'web5', 'plain']);
    expect({ ...iniHostVars(' a=1 b="x y" c=\'q\' d=e=f #g=1') }).toEqual({ a: '1', b: 'x y', c: 'q', d: 'e=f' });
    expect({ ...iniHostVars(' __proto__=1 ansible_host=1.2.3.4') }).toMatchObject({ ansible_host: '1.2.3.4' });
  });

  test('INI group vars resolve as Ansible merges them: all lowest, a child group over its parent, priority then name at one depth, the host over all', () => {
    const content = [
      'lone',
      '[all:vars]',
      'ansible_host=10.0.0.1',
      '[prod:children]',
      'web',
      '[prod:vars]',
      'ansible_host = "10.0.0.2"',
      '[web]',
      'w1',
      'w2 ansible_host=10.0.0.9',
      '[web:vars]',
      'ansible_host=10.0.0.3',
      '[b]',
      'x',
      '[a]',
      'x',
      '[b:vars]',
      'ansible_ssh_host=10.0.0.5',
      '[a:vars]',
      'ansible_ssh_host=10.0.0.4',
      'ansible_group_priority=5',
      '[db]',
      'd1',
      '[db:children]',
      'prod',
    ].join('\n');
    expect(iniHostEntries(content)).toEqual([
      { name: 'lone', ansible_host: '10.0.0.1' },
      { name: 'w1', ansible_host: '10.0.0.3' },
      { name: 'w2', ansible_host: '10.0.0.9' },
      { name: 'x', ansible_host: '10.0.0.1', ansible_ssh_host: '10.0.0.4' },
      { name: 'd1', ansible_host: '10.0.0.1' },
    ]);
  });

  test('source_vars masking: secret-looking keys at any depth, keyed_groups keys kept; a masked value sent back keeps the stored one', () => {
    const stored = { compose: { ansible_become_password: "'hunter2'", tier: 'x' }, keyed_groups: [{ key: 'tags', prefix: 't' }], vault: { api_token: 'abc' } };
    const masked = maskSourceVars(stored);
    expect(masked).toEqual({ compose: { ansible_become_password: '[masked]', tier: 'x' }, keyed_groups: [{ key: 'tags', prefix: 't' }], vault: { api_token: '[masked]' } });
    expect(keepMaskedSourceVars({ ...masked, compose: { ...(masked.compose as object), tier: 'y' } }, stored)).toEqual({ vars: { ...stored, compose: { ansible_become_password: "'hunter2'", tier: 'y' } } });
    expect(keepMaskedSourceVars({ compose: { db_secret: '[masked]' } }, stored)).toEqual({ unknown: 'source_vars.compose.db_secret' });
    expect(keepMaskedSourceVars({ note: '[masked]' }, null)).toEqual({ vars: { note: '[masked]' } });
  });

  test('format detection', () => {
    expect(detectFormat('# c\nall:\n  hosts: {}\n')).toBe('yaml');
    expect(detectFormat('---\nall: {}\n')).toBe('yaml');
    expect(detectFormat('[web]\nh1\n')).toBe('ini');
    expect(detectFormat('h1 ansible_host=1.2.3.4\n')).toBe('ini');
  });

  test('masking: secret-looking INI words and YAML values, vault blocks; the rest kept', () => {
    expect(maskInventory('h1 ansible_password=abc ansible_user=me api_token="a b"', 'ini')).toBe('h1 ansible_password=[masked] ansible_user=me api_token=[masked]');
    const yaml = 'all:\n  vars:\n    db_secret: |\n      one\n      two\n    pw: !vault |\n      $ANSIBLE_VAULT\n      abc\n    region: eu\n    ansible_become_pass: "x"\n';
    expect(maskInventory(yaml, 'yaml')).toBe('all:\n  vars:\n    db_secret: [masked]\n    pw: [masked]\n    region: eu\n    ansible_become_pass: [masked]\n');
  });
});

describe('ansible results', () => {
  const lines = [
    '{"type":"task","play":"p","task":"t1","started":1000,"finished":1001.5,"hosts":{"a":"changed","b":"unreachable","c":"bogus"}}',
    'not json',
    '{"type":"host","host":"a","counts":{"ok":2,"changed":1}}',
    '{"type":"host","host":"b","counts":{"unreachable":1,"ok":-3}}',
    '{"type":"end","hosts":2}',
  ].join('\n');

  test('lines are read and checked; verdicts and durations follow', () => {
    const results = parseAnsibleResults(lines);
    expect(results.ended).toBe(true);
    expect(results.hosts).toEqual([
      { host: 'a', status: 'changed', counts: { ok: 2, changed: 1, failed: 0, unreachable: 0, skipped: 0, rescued: 0, ignored: 0 } },
      { host: 'b', status: 'unreachable', counts: { ok: 0, changed: 0, failed: 0, unreachable: 1, skipped: 0, rescued: 0, ignored: 0 } },
    ]);
    expect(results.tasks[0]).toMatchObject({ seq: 0, play: 'p', task: 't1', hosts: { a: 'changed', b: 'unreachable' }, counts: { changed: 1, unreachable: 1 }, duration_ms: 1500 });
    expect(noHostFailure(results)).toBeUndefined();
    expect(noHostFailure(parseAnsibleResults('{"type":"end","hosts":0}'))).toMatch(/matched no host/);
    expect(noHostFailure(parseAnsibleResults(''))).toBeUndefined();
    expect(hostVerdict({ ok: 0, changed: 0, failed: 0, unreachable: 0, skipped: 3, rescued: 0, ignored: 0 })).toBe('skipped');
  });

  test('the no-host outcome is failed with exit code 0', () => {
    expect(finalStateOf({ kind: 'exited_failed', exitCode: 0, message: 'why' }, null)).toEqual({ status: 'failed', error: 'why', exit_code: 0 });
  });
});

describe('the ansible command line', () => {
  test('controls become options as --name=value; verbosity clamps; dry run is --check; the playbook follows --', () => {
    const spec = {
      command: '',
      extra_vars: {},
      ...ansibleSpecOf('ansible', { playbook: '-x.yml', limit: '-h1', tags: ['a', 'b'], skip_tags: ['c'], forks: 5, verbosity: 9, diff_mode: true, inventory: 'hosts' }),
      dry_run: true as const,
    };
    expect(ansibleArgs(spec)).toEqual([
      'ansible-playbook', '--inventory=hosts', '--limit=-h1', '--tags=a,b', '--skip-tags=c', '--forks=5', '-vvvv', '--diff', '--check',
      '-e', '@extra_vars.json', '--', '-x.yml',
    ]);
    expect(ansibleArgs({ command: 'x', extra_vars: {}, inventory_id: 'inv_1' }, { inventory: { format: 'yaml', content: '' } })).toEqual([
      'ansible-playbook', '--inventory=inventory.yml', '-e', '@extra_vars.json', '--', 'playbook.yml',
    ]);
  });

  test('other tools keep none of the fields; empty values are left off', () => {
    expect(ansibleSpecOf('bash', { limit: 'h1' })).toEqual({});
    expect(ansibleSpecOf('ansible', { limit: '', tags: [], forks: 0, verbosity: 0, diff_mode: false, playbook: null })).toEqual({});
  });
});

describe('--retain-history', () => {
  test('unset keeps everything; below 500 is taken as 500; not a number is refused', () => {
    expect(loadConfig({}, {}).retainHistory).toBeUndefined();
    expect(loadConfig({ retainHistory: '10' }, {}).retainHistory).toBe(500);
    expect(loadConfig({}, { CAIRN_RETAIN_HISTORY: '2000' }).retainHistory).toBe(2000);
    expect(() => loadConfig({ retainHistory: 'lots' }, {})).toThrow(/--retain-history/);
  });
});

describe('host patterns a user may give (limit, host_filter)', () => {
  test.each(['@/etc/hostname', 'web:@/etc/hostname', 'all,@x', 'web, @x', 'web @x', 'all,!web:@x', '@'])('%j is refused: Ansible would read a file', (pattern) => {
    expect(hostPatternFault(pattern)).toMatch(/beginning with @/);
  });

  test.each(['!web', 'web*:&prod', '~regex', '~(web|db)[0-9]+\\.example', 'web,db', 'all:!db', 'web[1:3]', 'fe80::1', 'user@host', 'web:&prod:!web3', ''])('%j is accepted', (pattern) => {
    expect(hostPatternFault(pattern)).toBeUndefined();
  });
});
