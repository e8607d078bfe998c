import { Badge, Button, Code, Group, Modal, Stack, Tabs, Text, TextInput, Textarea } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { del, get, post } from '../api';
import { Link, navigate } from '../router';
import { useHasRole } from '../session';
import { DataTable, ErrorNote, Field, Fields, Json, Loading, PageTitle, Show, When, fieldError, formatTime, useFetch } from '../ui';

interface Inventory {
  id: string;
  name: string;
  kind: string;
  format: string;
  host_count: number;
  size_bytes: number;
  content?: string;
  content_masked?: boolean;
  inputs?: string[];
  host_filter?: string;
  created_by: string;
  updated_at: string;
}

interface FactRow {
  host: string;
  inventory_id: string;
  run_id: string;
  gathered_at: string;
  size_bytes: number;
  facts?: Record<string, unknown>;
}

export function InventoriesPage() {
  return (
    <>
      <PageTitle>Inventories and hosts</PageTitle>
      <Tabs defaultValue="inventories" keepMounted={false}>
        <Tabs.List aria-label="Inventories and the estate">
          <Tabs.Tab value="inventories">Inventories</Tabs.Tab>
          <Tabs.Tab value="estate">Estate</Tabs.Tab>
          <Tabs.Tab value="fleet">Fleet</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="inventories">
          <InventoryList />
        </Tabs.Panel>
        <Tabs.Panel value="estate">
          <Estate />
        </Tabs.Panel>
        <Tabs.Panel value="fleet">
          <Fleet />
        </Tabs.Panel>
      </Tabs>
    </>
  );
}

function InventoryList() {
  const inventories = useFetch<{ inventories: Inventory[] }>('/v1/inventories');
  const isOperator = useHasRole('operator');
  return (
    <div className="section">
      <Show loaded={inventories}>
        {(data) => (
          <DataTable<Inventory>
            label="Inventories"
            rows={data.inventories}
            rowKey={(i) => i.id}
            empty="No stored inventory yet."
            columns={[
              { label: 'Name', render: (i) => <Link to={`/inventories/${i.id}`}>{i.name}</Link> },
              { label: 'Kind', render: (i) => <Badge variant="light">{i.kind}</Badge> },
              { label: 'Hosts', render: (i) => i.host_count },
              { label: 'Format', render: (i) => i.format },
              { label: 'Updated', render: (i) => <When at={i.updated_at} /> },
            ]}
          />
        )}
      </Show>
      {isOperator && <NewInventory onCreated={(id) => navigate(`/inventories/${id}`)} />}
    </div>
  );
}

function NewInventory({ onCreated }: { onCreated: (id: string) => void }) {
  const [name, setName] = useState('');
  const [content, setContent] = useState('[web]\nweb1 ansible_host=127.0.0.1\n');
  const [error, setError] = useState<unknown>();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    try {
      const inventory = await post<Inventory>('/v1/inventories', { name, content });
      onCreated(inventory.id);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form onSubmit={submit} className="card section" aria-labelledby="new-inventory-title">
      <Stack>
        <h2 id="new-inventory-title">New static inventory</h2>
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
        <Textarea label="Content (INI or YAML)" classNames={{ input: 'mono' }} autosize minRows={4} value={content} onChange={(e) => setContent(e.currentTarget.value)} error={fieldError(error, 'content')} />
        <ErrorNote error={error} fields={['name', 'content']} />
        <Group>
          <Button type="submit">Save inventory</Button>
        </Group>
      </Stack>
    </form>
  );
}

export function InventoryPage({ id }: { id: string }) {
  const inventory = useFetch<Inventory>(`/v1/inventories/${encodeURIComponent(id)}`);
  const isOperator = useHasRole('operator');
  const [error, setError] = useState<unknown>();
  const remove = async (inv: Inventory) => {
    if (!window.confirm(`Delete the inventory ${inv.name}, its grants and its cached facts?`)) return;
    try {
      await del(`/v1/inventories/${inv.id}`);
      navigate('/inventories');
    } catch (err) {
      setError(err);
    }
  };
  return (
    <Show loaded={inventory}>
      {(inv) => (
        <>
          <PageTitle actions={isOperator && <Button color="red" variant="light" onClick={() => void remove(inv)}>Delete inventory</Button>}>{inv.name}</PageTitle>
          <ErrorNote error={error} />
          <div className="two-columns">
            <section className="card" aria-labelledby="inv-content-title">
              <h2 id="inv-content-title">Content</h2>
              <Fields>
                <Field label="Kind">{inv.kind}</Field>
                <Field label="Hosts">{inv.host_count}</Field>
                {inv.inputs && <Field label="Inputs">{inv.inputs.join(', ')}</Field>}
                {inv.host_filter && <Field label="Host filter">{inv.host_filter}</Field>}
              </Fields>
              {inv.content_masked && <Text size="sm" className="muted">Secret-looking values are shown as [masked].</Text>}
              {inv.content ? <Code block className="command" aria-label="Inventory content">{inv.content}</Code> : null}
            </section>
            <Hosts inventoryId={inv.id} />
          </div>
          <Facts inventoryId={inv.id} />
        </>
      )}
    </Show>
  );
}

