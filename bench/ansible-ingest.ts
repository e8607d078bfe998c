import { spawn, spawnSync } from 'node:child_process';
import { promises as fs, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type postgres from 'postgres';
import { expectStatus, type BenchClient } from './http';
import type { Section } from './report';
import { msSince, sleep } from './stats';

const HOSTS = 1000;
const FORKS = 50;
/** The Cairn run may take a while on a loaded machine: 1,000 hosts x 2 tasks, each a forked worker. */
const RUN_TIMEOUT_MS = 20 * 60_000;
const TERMINAL = new Set(['succeeded', 'failed', 'canceled', 'interrupted', 'rejected']);

/** 1,000 inventory hosts, all on this machine: `ansible_connection=local`, no ssh. */
export function localInventory(hosts = HOSTS): string {
  const lines = ['[bench]'];
  for (let i = 1; i <= hosts; i++) lines.push(`h${String(i).padStart(4, '0')} ansible_connection=local ansible_python_interpreter=/usr/bin/python3`);
  return `${lines.join('\n')}\n`;
}

/** Two cheap tasks that run on the controller (action plugins): no module is shipped to a host. */
const PLAYBOOK = `- hosts: all
  gather_facts: false
  tasks:
    - name: remember
      ansible.builtin.set_fact:
        bench_value: "{{ inventory_hostname }}"
    - name: say
      ansible.builtin.debug:
        msg: "{{ bench_value }}"
`;

const PLUGIN = readFileSync(path.join(__dirname, '..', 'tools', 'ansible', 'cairn_results.py'), 'utf8');

/** Whether ansible-playbook is on the PATH the server's tools see. */
export function hasAnsiblePlaybook(): boolean {
  return spawnSync('ansible-playbook', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * ansible-playbook run directly, outside Cairn and its sandbox, in a fresh directory with the
 * argv and environment the ansible tool gives it (tools/ansible.ts, activities/runs.ts): the
 * inventory and playbook as files, `--forks`, `-e @extra_vars.json`, HOME and TMPDIR the
 * directory. With `plugin` the Cairn callback plugin is written there and enabled as the tool
 * does; without it, no callback but Ansible's default stdout one. Answers the wall time and how
 * many hosts the recap (or, with the plugin, its results file) names.
 */
async function directRun(hosts: number, plugin: boolean): Promise<{ ms: number; hosts: number }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-bench-ansible-'));
  try {
    await fs.writeFile(path.join(dir, 'inventory.ini'), localInventory(hosts));
    await fs.writeFile(path.join(dir, 'playbook.yml'), PLAYBOOK);
    await fs.writeFile(path.join(dir, 'extra_vars.json'), '{}', { mode: 0o600 });
    const env: Record<string, string> = {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: dir,
      TMPDIR: dir,
      LANG: 'C.UTF-8',
      ANSIBLE_RETRY_FILES_ENABLED: 'false',
      PYTHONUNBUFFERED: '1',
    };
    const results = '.cairn-ansible-results.jsonl';
    if (plugin) {
      await fs.writeFile(path.join(dir, 'cairn_results.py'), PLUGIN);
      await fs.writeFile(path.join(dir, results), '');
      Object.assign(env, { ANSIBLE_CALLBACK_PLUGINS: '.', ANSIBLE_CALLBACKS_ENABLED: 'cairn_results', CAIRN_ANSIBLE_RESULTS: results });
    }
    const argv = ['--inventory=inventory.ini', `--forks=${FORKS}`, '-e', '@extra_vars.json', '--', 'playbook.yml'];
    const start = process.hrtime.bigint();
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve, reject) => {
      const child = spawn('ansible-playbook', argv, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
      const chunks: Buffer[] = [];
      child.stdout.on('data', (c: Buffer) => chunks.push(c));
      child.stderr.resume();
      child.on('error', reject);
      child.on('close', (c) => resolve({ code: c, stdout: Buffer.concat(chunks).toString('utf8') }));
    });
    const ms = msSince(start);
    if (code !== 0) throw new Error(`ansible-playbook exited ${code}: ${stdout.slice(-2000)}`);
    const recap = stdout.slice(stdout.indexOf('PLAY RECAP'));
    let named = (recap.match(/^\S+\s+: ok=/gm) ?? []).length;
    if (plugin) named = (await fs.readFile(path.join(dir, results), 'utf8')).split('\n').filter((l) => l.startsWith('{"type":"host"')).length;
    return { ms, hosts: named };
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** One Cairn run of the play over the stored inventory: submit to succeeded, its host summaries counted. */
async function cairnRun(client: BenchClient, sql: postgres.Sql, inventoryId: string): Promise<{ ms: number; hosts: number; tasks: number; runMs: number | null }> {
  const start = process.hrtime.bigint();
  const run = expectStatus(
    await client.request<{ id: string }>('POST', '/v1/runs', { tool: 'ansible', inventory_id: inventoryId, command: PLAYBOOK, forks: FORKS }),
    201,
    'POST /v1/runs',
  );
  let body: { status: string; error: string | null; exit_code: number | null } = { status: 'pending', error: null, exit_code: null };
  const deadline = Date.now() + RUN_TIMEOUT_MS;
  while (!TERMINAL.has(body.status)) {
    if (Date.now() > deadline) throw new Error(`ansible run ${run.id} did not end within ${RUN_TIMEOUT_MS / 60_000} minutes; still ${body.status}`);
    await sleep(100);
    body = expectStatus(await client.request('GET', `/v1/runs/${run.id}`), 200, `GET /v1/runs/${run.id}`);
  }
  const ms = msSince(start);
  if (body.status !== 'succeeded') throw new Error(`ansible run ${run.id} ended ${body.status} (exit ${body.exit_code}): ${body.error}`);
  // The results are stored before the run is recorded as ended (services/host-results.ts recordToolResults).
  const [{ n: hosts }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM run_host_results WHERE run_id = ${run.id}`;
  if (hosts !== HOSTS) throw new Error(`run ${run.id} stored ${hosts} host summaries, not ${HOSTS}`);
  const [{ n: tasks }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM run_task_results WHERE run_id = ${run.id}`;
  const [timing] = await sql<{ run_ms: number | null }[]>`
    SELECT (extract(epoch FROM finished_at - started_at) * 1000)::float8 AS run_ms FROM runs WHERE id = ${run.id}`;
  return { ms, hosts, tasks, runMs: timing?.run_ms ?? null };
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * (n) Per-host result ingestion: one ansible run of a two-task play over 1,000 local hosts
 * (`ansible_connection=local`, gather_facts off, forks 50) through Cairn, submit to finished with
 * its 1,000 host summaries stored (run_host_results counted), as summaries stored per second;
 * beside the same play run by ansible-playbook directly with Cairn's callback plugin off (no
 * Cairn, no sandbox, the same argv and environment), as hosts summarized per second. The budget
 * is the ratio: Cairn's rate at least 0.8 of the bare play's. A third run, ansible-playbook
 * directly with the plugin on, splits the plugin's own share from Cairn's (sandbox, Temporal,
 * reading and storing the results). The play is CPU bound on forked workers, so other load moves
 * it a lot: the three are interleaved for CAIRN_BENCH_ANSIBLE_ROUNDS rounds (default 2) and the
 * fastest of each compared.
 */
export async function ansibleIngestBenchmark(client: BenchClient, sql: postgres.Sql): Promise<Section> {
  const rounds = Math.max(1, Number(process.env.CAIRN_BENCH_ANSIBLE_ROUNDS ?? 2) || 2);
  // A small warm-up run, so no measured run pays for Python's first imports alone.
  await directRun(20, false);
  const inventory = expectStatus(
    await client.request<{ id: string; host_count: number }>('POST', '/v1/inventories', { name: 'bench ansible 1000 local', content: localInventory() }),
    201,
    'POST /v1/inventories',
  );
  if (inventory.host_count !== HOSTS) throw new Error(`the inventory counted ${inventory.host_count} hosts`);

  const bare: number[] = [];
  const cairn: Awaited<ReturnType<typeof cairnRun>>[] = [];
  const plugin: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const b = await directRun(HOSTS, false);
    if (b.hosts !== HOSTS) throw new Error(`the bare play's recap named ${b.hosts} hosts, not ${HOSTS}`);
    bare.push(b.ms);
    cairn.push(await cairnRun(client, sql, inventory.id));
    const p = await directRun(HOSTS, true);
    if (p.hosts !== HOSTS) throw new Error(`the plugin wrote ${p.hosts} host lines, not ${HOSTS}`);
    plugin.push(p.ms);
  }
  const best = cairn.reduce((a, b) => (b.ms < a.ms ? b : a));
  const bareMs = Math.min(...bare);
  const rate = (ms: number) => HOSTS / (ms / 1000);
  const cairnRate = rate(best.ms);
  const bareRate = rate(bareMs);
  const ratio = cairnRate / bareRate;
  return {
    rows: [
      { metric: `ansible host summaries stored/s (${HOSTS} local hosts, forks ${FORKS})`, value: cairnRate, baseline: bareRate, unit: '/s' },
      { metric: 'ansible ingestion ratio (Cairn / bare play)', value: ratio, baseline: 1, unit: 'x', budget: { min: 0.8 } },
    ],
    notes: [
      `ansible ingestion: a two-task play (set_fact, debug; gather_facts off) over ${HOSTS} hosts with ansible_connection=local, forks ${FORKS}; ` +
        `${rounds} interleaved round(s), fastest of each compared. ` +
        `Cairn (plugin on, run sandbox with the bench install's CPU bound of ${os.availableParallelism()} cores, every core as the bare play has; the default --run-cpu of 1 would halve the play): POST /v1/runs to succeeded with ${best.hosts} host and ${best.tasks} task summaries stored in ` +
        `run_host_results/run_task_results: ${cairn.map((c) => seconds(c.ms)).join(', ')} (run record started->finished ${cairn.map((c) => (c.runMs === null ? '?' : seconds(c.runMs))).join(', ')}). ` +
        `Baseline, the same play, inventory, argv and tool environment run by ansible-playbook directly with Cairn's callback plugin off (no Cairn, no sandbox; ` +
        `hosts counted in its recap): ${bare.map(seconds).join(', ')}. That is the fairest "plugin off" figure: Cairn without its plugin stores no summaries to ` +
        `count, so the ratio charges Cairn everything it adds (plugin, sandbox, Temporal, the masked log, reading and storing results). ` +
        `For the split, ansible-playbook directly with the plugin on: ${plugin.map(seconds).join(', ')}. ` +
        `Ratio ${ratio.toFixed(2)} against a budget of >= 0.8; the play is CPU bound on ${FORKS} forked workers, so other load on the machine moves every figure.`,
    ],
  };
}
