import { execFile, execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { limitSelects } from '../../core/ansible/callbacks';
import { patternInventory, selectedHosts, splitHostPattern } from '../../core/ansible/host-patterns';
import { iniLayout } from '../../core/ansible/inventory';
import { onPath } from '../../embedded/temporal-binary';
import { listHostsOutput, NO_HOSTS_MATCHED } from '../../tools/ansible-inventory';
import { tempDir } from '../support/temp';

/**
 * Host patterns (a template's limit) evaluated by Cairn, checked against Ansible itself:
 * `ansible all -i <inventory> --list-hosts --limit <pattern>` (ansible-core, which lists and
 * connects to nothing) over the same inventory.
 */

const INVENTORY = `lonely
web1 ansible_host=10.0.0.1
[webservers]
web1
web2
web-canary
[dbservers]
db1
db2
[prod:children]
webservers
dbservers
[staging]
web3
db3
[monitoring]
mon.example.com
127.0.0.9
[edge:children]
prod
[edge]
edge-[1:2].example.net
`;

const inventory = patternInventory(iniLayout(INVENTORY));

/** A directory holding INVENTORY, and the settings every Ansible call here runs with (no config file). */
function ansibleWorkspace(): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = tempDir('cairn-host-patterns');
  writeFileSync(path.join(dir, 'inventory.ini'), INVENTORY);
  return { dir, env: { PATH: process.env.PATH, HOME: dir, LANG: 'C.UTF-8', ANSIBLE_CONFIG: path.join(dir, 'none.cfg') } };
}

/** What `ansible all --list-hosts --limit <limit>` lists over INVENTORY, as a sorted list (empty when it matches no host). */
function ansibleLists(limit: string): Promise<string[]> {
  const { dir, env } = ansibleWorkspace();
  return new Promise((resolve, reject) => {
    execFile('ansible', ['all', '-i', 'inventory.ini', '--list-hosts', '--limit', limit], { cwd: dir, env, timeout: 60_000 }, (err, stdout, stderr) => {
      if (err && !NO_HOSTS_MATCHED.test(`${stdout}${stderr}`)) return reject(new Error(`ansible --limit ${limit}: ${stderr || err.message}`));
      resolve(err ? [] : listHostsOutput(stdout).sort());
    });
  });
}

/**
 * The same answer for many limits from one Python process (test/support/ansible-host-lists.py runs
 * the ad hoc command's own CLI.get_host_list under the interpreter the `ansible` command names):
 * starting Python and ansible-core once per pattern cost about a third of a second of CPU each.
 */
async function ansibleListsEach(limits: string[]): Promise<Map<string, string[]>> {
  const { dir, env } = ansibleWorkspace();
  const ansibleCommand = await onPath('ansible');
  if (!ansibleCommand) throw new Error('the ansible command is not on PATH');
  const interpreter = readFileSync(ansibleCommand, 'utf8')
    .split('\n')[0]
    .replace(/^#!\s*/, '')
    .trim()
    .split(/\s+/);
  const script = path.resolve(__dirname, '../support/ansible-host-lists.py');
  const out = execFileSync(interpreter[0], [...interpreter.slice(1), script, 'inventory.ini'], { cwd: dir, env, input: JSON.stringify(limits), encoding: 'utf8', timeout: 60_000 });
  const answers = JSON.parse(out) as Record<string, { hosts?: string[]; error?: string }>;
  return new Map(
    limits.map((limit) => {
      const answer = answers[limit];
      if (answer.error !== undefined && !NO_HOSTS_MATCHED.test(answer.error)) throw new Error(`ansible --limit ${limit}: ${answer.error}`);
      return [limit, answer.hosts ?? []];
    }),
  );
}

const PATTERNS = [
  'all',
  '*',
  'webservers',
  'web*',
  'all:!web*',
  'all:!webservers',
  '!webservers',
  'webservers:&prod',
  'prod:!dbservers',
  'prod:&staging',
  'webservers,dbservers',
  'webservers:dbservers',
  ' webservers , !web2 ',
  'web?',
  // Read as subscripts (host 12 of `web`, hosts 0 to 9 of `db`) of nothing: no host.
  'web[12]',
  'db[0-9]',
  'web[12]*',
  'web[!1]*',
  'db[0-9]*',
  'ungrouped',
  'lonely',
  '&prod',
  '!lonely:!prod',
  'edge',
  'edge:!prod',
  'mon.example.com',
  'mon*',
  '*.example.*',
  '127.0.0.9',
  '127.0.0.*',
  'nosuch',
  'nosuch:web1',
  'a*',
  'stag*:&db*',
  'prod:&web*:!web-canary',
  'all:&staging:!db3',
  'web1:22',
  'edge-1.example.net,edge-[1:2].example.net',
  'web[',
  '[!w]*',
];

describe('host patterns against ansible --list-hosts --limit', () => {
  let ansible: Map<string, string[]>;
  beforeAll(async () => {
    ansible = await ansibleListsEach(PATTERNS);
  }, 60_000);

  test.each(PATTERNS)('%j', (pattern) => {
    const ours = selectedHosts(pattern, inventory);
    expect(ours).toBeDefined();
    expect([...ours!].sort()).toEqual(ansible.get(pattern));
  });

  test('the batch answers as the ansible command itself does', async () => {
    for (const pattern of ['prod:!dbservers', 'nosuch']) expect(await ansibleLists(pattern)).toEqual(ansible.get(pattern));
  }, 60_000);
});

describe('what is not evaluated here, and the callback rule', () => {
  test('a regular expression or a subscript is left to Ansible', () => {
    for (const pattern of ['~web[0-9]+', 'webservers[0]', 'webservers[0:1]', 'webservers[1:]', 'all:!webservers[-1]', 'web*[1-2]']) {
      expect(selectedHosts(pattern, inventory)).toBeUndefined();
    }
  });

  test('split as Ansible splits: commas first, else colons outside brackets, unless the whole is one host', () => {
    expect(splitHostPattern('a:b,c')).toEqual(['a:b', 'c']);
    expect(splitHostPattern('web*:!web2:&prod')).toEqual(['web*', '!web2', '&prod']);
    expect(splitHostPattern('web[1:3]:db')).toEqual(['web[1:3]', 'db']);
    expect(splitHostPattern('2001:db8::1')).toEqual(['2001:db8::1']);
    expect(splitHostPattern('host1:8080')).toEqual(['host1:8080']);
    expect(splitHostPattern('')).toEqual([]);
  });

  test("a template's limit selects a calling host by its groups: all:!web* refuses a webserver, web* admits one", () => {
    const names = [...inventory.hosts];
    expect(limitSelects('all:!web*', 'web1', iniLayout(INVENTORY))).toBe(false);
    expect(limitSelects('all:!web*', 'db1', iniLayout(INVENTORY))).toBe(true);
    expect(limitSelects('web*', 'web2', iniLayout(INVENTORY))).toBe(true);
    expect(limitSelects('prod:!dbservers', 'db2', iniLayout(INVENTORY))).toBe(false);
    expect(limitSelects('~web', 'web1', iniLayout(INVENTORY))).toBeUndefined();
    expect(names).toContain('edge-2.example.net');
  });
});
