import { Button, Group, Modal, NativeSelect, Stack, Text, TextInput } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { del, post } from '../api';
import { Link } from '../router';
import { useHasRole } from '../session';
import { DataTable, ErrorNote, PageTitle, Show, StatusBadge, When, fieldError, formatTime, useFetch } from '../ui';

interface Target {
  id: string;
  name: string;
  kind: string;
  url: string | null;
  key_set: boolean;
  to: string | null;
  delivery: { state: string; last_delivered_at: string | null; last_failed_at: string | null; last_failure_reason: string | null; failed_last_7_days: number };
}

/** A delivery about a run, or about a schedule's skipped fire (`run_id` null, the schedule and fire time instead). */
interface Delivery {
  id: string;
  run_id: string | null;
  schedule_id?: string;
  fire_at?: string | null;
  event: string;
  status: string;
  attempts: number;
  reason: string | null;
  queued_at: string;
  finished_at: string | null;
}

const KINDS: Record<string, ('url' | 'key' | 'to')[]> = {
  webhook: ['url'], chat_a: ['url'], chat_b: ['url'], chat_c: ['url'], chat_d: ['url'], chat_e: ['url'], topic: ['url'],
  incident: ['key'], annotation: ['url', 'key'], sms: ['to'], email: ['to'],
};

export function NotificationsPage() {
  const targets = useFetch<{ notifications: Target[] }>('/v1/notifications', 10_000);
  const isAdmin = useHasRole('admin');
  const [deliveriesOf, setDeliveriesOf] = useState<Target>();
  const [error, setError] = useState<unknown>();
  const remove = async (t: Target) => {
    if (!window.confirm(`Delete the target ${t.name} with its attachments and deliveries?`)) return;
    try {
      await del(`/v1/notifications/${t.id}`);
      await targets.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <>
      <PageTitle>Notification targets</PageTitle>
      <ErrorNote error={error} />
      <Show loaded={targets}>
        {(data) => (
          <DataTable<Target>
            label="Notification targets"
            rows={data.notifications}
            rowKey={(t) => t.id}
            empty="No target yet."
            columns={[
              { label: 'Name', render: (t) => t.name },
              { label: 'Kind', render: (t) => t.kind },
              { label: 'Destination', render: (t) => t.url ?? t.to ?? (t.key_set ? 'a routing key' : '—') },
              { label: 'Delivery', render: (t) => <StatusBadge status={t.delivery.state} /> },
              { label: 'Last delivered', render: (t) => <When at={t.delivery.last_delivered_at} /> },
              { label: 'Failed (7 days)', render: (t) => t.delivery.failed_last_7_days },
              {
                label: 'Actions',
                render: (t) => (
                  <Group gap={4} wrap="nowrap">
                    <Button size="xs" variant="subtle" onClick={() => setDeliveriesOf(t)} aria-label={`Deliveries to ${t.name}`}>Deliveries</Button>
                    {isAdmin && <Button size="xs" variant="subtle" color="red" onClick={() => void remove(t)} aria-label={`Delete target ${t.name}`}>Delete</Button>}
                  </Group>
                ),
              },
            ]}
          />
        )}
      </Show>
      {isAdmin && <NewTarget onCreated={targets.reload} />}
      <Modal opened={deliveriesOf !== undefined} onClose={() => setDeliveriesOf(undefined)} title={`Deliveries to ${deliveriesOf?.name ?? ''}`} size="xl">
        {deliveriesOf && <Deliveries target={deliveriesOf} />}
      </Modal>
    </>
  );
}

function Deliveries({ target }: { target: Target }) {
  const deliveries = useFetch<{ deliveries: Delivery[] }>(`/v1/notifications/${target.id}/deliveries`);
  return (
    <>
      {target.delivery.last_failure_reason && <Text size="sm" c="red">Last failure: {target.delivery.last_failure_reason}</Text>}
      <Show loaded={deliveries}>
        {(d) => (
          <DataTable<Delivery>
            label="Deliveries"
            rows={d.deliveries}
            rowKey={(x) => x.id}
            empty="Nothing delivered yet."
            columns={[
              {
                label: 'About',
                render: (x) =>
                  x.run_id ? (
                    <Link to={`/runs/${x.run_id}`} className="id">{x.run_id}</Link>
                  ) : (
                    <>
                      <Link to="/schedules" className="id">{x.schedule_id}</Link> skipped its fire at {formatTime(x.fire_at)}
                    </>
                  ),
              },
              { label: 'Event', render: (x) => x.event },
              { label: 'Status', render: (x) => <StatusBadge status={x.status} /> },
              { label: 'Attempts', render: (x) => x.attempts },
              { label: 'Reason', render: (x) => x.reason ?? '—' },
              { label: 'Finished', render: (x) => formatTime(x.finished_at) },
            ]}
          />
        )}
      </Show>
    </>
  );
}

function NewTarget({ onCreated }: { onCreated: () => void }) {
  const [name, setName] = useState('');
  const [kind, setKind] = useState('webhook');
  const [values, setValues] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    try {
      const body: Record<string, string> = { name, kind };
      for (const f of KINDS[kind]) if (values[f]) body[f] = values[f];
      await post('/v1/notifications', body);
      setName('');
      setValues({});
      onCreated();
    } catch (err) {
      setError(err);
    }
  };
  const labels = { url: 'URL (sealed; shown later as its host only)', key: 'Key (write-only)', to: 'To' };
  return (
    <form onSubmit={submit} className="card section" aria-labelledby="new-target-title">
      <Stack>
        <h2 id="new-target-title">New target</h2>
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
        <NativeSelect label="Kind" data={Object.keys(KINDS)} value={kind} onChange={(e) => setKind(e.currentTarget.value)} error={fieldError(error, 'kind')} />
        {KINDS[kind].map((f) => (
          <TextInput
            key={f}
            label={labels[f]}
            type={f === 'key' ? 'password' : 'text'}
            autoComplete="off"
            value={values[f] ?? ''}
            onChange={(e) => {
              const v = e.currentTarget.value;
              setValues((x) => ({ ...x, [f]: v }));
            }}
            error={fieldError(error, f)}
          />
        ))}
        <ErrorNote error={error} fields={['name', 'kind', 'url', 'key', 'to']} />
        <Group>
          <Button type="submit">Save target</Button>
        </Group>
      </Stack>
    </form>
  );
}
