import { Badge, Button, Checkbox, Group, NativeSelect, Stack, Tabs, Text, TextInput } from '@mantine/core';
import { useState, type FormEvent, type ReactNode } from 'react';
import { del, post, put } from '../api';
import { useSession } from '../session';
import { DataTable, ErrorNote, PageTitle, Show, StatusBadge, When, fieldError, formatTime, useFetch } from '../ui';
import { ShownOnce } from './shown-once';

export function AdminPage() {
  return (
    <>
      <PageTitle>Admin</PageTitle>
      <Tabs defaultValue="users" keepMounted={false}>
        <Tabs.List aria-label="Administration">
          <Tabs.Tab value="users">Users</Tabs.Tab>
          <Tabs.Tab value="teams">Teams</Tabs.Tab>
          <Tabs.Tab value="orgs">Organizations</Tabs.Tab>
          <Tabs.Tab value="grants">Grants</Tabs.Tab>
          <Tabs.Tab value="tokens">Tokens</Tabs.Tab>
          <Tabs.Tab value="policies">Policies</Tabs.Tab>
          <Tabs.Tab value="doctor">Doctor</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="users"><Users /></Tabs.Panel>
        <Tabs.Panel value="teams"><Groups kind="teams" /></Tabs.Panel>
        <Tabs.Panel value="orgs"><Groups kind="orgs" /></Tabs.Panel>
        <Tabs.Panel value="grants"><Grants /></Tabs.Panel>
        <Tabs.Panel value="tokens"><Tokens /></Tabs.Panel>
        <Tabs.Panel value="policies"><Policies /></Tabs.Panel>
        <Tabs.Panel value="doctor"><Doctor /></Tabs.Panel>
      </Tabs>
    </>
  );
}

/** Runs an action, reloads, and keeps its error for the form. */
function useAction(after: () => unknown) {
  const [error, setError] = useState<unknown>();
  const run = async (work: () => Promise<unknown>, confirm?: string) => {
    if (confirm && !window.confirm(confirm)) return false;
    setError(undefined);
    try {
      await work();
      await after();
      return true;
    } catch (err) {
      setError(err);
      return false;
    }
  };
  return { error, run };
}

