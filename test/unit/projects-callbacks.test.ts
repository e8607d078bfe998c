import { callbackRunLimit, callerAddress, formFields, hostsAt, keysMatch, limitSelects } from '../../core/ansible/callbacks';
import { iniLayout } from '../../core/ansible/inventory';
import { browsePath, gitUrlFault, isWithin, repositoryTarget } from '../../core/project-paths';

describe('repository addresses (core/project-paths.ts gitUrlFault, repositoryTarget)', () => {
  test('an address reads as a remote host and port, or a local path', () => {
    expect(repositoryTarget('https://git.example.com/org/repo.git')).toEqual({ kind: 'remote', scheme: 'https', host: 'git.example.com', port: 443 });
    expect(repositoryTarget('https://git.example.com:8443/r.git')).toEqual({ kind: 'remote', scheme: 'https', host: 'git.example.com', port: 8443 });
    expect(repositoryTarget('ssh://git@[::1]:2222/r.git')).toEqual({ kind: 'remote', scheme: 'ssh', host: '::1', port: 2222 });
    expect(repositoryTarget('git@example.com:org/repo.git')).toEqual({ kind: 'remote', scheme: 'ssh', host: 'example.com', port: 22 });
    expect(repositoryTarget('file:///srv/git/../git/repo.git')).toEqual({ kind: 'local', path: '/srv/git/repo.git' });
    expect(repositoryTarget('/srv/git/repo.git')).toEqual({ kind: 'local', path: '/srv/git/repo.git' });
    expect(repositoryTarget('file://otherhost/srv/r.git')).toHaveProperty('fault');
    expect(repositoryTarget('git@example.com:-oProxyCommand=x')).toHaveProperty('fault');
  });

  test.each(['https://git.example.com/org/repo.git', 'ssh://git@example.com/repo.git', 'git@example.com:org/repo.git', 'file:///srv/git/repo.git', '/srv/git/repo.git'])(
    '%s is accepted',
    (url) => expect(gitUrlFault(url)).toBeUndefined(),
  );
  test.each([
    ['ext::sh -c touch% /tmp/x', /remote helper/],
    ['fd::3', /remote helper/],
    ['--upload-pack=touch /tmp/x', /begin with "-"/],
    ['-oProxyCommand=x', /begin with "-"/],
    ['http://example.com/r.git', /not http/],
    ['git://example.com/r.git', /not git/],
    ['relative/repo', /https:\/\/ or ssh:\/\/ address, or user@host:path/],
    ['https://example.com/r\n.git', /control characters/],
    ['', /empty/],
    ['https://bob:hunter2@example.com/r.git', /password/],
  ])('%s is refused', (url, why) => expect(gitUrlFault(url)).toMatch(why));
});

describe('browse paths (core/project-paths.ts browsePath, isWithin)', () => {
  test('relative paths are normalized; the root is ""', () => {
    expect(browsePath('')).toEqual({ path: '' });
    expect(browsePath('./a//b/./c.yml')).toEqual({ path: 'a/b/c.yml' });
  });
  test.each(['../x', 'a/../../x', 'a/..', '/etc/passwd', '\\\\server\\share', 'a\u0000b', '.git/config', '.git'])('%j is refused', (p) => {
    expect(browsePath(p)).toHaveProperty('fault');
  });
  test('containment over real paths', () => {
    expect(isWithin('/data/projects/prj_1', '/data/projects/prj_1')).toBe(true);
    expect(isWithin('/data/projects/prj_1', '/data/projects/prj_1/a/b')).toBe(true);
    expect(isWithin('/data/projects/prj_1', '/data/projects/prj_10')).toBe(false);
    expect(isWithin('/data/projects/prj_1', '/etc/passwd')).toBe(false);
  });
});

describe('callback matching (core/callbacks.ts)', () => {
  test('an IPv4-mapped address is written as IPv4', () => {
    expect(callerAddress('::ffff:127.0.0.2')).toBe('127.0.0.2');
    expect(callerAddress('::1')).toBe('::1');
  });
  test('hosts at an address: by name or by inventory address, each once', () => {
    const hosts = [
      { name: '10.0.0.1' },
      { name: 'web1', addresses: ['10.0.0.2'] },
      { name: 'web2', addresses: ['10.0.0.3'] },
      { name: 'web3', addresses: ['10.0.0.3'] },
      { name: 'old', addresses: ['10.0.0.4', '10.0.0.5'] },
      { name: 'v6', addresses: ['FE80::1'] },
      { name: '10.0.0.6', addresses: ['10.0.0.6'] },
    ];
    expect(hostsAt('10.0.0.1', hosts)).toEqual(['10.0.0.1']);
    expect(hostsAt('10.0.0.2', hosts)).toEqual(['web1']);
    expect(hostsAt('10.0.0.3', hosts)).toEqual(['web2', 'web3']);
    // ansible_host or ansible_ssh_host: either one is enough.
    expect(hostsAt('10.0.0.4', hosts)).toEqual(['old']);
    expect(hostsAt('10.0.0.5', hosts)).toEqual(['old']);
    expect(hostsAt('fe80::1', hosts)).toEqual(['v6']);
    expect(hostsAt('10.0.0.6', hosts)).toEqual(['10.0.0.6']);
    expect(hostsAt('10.0.0.9', hosts)).toEqual([]);
    expect(hostsAt('web1', hosts)).toEqual([]);
  });
  test('a limit selects or refuses by host and group names, or is left to Ansible', () => {
    const names = iniLayout('web1\nweb2\ndb1\n');
    expect(limitSelects('web1', 'web1', names)).toBe(true);
    expect(limitSelects('web1', 'web2', names)).toBe(false);
    expect(limitSelects('web1,web2', 'web2', names)).toBe(true);
    expect(limitSelects('web*', 'web2', names)).toBe(true);
    expect(limitSelects('web*', 'db1', names)).toBe(false);
    expect(limitSelects('all:!db1', 'db1', names)).toBe(false);
    expect(limitSelects('all:!db1', 'web1', names)).toBe(true);
    expect(limitSelects('!web1', 'web2', names)).toBe(true);
    expect(limitSelects('web*:&web1', 'web2', names)).toBe(false);
    // No host or group of that name: Ansible selects nothing.
    expect(limitSelects('webservers', 'web1', names)).toBe(false);
    expect(limitSelects('webservers', 'web1', iniLayout('[webservers]\nweb1\n[db]\ndb1\n'))).toBe(true);
    expect(limitSelects('~web[0-9]', 'web1', names)).toBeUndefined();
    expect(limitSelects('', 'web1', names)).toBe(true);
  });
  test("a callback's run keeps the template's limit with the calling host, joined by commas; replace keeps the host alone", () => {
    expect(callbackRunLimit('all:!web*', 'db1', 'intersect')).toBe('all,!web*,&db1');
    expect(callbackRunLimit('webservers,dbservers', '127.0.0.2', 'intersect')).toBe('webservers,dbservers,&127.0.0.2');
    expect(callbackRunLimit('webservers', 'fe80::1', 'intersect')).toBe('webservers,&fe80::1');
    expect(callbackRunLimit(null, 'web1', 'intersect')).toBe('web1');
    expect(callbackRunLimit('webservers', 'web1', 'replace')).toBe('web1');
  });
  test('keys compare whole; form bodies read first values', () => {
    expect(keysMatch('abc', 'abc')).toBe(true);
    expect(keysMatch('abc', 'abd')).toBe(false);
    expect(formFields('host_config_key=a%2Bb&host_config_key=c&extra_vars=x')).toEqual({ host_config_key: 'a+b', extra_vars: 'x' });
  });
});
