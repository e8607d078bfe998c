import { inventoryHostNames, resolveInventory, yamlLayoutAnswer } from '../../runtime/inventory-jobs';
import { iniHostEntries, resolveHostAddresses } from '../../core/ansible/inventory';
import { yamlLayout } from '../../tools/ansible-inventory';
import type { JobSandbox } from '../../runtime/sandboxed-job';
import { loadConfig } from '../../core/config';
import { InventoryError } from '../../core/ansible/inventory';
import { jobSandbox } from '../../runtime/sandbox-setup';
import { tempDir } from '../support/temp';

/**
 * An inventory read by Ansible's own parts, each as a sandboxed job (runtime/inventory-jobs.ts):
 * a real bubblewrap sandbox as the run account, no network.
 */
let where: JobSandbox;

beforeAll(async () => {
  where = await jobSandbox(loadConfig({}, { CAIRN_DATA_DIR: tempDir('cairn-inventory-data'), CAIRN_RUN_NETWORK: 'none' }), () => undefined);
});

/** Each host's addresses, as a callback reads them: PyYAML's layout in the sandbox, resolved by Cairn. */
const inventoryHostAddresses = async (where: JobSandbox, format: 'ini' | 'yaml', content: string) =>
  format === 'ini' ? iniHostEntries(content) : resolveHostAddresses(yamlLayout(await yamlLayoutAnswer(where, content)));

describe('inventory reading in the sandbox', () => {
  test('YAML host addresses: from each host entry over its groups\' vars, ranges expanded, a later entry overriding', async () => {
    const content = [
      'all:',
      '  hosts:',
      '    lone:',
      '  children:',
      '    web:',
      '      hosts:',
      '        app1:',
      '          ansible_host: 10.0.0.5',
      '        app[2:3]: { ansible_ssh_host: 10.0.0.6 }',
      '      vars:',
      '        ansible_host: 10.9.9.9',
      '    db:',
      '      hosts:',
      '        app1: { ansible_ssh_host: 10.0.0.7 }',
      '        num: { ansible_host: 5 }',
    ].join('\n');
    const hosts = [...(await inventoryHostAddresses(where, 'yaml', content))];
    expect(hosts.sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: 'app1', ansible_host: '10.0.0.5', ansible_ssh_host: '10.0.0.7' },
      { name: 'app2', ansible_host: '10.9.9.9', ansible_ssh_host: '10.0.0.6' },
      { name: 'app3', ansible_host: '10.9.9.9', ansible_ssh_host: '10.0.0.6' },
      { name: 'lone' },
      { name: 'num', ansible_host: '5' },
    ]);
    // `all` lowest, a nested child group over its parent; a group aliased under another name is that group too.
    const nested = 'all:\n  vars: { ansible_host: 10.0.0.1 }\n  hosts: { lone: }\n  children:\n    prod: &prod\n      vars: { ansible_host: 10.0.0.2 }\n      children:\n        web:\n          vars: { ansible_host: 10.0.0.3 }\n          hosts: { w1: }\n      hosts: { p1: }\n    again: *prod\n';
    expect([...(await inventoryHostAddresses(where, 'yaml', nested))].sort((a, b) => a.name.localeCompare(b.name))).toEqual([
      { name: 'lone', ansible_host: '10.0.0.1' },
      { name: 'p1', ansible_host: '10.0.0.2' },
      { name: 'w1', ansible_host: '10.0.0.3' },
    ]);
    expect(await inventoryHostAddresses(where, 'ini', 'h1 ansible_host=10.0.0.1\n')).toEqual([{ name: 'h1', ansible_host: '10.0.0.1' }]);
  });


  test('a YAML inventory that does not parse is an InventoryError naming the line, not a crash', async () => {
    await expect(inventoryHostNames(where, 'yaml', 'all:\n  hosts: [a, b\n')).rejects.toThrow(InventoryError);
    await expect(inventoryHostNames(where, 'yaml', 'all:\n  hosts: [a, b\n')).rejects.toThrow(/not valid YAML at line/);
  });

  test('a limit reading a file (@path) is refused before Ansible sees it', async () => {
    const resolved = resolveInventory(where, 'ini', 'web1\nweb2\n', 'web1:@/etc/shadow');
    await expect(resolved).rejects.toThrow(InventoryError);
    await expect(resolved).rejects.toThrow(/^the limit /);
  });
});
