import { promises as fs } from 'node:fs';
import path from 'node:path';
import { AiProviderRegistry } from '../../core/ai/provider';
import { ExtensionRegistry } from '../../core/extensions';
import { startPluginHost, type PluginHost } from '../../runtime/plugins';
import { getTool } from '../../tools/registry';
import { pluginsDir } from '../support/plugins';
import { tempDir } from '../support/temp';

/** The plugin host against real plugins built from the Go SDK (go-plugin handshake, gRPC over mutual TLS). */
describe('plugin host', () => {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  const logger = {
    info: (obj: object, msg: string) => lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
    warn: (obj: object, msg: string) => lines.push({ level: 'warn', obj: obj as Record<string, unknown>, msg }),
    error: (obj: object, msg: string) => lines.push({ level: 'error', obj: obj as Record<string, unknown>, msg }),
  };
  const extensions = new ExtensionRegistry();
  const ai = new AiProviderRegistry();
  let host: PluginHost;
  let dir: string;
  const leaseDir = tempDir('plugin-leases');
  const notifyFile = path.join(tempDir('plugin-notify'), 'events.jsonl');

  beforeAll(async () => {
    dir = await pluginsDir(tempDir('plugins'), { '10-hello': 'hello', '20-crash': 'crash', '30-duplicate': 'duplicate' });
    await fs.writeFile(path.join(dir, 'README'), 'not executable: ignored\n');
    host = await startPluginHost(dir, { extensions, aiProviders: ai }, logger, {
      PATH: process.env.PATH,
      HOME: '/nonexistent',
      SERVICE_ENCRYPTION_KEY: 'the-server-key-must-not-leak',
      DATABASE_URL: 'postgres://secret@db/x',
      SERVICE_PLUGIN_HELLO_LEASE_DIR: leaseDir,
      SERVICE_PLUGIN_HELLO_NOTIFY_FILE: notifyFile,
    });
  }, 180_000);
  afterAll(() => host?.stop());

  test('loads the first plugin, skips the crashing one and the one declaring a taken name', async () => {
    expect(host.plugins.map((p) => path.basename(p.file))).toEqual(['10-hello']);
    expect(getTool('hello')).toMatchObject({ name: 'hello', installed: 'plugin', dryRunChangeFree: false });
    expect(extensions.notifiers.names()).toEqual(['hello-file']);
    expect(ai.names()).toEqual(['hello-echo']);
    const crash = lines.find((l) => l.obj.plugin === path.join(dir, '20-crash'));
    expect(crash).toMatchObject({ level: 'error', msg: expect.stringContaining('skipped') });
    expect(String(crash!.obj.err)).toContain('giving up before serving');
    const dup = lines.find((l) => l.obj.plugin === path.join(dir, '30-duplicate'));
    expect(dup).toMatchObject({ level: 'warn', msg: expect.stringContaining(path.join(dir, '30-duplicate')) });
    expect(dup!.msg).toContain('tool "hello"');
  });

  test("a plugin's environment holds only what rule 7 lists", async () => {
    const env = extensions.secretSources.get('hello-env');
    expect(env?.kind).toBe('static');
    if (env?.kind !== 'static') return;
    const signal = new AbortController().signal;
    expect(await env.source.resolve('SERVICE_ENCRYPTION_KEY', signal)).toBe('');
    expect(await env.source.resolve('DATABASE_URL', signal)).toBe('');
    expect(await env.source.resolve('SERVICE_PLUGIN_HELLO_LEASE_DIR', signal)).toBe(leaseDir);
    expect(await env.source.resolve('HOME', signal)).toBe('/nonexistent');
  });

  test('a dynamic secret is minted per run and its lease revoked by the process that minted it', async () => {
    const lease = extensions.secretSources.get('hello-lease');
    if (lease?.kind !== 'dynamic') throw new Error('hello-lease is not dynamic');
    const signal = new AbortController().signal;
    const minted = await lease.source.mint('role-a', 'run-1', signal);
    expect(minted.value).toMatch(/^lease-secret-run-1-/);
    expect(minted.ttlSeconds).toBe(60);
    expect(await fs.readdir(leaseDir)).toEqual([minted.leaseId]);
    await lease.source.revoke(minted.leaseId, signal);
    expect(await fs.readdir(leaseDir)).toEqual([]);
    await expect(lease.source.revoke(minted.leaseId, signal)).rejects.toThrow(/no lease/);
  });

  test('notifiers and AI providers answer over the plugin', async () => {
    const signal = new AbortController().signal;
    await extensions.notifiers.get('hello-file')!.notify(
      { runId: 'r1', tool: 'bash', status: 'succeeded', exitCode: 0, labels: { change: 'CHG-1' }, startedAt: null, finishedAt: null, url: 'http://x/runs/r1', extraVars: { a: '[redacted]' } },
      signal,
    );
    expect(JSON.parse((await fs.readFile(notifyFile, 'utf8')).trim())).toMatchObject({ runId: 'r1', status: 'succeeded', labels: { change: 'CHG-1' } });
    const text = await ai.build('hello-echo', { model: 'm1', endpoint: 'http://none', apiKey: 'k' }).complete({ system: 's', prompt: 'p' });
    expect(text).toBe('[m1] p');
  });

  test('a plugin that exits is started again', async () => {
    const plugin = host.plugins[0];
    const before = plugin.pid!;
    process.kill(before, 'SIGKILL');
    const deadline = Date.now() + 15_000;
    while ((plugin.pid === before || plugin.pid === undefined) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    let text = '';
    while (Date.now() < deadline) {
      text = await ai.build('hello-echo', { model: 'm2', endpoint: '', apiKey: '' }).complete({ system: '', prompt: 'again' }).catch(() => '');
      if (text) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(text).toBe('[m2] again');
    expect(plugin.available).toBe(true);
    expect(lines.some((l) => l.msg === 'plugin started again')).toBe(true);
  });

  test('plugins end with the host', async () => {
    const pid = host.plugins[0].pid!;
    await host.stop();
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const deadline = Date.now() + 5000;
    while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(alive()).toBe(false);
  });
});