function Hosts({ inventoryId }: { inventoryId: string }) {
  const [limit, setLimit] = useState('');
  const [answer, setAnswer] = useState<{ hosts: string[]; engine: string; ansible_core: string | null }>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const resolve = async (e?: FormEvent) => {
    e?.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      setAnswer(await post(`/v1/inventories/${inventoryId}/preview`, limit ? { limit } : {}));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section className="card" aria-labelledby="inv-hosts-title">
      <h2 id="inv-hosts-title">Hosts a launch reaches</h2>
      <form onSubmit={resolve}>
        <Group align="flex-end">
          <TextInput label="Limit" description="An Ansible host pattern; empty for all" value={limit} onChange={(e) => setLimit(e.currentTarget.value)} error={fieldError(error, 'limit')} />
          <Button type="submit" loading={busy}>
            Resolve hosts
          </Button>
        </Group>
      </form>
      <ErrorNote error={error} fields={['limit']} />
      {answer && (
        <>
          <Text size="sm" mt="sm">
            {answer.hosts.length} hosts, resolved by {answer.engine}
            {answer.ansible_core ? ` (ansible-core ${answer.ansible_core})` : ''}:
          </Text>
          <ul className="mono">{answer.hosts.map((h) => <li key={h}>{h}</li>)}</ul>
        </>
      )}
    </section>
  );
}

function Facts({ inventoryId }: { inventoryId: string }) {
  const facts = useFetch<{ hosts: FactRow[]; withheld: number }>(`/v1/inventories/${inventoryId}/facts`);
  const [open, setOpen] = useState<FactRow & { facts_masked?: boolean }>();
  const [error, setError] = useState<unknown>();
  const show = async (host: string) => {
    try {
      setOpen(await get(`/v1/inventories/${inventoryId}/facts/${encodeURIComponent(host)}`));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section className="section" aria-labelledby="facts-title">
      <h2 id="facts-title">Cached facts</h2>
      <ErrorNote error={error} />
      {facts.error ? (
        <Text size="sm" className="muted">{facts.error.message}</Text>
      ) : !facts.data ? (
        <Loading />
      ) : (
        <DataTable<FactRow>
          label="Cached facts by host"
          rows={facts.data.hosts}
          rowKey={(h) => h.host}
          empty="No facts cached for this inventory's hosts."
          columns={[
            { label: 'Host', render: (h) => <Button variant="subtle" size="xs" onClick={() => void show(h.host)}>{h.host}</Button> },
            { label: 'Gathered', render: (h) => formatTime(h.gathered_at) },
            { label: 'By run', render: (h) => <Link to={`/runs/${h.run_id}`} className="id">{h.run_id}</Link> },
            { label: 'Size', render: (h) => `${h.size_bytes} bytes` },
          ]}
        />
      )}
      <Modal opened={open !== undefined} onClose={() => setOpen(undefined)} title={`Facts of ${open?.host ?? ''}`} size="xl">
        {open && <Json value={open.facts} label={`Facts of ${open.host}`} />}
      </Modal>
    </section>
  );
}

function Estate() {
  const [at, setAt] = useState('');
  const instant = at ? new Date(at).toISOString() : '';
  const estate = useFetch<{ hosts: FactRow[]; total: number; withheld: number; horizon: string | null; before_history: boolean; at: string }>(`/v1/estate${instant ? `?at=${encodeURIComponent(instant)}` : ''}`);
  return (
    <div className="section">
      <Group align="flex-end">
        <TextInput label="At" type="datetime-local" description="Empty for now" value={at} onChange={(e) => setAt(e.currentTarget.value)} />
      </Group>
      <Show loaded={estate}>
        {(e) => (
          <>
            <Text size="sm" mt="sm">
              {e.total} hosts at {formatTime(e.at)}
              {e.withheld ? `; ${e.withheld} withheld` : ''}
              {e.horizon ? `; history from ${formatTime(e.horizon)}` : ''}
            </Text>
            <DataTable<FactRow>
              label="The estate"
              rows={e.hosts}
              rowKey={(h) => h.host}
              empty="No host has facts at this instant."
              columns={[
                { label: 'Host', render: (h) => h.host },
                { label: 'System', render: (h) => [h.facts?.ansible_distribution, h.facts?.ansible_distribution_version].filter(Boolean).join(' ') || '—' },
                { label: 'Kernel', render: (h) => String(h.facts?.ansible_kernel ?? '—') },
                { label: 'Gathered', render: (h) => formatTime(h.gathered_at) },
                { label: 'Run', render: (h) => <Link to={`/runs/${h.run_id}`} className="id">{h.run_id}</Link> },
              ]}
            />
          </>
        )}
      </Show>
    </div>
  );
}

function Fleet() {
  const fleet = useFetch<{ hosts: { host: string; runs: number; failures: number; failure_rate: number; flaky: boolean; last_status: string; last_run_id: string; last_seen: string }[] }>('/v1/fleet');
  return (
    <div className="section">
      <Show loaded={fleet}>
        {(f) => (
          <DataTable
            label="Fleet health"
            rows={f.hosts}
            rowKey={(h) => h.host}
            empty="No ansible run has reported hosts yet."
            columns={[
              { label: 'Host', render: (h) => h.host },
              { label: 'Runs', render: (h) => h.runs },
              { label: 'Failures', render: (h) => `${h.failures} (${Math.round(h.failure_rate * 100)} %)` },
              { label: 'Flaky', render: (h) => (h.flaky ? <Badge color="orange">flaky</Badge> : 'no') },
              { label: 'Last', render: (h) => <Link to={`/runs/${h.last_run_id}`}>{h.last_status}</Link> },
              { label: 'Seen', render: (h) => <When at={h.last_seen} /> },
            ]}
          />
        )}
      </Show>
    </div>
  );
}