function FormCard({ title, onSubmit, children }: { title: string; onSubmit: () => void; children: ReactNode }) {
  const id = `form-${title.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <form
      className="card section"
      aria-labelledby={id}
      onSubmit={(e: FormEvent) => {
        e.preventDefault();
        onSubmit();
      }}
    >
      <Stack>
        <h2 id={id}>{title}</h2>
        {children}
      </Stack>
    </form>
  );
}

interface User {
  id: string;
  username: string;
  role: string;
  profile: { full_name?: string; email?: string };
  created_at: string;
}

function Users() {
  const users = useFetch<{ users: User[] }>('/v1/users');
  const { error, run } = useAction(users.reload);
  const [username, setUsername] = useState('');
  const [role, setRole] = useState('operator');
  const [password, setPassword] = useState('');
  const [newPassword, setNewPassword] = useState<Record<string, string>>({});
  return (
    <div className="section">
      <ErrorNote error={error} fields={['username', 'role', 'password']} />
      <Show loaded={users}>
        {(data) => (
          <DataTable<User>
            label="Users"
            rows={data.users}
            rowKey={(u) => u.id}
            empty="No user."
            columns={[
              { label: 'Username', render: (u) => u.username },
              { label: 'Name', render: (u) => u.profile?.full_name ?? '' },
              {
                label: 'Role',
                render: (u) => (
                  <NativeSelect
                    aria-label={`Role of ${u.username}`}
                    size="xs"
                    data={['admin', 'operator', 'viewer']}
                    value={u.role}
                    onChange={(e) => {
                      const next = e.currentTarget.value;
                      void run(() => put(`/v1/users/${u.id}`, { role: next }));
                    }}
                  />
                ),
              },
              {
                label: 'Set password',
                render: (u) => (
                  <Group gap={4} wrap="nowrap">
                    <TextInput
                      size="xs"
                      type="password"
                      autoComplete="new-password"
                      aria-label={`New password for ${u.username}`}
                      value={newPassword[u.id] ?? ''}
                      onChange={(e) => {
                        const v = e.currentTarget.value;
                        setNewPassword((p) => ({ ...p, [u.id]: v }));
                      }}
                    />
                    <Button
                      size="xs"
                      variant="default"
                      disabled={!newPassword[u.id]}
                      onClick={() =>
                        void run(async () => {
                          await put(`/v1/users/${u.id}`, { password: newPassword[u.id] });
                          setNewPassword((p) => ({ ...p, [u.id]: '' }));
                        })
                      }
                    >
                      Set
                    </Button>
                  </Group>
                ),
              },
              { label: 'Created', render: (u) => <When at={u.created_at} /> },
              {
                label: 'Actions',
                render: (u) => (
                  <Button size="xs" variant="subtle" color="red" aria-label={`Delete user ${u.username}`} onClick={() => void run(() => del(`/v1/users/${u.id}`), `Delete ${u.username}? Its tokens stop working at once.`)}>
                    Delete
                  </Button>
                ),
              },
            ]}
          />
        )}
      </Show>
      <FormCard
        title="New user"
        onSubmit={() =>
          void run(async () => {
            await post('/v1/users', { username, role, ...(password ? { password } : {}) });
            setUsername('');
            setPassword('');
          })
        }
      >
        <TextInput label="Username" required value={username} onChange={(e) => setUsername(e.currentTarget.value)} error={fieldError(error, 'username')} />
        <NativeSelect label="Role" data={['admin', 'operator', 'viewer']} value={role} onChange={(e) => setRole(e.currentTarget.value)} error={fieldError(error, 'role')} />
        <TextInput label="Password" type="password" autoComplete="new-password" description="8 characters or more; empty for an account that works through tokens only" value={password} onChange={(e) => setPassword(e.currentTarget.value)} error={fieldError(error, 'password')} />
        <Group><Button type="submit">Create user</Button></Group>
      </FormCard>
    </div>
  );
}

interface Group_ {
  id: string;
  name: string;
  created_by: string;
  created_at: string;
}

function Groups({ kind }: { kind: 'teams' | 'orgs' }) {
  const list = useFetch<Record<string, Group_[]>>(`/v1/${kind}`);
  const users = useFetch<{ users: User[] }>('/v1/users');
  const { error, run } = useAction(list.reload);
  const [name, setName] = useState('');
  const [member, setMember] = useState<Record<string, string>>({});
  const noun = kind === 'teams' ? 'team' : 'organization';
  return (
    <div className="section">
      <ErrorNote error={error} fields={['name']} />
      <Show loaded={list}>
        {(data) => (
          <DataTable<Group_>
            label={kind === 'teams' ? 'Teams' : 'Organizations'}
            rows={data[kind] ?? []}
            rowKey={(g) => g.id}
            empty={`No ${noun} yet.`}
            columns={[
              { label: 'Name', render: (g) => g.name },
              { label: 'Id', render: (g) => <span className="id">{g.id}</span> },
              { label: 'Members', render: (g) => <Members kind={kind} id={g.id} /> },
              {
                label: 'Add member',
                render: (g) => (
                  <Group gap={4} wrap="nowrap">
                    <NativeSelect
                      size="xs"
                      aria-label={`Account to add to ${g.name}`}
                      data={[{ value: '', label: 'Choose…' }, ...(users.data?.users ?? []).map((u) => ({ value: u.id, label: u.username }))]}
                      value={member[g.id] ?? ''}
                      onChange={(e) => {
                        const v = e.currentTarget.value;
                        setMember((m) => ({ ...m, [g.id]: v }));
                      }}
                    />
                    <Button size="xs" variant="default" disabled={!member[g.id]} onClick={() => void run(() => post(`/v1/${kind}/${g.id}/members`, { user_id: member[g.id] }))}>
                      Add
                    </Button>
                  </Group>
                ),
              },
              {
                label: 'Actions',
                render: (g) => (
                  <Button size="xs" variant="subtle" color="red" aria-label={`Delete ${noun} ${g.name}`} onClick={() => void run(() => del(`/v1/${kind}/${g.id}`), `Delete the ${noun} ${g.name}?`)}>
                    Delete
                  </Button>
                ),
              },
            ]}
          />
        )}
      </Show>
      <FormCard title={`New ${noun}`} onSubmit={() => void run(async () => { await post(`/v1/${kind}`, { name }); setName(''); })}>
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
        <Group><Button type="submit">Create {noun}</Button></Group>
      </FormCard>
    </div>
  );
}

function Members({ kind, id }: { kind: string; id: string }) {
  const members = useFetch<{ members: { user_id: string; username: string; role?: string }[] }>(`/v1/${kind}/${id}/members`);
  if (!members.data) return <Text size="sm">…</Text>;
  return <Text size="sm">{members.data.members.map((m) => `${m.username}${m.role ? ` (${m.role})` : ''}`).join(', ') || 'none'}</Text>;
}

interface Grant {
  id: string;
  object: string;
  kind: string;
  permission: string;
  user_id: string | null;
  team_id: string | null;
  created_by: string;
}

function Grants() {
  const grants = useFetch<{ grants: Grant[] }>('/v1/grants');
  const users = useFetch<{ users: User[] }>('/v1/users');
  const teams = useFetch<{ teams: Group_[] }>('/v1/teams');
  const { error, run } = useAction(grants.reload);
  const [object, setObject] = useState('');
  const [permission, setPermission] = useState('use');
  const [who, setWho] = useState('');
  const names = new Map<string, string>([...(users.data?.users ?? []).map((u) => [u.id, u.username] as [string, string]), ...(teams.data?.teams ?? []).map((t) => [t.id, `team ${t.name}`] as [string, string])]);
  return (
    <div className="section">
      <ErrorNote error={error} fields={['object', 'permission', 'user_id', 'team_id']} />
      <Show loaded={grants}>
        {(data) => (
          <DataTable<Grant>
            label="Grants"
            rows={data.grants}
            rowKey={(g) => g.id}
            empty="No grant yet."
            columns={[
              { label: 'Object', render: (g) => <span className="id">{g.object}</span> },
              { label: 'Permission', render: (g) => <Badge variant="light">{g.permission}</Badge> },
              { label: 'To', render: (g) => names.get(g.user_id ?? g.team_id ?? '') ?? g.user_id ?? g.team_id },
              { label: 'By', render: (g) => g.created_by },
              { label: 'Actions', render: (g) => <Button size="xs" variant="subtle" color="red" aria-label={`Revoke grant ${g.id}`} onClick={() => void run(() => del(`/v1/grants/${g.id}`))}>Revoke</Button> },
            ]}
          />
        )}
      </Show>
      <FormCard
        title="New grant"
        onSubmit={() =>
          void run(() => post('/v1/grants', { object, permission, ...(who.startsWith('team_') ? { team_id: who } : { user_id: who }) }))
        }
      >
        <TextInput label="Object" description="tpl_…, cred_…, inv_…, prj_… or queue:<name>" required value={object} onChange={(e) => setObject(e.currentTarget.value)} error={fieldError(error, 'object')} />
        <NativeSelect label="Permission" data={['read', 'use', 'manage']} value={permission} onChange={(e) => setPermission(e.currentTarget.value)} />
        <NativeSelect
          label="To"
          data={[{ value: '', label: 'Choose an account or team…' }, ...[...names.entries()].map(([value, label]) => ({ value, label }))]}
          value={who}
          onChange={(e) => setWho(e.currentTarget.value)}
          error={fieldError(error, 'user_id', 'team_id')}
        />
        <Group><Button type="submit">Grant</Button></Group>
      </FormCard>
    </div>
  );
}

interface Token {
  id: string;
  name: string;
  kind: string;
  username?: string;
  created_by: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
}

function Tokens() {
  const tokens = useFetch<{ tokens: Token[] }>('/v1/tokens');
  const { me } = useSession();
  const { error, run } = useAction(tokens.reload);
  const [name, setName] = useState('');
  const [kind, setKind] = useState('user');
  const [once, setOnce] = useState<{ label: string; value: string }[] | null>(null);
  return (
    <div className="section">
      <ErrorNote error={error} fields={['name', 'kind']} />
      <Show loaded={tokens}>
        {(data) => (
          <DataTable<Token>
            label="Tokens"
            rows={data.tokens}
            rowKey={(t) => t.id}
            empty="No token."
            columns={[
              { label: 'Name', render: (t) => t.name },
              { label: 'Kind', render: (t) => <Badge variant="light">{t.kind}</Badge> },
              { label: 'Account', render: (t) => t.username ?? '' },
              { label: 'Last used', render: (t) => <When at={t.last_used_at} /> },
              { label: 'Expires', render: (t) => (t.expires_at ? formatTime(t.expires_at) : 'never') },
              { label: 'Actions', render: (t) => <Button size="xs" variant="subtle" color="red" aria-label={`Revoke token ${t.name} (${t.id})`} onClick={() => void run(() => del(`/v1/tokens/${t.id}`), `Revoke ${t.name}? It stops working at once.`)}>Revoke</Button> },
            ]}
          />
        )}
      </Show>
      <FormCard
        title={`New API token for ${me.username}`}
        onSubmit={() =>
          void run(async () => {
            const answer = await post<{ token: string }>('/v1/tokens', { name, kind });
            setName('');
            setOnce([{ label: 'API token', value: answer.token }]);
          })
        }
      >
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
        <NativeSelect label="Kind" data={[{ value: 'user', label: 'user (a person’s script)' }, { value: 'agent', label: 'agent (its runs are held for a person)' }]} value={kind} onChange={(e) => setKind(e.currentTarget.value)} />
        <Group><Button type="submit">Mint token</Button></Group>
      </FormCard>
      <ShownOnce title="The new token" values={once} onClose={() => setOnce(null)} />
    </div>
  );
}

interface Policy {
  id: string;
  name: string;
  effect: string;
  tool: string | null;
  command_contains: string | null;
  queue: string | null;
  actor_kind: string | null;
  require_reason: boolean;
  require_distinct_approver: boolean;
  exclude_dry_run: boolean;
}

function Policies() {
  const policies = useFetch<{ policies: Policy[] }>('/v1/policies');
  const { error, run } = useAction(policies.reload);
  const [name, setName] = useState('');
  const [effect, setEffect] = useState('require_approval');
  const [tool, setTool] = useState('');
  const [contains, setContains] = useState('');
  const [requireReason, setRequireReason] = useState(false);
  return (
    <div className="section">
      <ErrorNote error={error} fields={['name', 'effect', 'tool', 'command_contains', 'require_reason']} />
      <Show loaded={policies}>
        {(data) => (
          <DataTable<Policy>
            label="Approval policies"
            rows={data.policies}
            rowKey={(p) => p.id}
            empty="No stored policy. Agent runs are still held by the built-in agent hold."
            columns={[
              { label: 'Name', render: (p) => p.name || '—' },
              { label: 'Effect', render: (p) => <Badge variant="light" color={p.effect === 'deny' ? 'red' : p.effect === 'exempt' ? 'gray' : 'orange'}>{p.effect.replace('_', ' ')}</Badge> },
              {
                label: 'Matches',
                render: (p) =>
                  [p.tool && `tool ${p.tool}`, p.command_contains && `command contains “${p.command_contains}”`, p.queue !== null && `queue ${p.queue || 'default'}`, p.actor_kind && `${p.actor_kind} runs`].filter(Boolean).join(', ') || 'every run',
              },
              { label: 'Asks', render: (p) => [p.require_reason && 'a reason', p.require_distinct_approver && 'another approver', p.exclude_dry_run && 'not dry runs'].filter(Boolean).join(', ') || '—' },
              { label: 'Actions', render: (p) => <Button size="xs" variant="subtle" color="red" aria-label={`Delete policy ${p.name || p.id}`} onClick={() => void run(() => del(`/v1/policies/${p.id}`), 'Delete this policy?')}>Delete</Button> },
            ]}
          />
        )}
      </Show>
      <FormCard
        title="New policy"
        onSubmit={() =>
          void run(async () => {
            await post('/v1/policies', { name, effect, tool: tool || null, command_contains: contains || null, ...(effect === 'exempt' ? {} : { require_reason: requireReason }) });
            setName('');
            setContains('');
          })
        }
      >
        <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
        <NativeSelect label="Effect" data={[{ value: 'require_approval', label: 'hold for approval' }, { value: 'deny', label: 'refuse (Team)' }, { value: 'exempt', label: 'exempt agent runs from the agent hold' }]} value={effect} onChange={(e) => setEffect(e.currentTarget.value)} error={fieldError(error, 'effect')} />
        <TextInput label="Tool" description="Empty matches any tool" value={tool} onChange={(e) => setTool(e.currentTarget.value)} error={fieldError(error, 'tool')} />
        <TextInput label="Command contains" description="Empty matches any command" value={contains} onChange={(e) => setContains(e.currentTarget.value)} error={fieldError(error, 'command_contains')} />
        {effect !== 'exempt' && <Checkbox label="An approver must give a reason" checked={requireReason} onChange={(e) => setRequireReason(e.currentTarget.checked)} />}
        <Group><Button type="submit">Save policy</Button></Group>
      </FormCard>
    </div>
  );
}

interface Check {
  name: string;
  ok: boolean;
  severity: string;
  detail: string;
  count?: number;
}

function Doctor() {
  const doctor = useFetch<{ ok: boolean; checked_at: string; checks: Check[]; ansible: { core_version: string | null; tested_releases: string[] } }>('/v1/doctor');
  return (
    <div className="section">
      <Group mb="sm">
        <Button variant="default" onClick={() => void doctor.reload()}>Check again</Button>
      </Group>
      <Show loaded={doctor}>
        {(d) => (
          <>
            <Text role="status" fw={600} c={d.ok ? 'green' : 'red'}>
              {d.ok ? 'The install is healthy' : 'The install has a failing check'} (checked {formatTime(d.checked_at)}; ansible-core {d.ansible.core_version ?? 'not installed'})
            </Text>
            <DataTable<Check>
              label="Health checks"
              rows={d.checks}
              rowKey={(c) => c.name}
              empty="No check."
              columns={[
                { label: 'Check', render: (c) => c.name.replace(/_/g, ' ') },
                { label: 'Result', render: (c) => <StatusBadge status={c.ok ? 'ok' : c.severity === 'error' ? 'failed' : 'retrying'} /> },
                { label: 'Severity', render: (c) => c.severity },
                { label: 'Detail', render: (c) => c.detail },
              ]}
            />
          </>
        )}
      </Show>
    </div>
  );
}
