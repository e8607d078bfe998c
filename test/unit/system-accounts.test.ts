import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { systemAccount } from '../../embedded/system-accounts';

// Creating accounts needs root; CI runs as root, as a fresh install of Cairn does.
(process.getuid?.() === 0 ? test : test.skip)('processes starting at once on a fresh machine all get the one system account they create', async () => {
  const name = `cairn-t${randomBytes(4).toString('hex')}`;
  try {
    const accounts = await Promise.all(Array.from({ length: 6 }, () => systemAccount(name, () => {})));
    expect(new Set(accounts.map((a) => a.uid)).size).toBe(1);
    expect(accounts[0].uid).toBe(Number(execFileSync('id', ['-u', name]).toString().trim()));
  } finally {
    execFileSync('/usr/sbin/userdel', [name]);
  }
});
