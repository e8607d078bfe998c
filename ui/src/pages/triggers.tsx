import { Badge, Button, Checkbox, Group, NativeSelect, Stack, TextInput } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { del, post } from '../api';
import { useHasRole } from '../session';
import { DataTable, ErrorNote, PageTitle, Show, When, fieldError, useFetch } from '../ui';
import type { Template } from './launch';
import { ShownOnce } from './shown-once';

interface Trigger {
  id: string;
  name: string;
  kind: string;
  template_id: string;
  enforce_signature: boolean;
  last_error: string | null;
  last_delivery_at: string | null;
  secret_rotated_at: string | null;
}

export function TriggersPage() {
  const triggers = useFetch<{ triggers: Trigger[] }>('/v1/triggers', 10_000);
  const templates = useFetch<{ templates: Template[] }>('/v1/templates');
  const names = new Map((templates.data?.templates ?? []).map((t) => [t.id, t.name]));
  const isOperator = useHasRole('operator');
  const [once, setOnce] = useState<{ label: string; value: string }[] | null>(null);
  const [error, setError] = useState<unknown>();

  const rotate = async (t: Trigger) => {
    if (!window.confirm(`Rotate the signing secret of ${t.name}? Deliveries signed with the old one are refused from now on.`)) return;
    try {
      const answer = await post<{ secret: string }>(`/v1/triggers/${t.id}/rotate-secret`);
      setOnce([{ label: 'New signing secret', value: answer.secret }]);
      await triggers.reload();
    } catch (err) {
      setError(err);
    }
  };
  const remove = async (t: Trigger) => {
    if (!window.confirm(`Delete the trigger ${t.name}? Its hook stops answering.`)) return;
    try {
      await del(`/v1/triggers/${t.id}`);
      await triggers.reload();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <>
      <PageTitle>Triggers</PageTitle>
      <ErrorNote error={error} />
      <Show loaded={triggers}>
        {(data) => (
          <DataTable<Trigger>
            label="Triggers"
            rows={data.triggers}
            rowKey={(t) => t.id}
            empty="No trigger yet."
            columns={[
              { label: 'Name', render: (t) => t.name },
              { label: 'Launches', render: (t) => names.get(t.template_id) ?? t.template_id },
              { label: 'Signature', render: (t) => <Badge variant="light" color={t.enforce_signature ? 'green' : 'orange'}>{t.enforce_signature ? 'required' : 'optional'}</Badge> },
              { label: 'Last delivery', render: (t) => <When at={t.last_delivery_at} /> },
              { label: 'Last error', render: (t) => t.last_error ?? '—' },
              {
                label: 'Actions',
                render: (t) =>
                  isOperator && (
                    <Group gap={4} wrap="nowrap">
                      <Button size="xs" variant="subtle" onClick={() => void rotate(t)} aria-label={`Rotate the secret of ${t.name}`}>
                        Rotate secret
                      </Button>
                      <Button size="xs" variant="subtle" color="red" onClick={() => void remove(t)} aria-label={`Delete trigger ${t.name}`}>
                        Delete
                      </Button>
                    </Group>
                  ),
              },
            ]}
          />
        )}
      </Show>
      {isOperator && (
        <NewTrigger
          templates={templates.data?.templates ?? []}
          onCreated={(hookUrl, secret) => {
            setOnce([
              { label: 'Hook URL', value: hookUrl },
              { label: 'Signing secret', value: secret },
            ]);
            void triggers.reload();
          }}
        />
      )}
      <ShownOnce title="The trigger's hook and secret" values={once} onClose={() => setOnce(null)} />
    </>
  );
}

function NewTrigger({ templates, onCreated }: { templates: Template[]; onCreated: (hookUrl: string, secret: string) => void }) {
  const [name, setName] = useState('');
  const [templateId, setTemplateId] = useState('');
  const [enforce, setEnforce] = useState(true);
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const answer = await post<{ hook_path: string; secret: string }>('/v1/triggers', { name, template_id: templateId, enforce_signature: enforce });
      setName('');
      onCreated(`${window.location.origin}${answer.hook_path}`, answer.secret);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form onSubmit={submit} className="card section" aria-labelledby="new-trigger-title">
      <Stack>
        <h2 id="new-trigger-title">New push trigger</h2>
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
        <NativeSelect
          label="Template to launch"
          data={[{ value: '', label: 'Choose a template…' }, ...templates.map((t) => ({ value: t.id, label: t.name }))]}
          value={templateId}
          onChange={(e) => setTemplateId(e.currentTarget.value)}
          error={fieldError(error, 'template_id')}
        />
        <Checkbox label="Require a signature on every delivery" checked={enforce} onChange={(e) => setEnforce(e.currentTarget.checked)} />
        <ErrorNote error={error} fields={['name', 'template_id']} />
        <Group>
          <Button type="submit" loading={busy}>
            Make trigger
          </Button>
        </Group>
      </Stack>
    </form>
  );
}
