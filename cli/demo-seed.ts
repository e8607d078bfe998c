import { randomBytes } from 'node:crypto';

/**
 * What `cairn demo` puts into a fresh install, through the HTTP API as any client would: templates
 * with surveys, a workflow with an approval step, an inventory of local hosts, a schedule, a
 * policy and a held run waiting for a decision, a notification target, and an account to sign in
 * to the console with. Nothing is written to the database but through the API's own routes.
 */

export interface DemoSeed {
  templates: Record<string, string>;
  workflowId: string;
  inventoryId: string;
  scheduleId: string;
  heldRunId: string;
  targetId: string;
}

type Call = (method: string, path: string, body?: unknown, token?: string) => Promise<any>;

/** A JSON call to the API; anything but 2xx is an error naming the call and the answer. */
export function apiCaller(baseUrl: string, token: string): Call {
  return async (method, path, body, asToken) => {
    const headers: Record<string, string> = { authorization: `Bearer ${asToken ?? token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await fetch(`${baseUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
}

// Colours in the output show off the console's log view; the loop makes the live log worth following.
const HELLO = [
  'printf "\\033[1;34m==> Greeting %s, %s times\\033[0m\\n" "$name" "$count"',
  'for i in $(seq 1 "$count"); do',
  '  printf "\\033[32mok\\033[0m  [%s/%s] hello, %s (in %s)\\n" "$i" "$count" "$name" "$colour"',
  '  sleep 0.4',
  'done',
  'if [ "$loud" = "true" ]; then printf "\\033[1;33mHELLO, %s!\\033[0m\\n" "$name"; fi',
  'printf "\\033[2mdone\\033[0m\\n"',
].join('\n');

const DEPLOY = [
  'echo "deploying version $version to $environment"',
  'test -n "$api_token" && echo "using api token $api_token"',
  'for step in fetch unpack migrate switch; do echo "  $step ... ok"; sleep 0.3; done',
  'echo "deployed $version"',
].join('\n');

const LOCAL_HOSTS = ['[web]', 'web1 ansible_host=127.0.0.1 ansible_connection=local', 'web2 ansible_host=127.0.0.1 ansible_connection=local', '', '[db]', 'db1 ansible_host=127.0.0.1 ansible_connection=local', ''].join('\n');

export async function seedDemo(baseUrl: string, adminToken: string, options: { receiverUrl: string; password: string }): Promise<DemoSeed> {
  const call = apiCaller(baseUrl, adminToken);

  const hello = await call('POST', '/v1/templates', {
    name: 'hello',
    tool: 'bash',
    command: HELLO,
    survey: [
      { var: 'name', type: 'text', label: 'Whom to greet', required: true, default: 'world', max_length: 40 },
      { var: 'count', type: 'int', label: 'How many times', min: 1, max: 10, default: 3 },
      { var: 'colour', type: 'choice', label: 'Favourite colour', choices: ['red', 'green', 'blue'], default: 'blue' },
      { var: 'loud', type: 'bool', label: 'Shout at the end', default: false },
    ],
  });
  const deploy = await call('POST', '/v1/templates', {
    name: 'deploy web',
    tool: 'bash',
    command: DEPLOY,
    timeout: 600,
    survey: [
      { var: 'environment', type: 'choice', label: 'Environment', choices: ['staging', 'production'], required: true },
      { var: 'version', type: 'text', label: 'Version', help: 'A release such as 1.4.2', pattern: '[0-9]+\\.[0-9]+\\.[0-9]+', required: true },
      { var: 'api_token', type: 'secret', label: 'API token', help: 'Sealed to the run and masked in its log' },
    ],
  });
  const workflow = await call('POST', '/v1/templates', {
    name: 'release',
    steps: [
      { name: 'build', tool: 'bash', command: 'echo building; sleep 1; echo built' },
      { name: 'deploy-staging', tool: 'bash', command: 'echo deployed to staging', depends_on: ['build'] },
      { name: 'promote', type: 'approval', description: 'Promote this build to production?', depends_on: ['deploy-staging'], if_denied: 'rollback' },
      { name: 'deploy-prod', tool: 'bash', command: 'echo deployed to production', depends_on: ['promote'] },
      { name: 'rollback', tool: 'bash', command: 'echo staging rolled back' },
    ],
  });
  const inventory = await call('POST', '/v1/inventories', { name: 'local hosts', content: LOCAL_HOSTS });

  // A credential whose secret is set and never shown again; a push trigger whose hook and secret
  // were answered once, here, and dropped (rotate the secret from the console to get a new one).
  await call('POST', '/v1/credentials', {
    name: 'web hosts',
    kind: 'machine',
    description: 'SSH login for the web hosts',
    inputs: { username: 'deploy', password: randomBytes(18).toString('base64url'), become_method: 'sudo' },
  });
  await call('POST', '/v1/triggers', { name: 'deploy on push', template_id: deploy.id });

  const schedule = await call('POST', '/v1/schedules', { name: 'nightly hello', template_id: hello.id, cron: '0 3 * * *', timezone: 'UTC' });

  const target = await call('POST', '/v1/notifications', { name: 'local receiver', kind: 'webhook', url: options.receiverUrl });
  for (const template of [hello, deploy, workflow]) {
    for (const event of ['success', 'failure', 'approval']) {
      await call('POST', `/v1/notifications/${target.id}/attachments`, { object_kind: 'template', object_id: template.id, event });
    }
  }

  // Destructive commands wait for an admin's reason; an agent's run is held whatever it runs.
  await call('POST', '/v1/policies', { name: 'destructive deletes', tool: 'bash', command_contains: 'rm -rf', require_reason: true });
  const agent = await call('POST', '/v1/tokens', { name: 'demo agent', kind: 'agent', expires_in: 3600 });
  const held = await call('POST', '/v1/runs', { tool: 'bash', command: 'echo clearing the build cache\nrm -rf ./build-cache\necho cleared' }, agent.token);
  await call('DELETE', `/v1/tokens/${agent.id}`);

  // A finished run and a running one, so the runs page is not empty.
  await call('POST', `/v1/templates/${hello.id}/launch`, { answers: { name: 'Cairn', count: 2 } });

  await setDemoPassword(baseUrl, adminToken, options.password);

  return {
    templates: { hello: hello.id, deploy: deploy.id },
    workflowId: workflow.id,
    inventoryId: inventory.id,
    scheduleId: schedule.id,
    heldRunId: held.id,
    targetId: target.id,
  };
}

/** The `demo` admin account, made on first use, signs in to the console with this password. */
export async function setDemoPassword(baseUrl: string, adminToken: string, password: string): Promise<void> {
  const call = apiCaller(baseUrl, adminToken);
  const { users } = await call('GET', '/v1/users');
  const demo = users.find((u: { username: string }) => u.username === 'demo');
  if (demo) await call('PUT', `/v1/users/${demo.id}`, { password });
  else await call('POST', '/v1/users', { username: 'demo', role: 'admin', password, profile: { full_name: 'Demo Admin' } });
}
