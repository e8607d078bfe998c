import { Badge, Button, Group, Modal, NativeSelect, Stack, Text, TextInput, Textarea } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { del, post, put } from '../api';
import { useHasRole } from '../session';
import { DataTable, ErrorNote, PageTitle, Show, StatusBadge, When, fieldError, useFetch } from '../ui';

interface KindField {
  id: string;
  label: string;
  secret?: boolean;
  required?: boolean;
  multiline?: boolean;
  choices?: string[];
}
interface Kind {
  kind: string;
  label: string;
  federated: boolean;
  fields: KindField[];
}
interface Credential {
  id: string;
  name: string;
  description: string;
  kind: string;
  type_id: string | null;
  inputs: Record<string, string>;
  secrets_set: string[];
  status: string;
  org_id: string | null;
  created_by: string;
  updated_at: string;
}

export function CredentialsPage() {
  const credentials = useFetch<{ credentials: Credential[] }>('/v1/credentials');
  const kinds = useFetch<{ kinds: Kind[] }>('/v1/credential-kinds');
  const isOperator = useHasRole('operator');
  const [editing, setEditing] = useState<Credential | 'new'>();
  const [error, setError] = useState<unknown>();
  const remove = async (c: Credential) => {
    if (!window.confirm(`Delete the credential ${c.name}?`)) return;
    setError(undefined);
    try {
      await del(`/v1/credentials/${c.id}`);
      await credentials.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <>
      <PageTitle actions={isOperator && <Button onClick={() => setEditing('new')}>New credential</Button>}>Credentials</PageTitle>
      <Text size="sm" className="muted">Secrets are sealed on the server and never shown again, here or anywhere: a form only replaces them.</Text>
      <ErrorNote error={error} />
      <Show loaded={credentials}>
        {(data) => (
          <DataTable<Credential>
            label="Credentials"
            rows={data.credentials}
            rowKey={(c) => c.id}
            empty="No credential yet."
            columns={[
              { label: 'Name', render: (c) => c.name },
              { label: 'Kind', render: (c) => c.kind },
              { label: 'Status', render: (c) => <StatusBadge status={c.status} /> },
              { label: 'Secrets set', render: (c) => (c.secrets_set.length ? c.secrets_set.map((s) => <Badge key={s} variant="outline" mr={4}>{s}</Badge>) : 'none') },
              { label: 'Id', render: (c) => <span className="id">{c.id}</span> },
              { label: 'Updated', render: (c) => <When at={c.updated_at} /> },
              {
                label: 'Actions',
                render: (c) =>
                  isOperator && (
                    <Group gap={4} wrap="nowrap">
                      <Button size="xs" variant="subtle" onClick={() => setEditing(c)} aria-label={`Edit ${c.name}`}>Edit</Button>
                      <Button size="xs" variant="subtle" color="red" onClick={() => void remove(c)} aria-label={`Delete ${c.name}`}>Delete</Button>
                    </Group>
                  ),
              },
            ]}
          />
        )}
      </Show>
      <Modal opened={editing !== undefined} onClose={() => setEditing(undefined)} title={editing === 'new' ? 'New credential' : `Edit ${editing?.name ?? ''}`} size="lg">
        {editing !== undefined && (
          <CredentialForm
            kinds={kinds.data?.kinds ?? []}
            existing={editing === 'new' ? undefined : editing}
            onSaved={() => {
              setEditing(undefined);
              void credentials.reload();
            }}
          />
        )}
      </Modal>
    </>
  );
}

function CredentialForm({ kinds, existing, onSaved }: { kinds: Kind[]; existing?: Credential; onSaved: () => void }) {
  const [name, setName] = useState(existing?.name ?? '');
  const [description, setDescription] = useState(existing?.description ?? '');
  const [kind, setKind] = useState(existing?.kind ?? 'machine');
  // Settings start as stored; secret fields always start empty (empty keeps the stored secret).
  const [inputs, setInputs] = useState<Record<string, string>>(() => {
    const def = kinds.find((k) => k.kind === (existing?.kind ?? 'machine'));
    return Object.fromEntries((def?.fields ?? []).filter((f) => !f.secret).map((f) => [f.id, existing?.inputs[f.id] ?? '']));
  });
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const definition = kinds.find((k) => k.kind === kind);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    const sent = Object.fromEntries(Object.entries(inputs).filter(([id, v]) => v !== '' && definition?.fields.some((f) => f.id === id)));
    const body = { name, description, kind, inputs: sent };
    try {
      if (existing) await put(`/v1/credentials/${existing.id}`, body);
      else await post('/v1/credentials', body);
      setInputs({});
      onSaved();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form onSubmit={submit}>
      <Stack>
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
        <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} error={fieldError(error, 'description')} />
        <NativeSelect label="Kind" data={kinds.map((k) => ({ value: k.kind, label: k.label }))} value={kind} onChange={(e) => setKind(e.currentTarget.value)} error={fieldError(error, 'kind')} />
        {definition?.fields.map((f) => {
          const label = `${f.label}${f.secret ? ' (secret)' : ''}`;
          const value = inputs[f.id] ?? '';
          const set = (v: string) => setInputs((i) => ({ ...i, [f.id]: v }));
          const isSet = existing?.secrets_set.includes(f.id);
          const description = f.secret ? (isSet ? 'A value is stored; leave empty to keep it. Write-only.' : 'Write-only: sealed when saved, never shown.') : undefined;
          const fieldErr = fieldError(error, `inputs.${f.id}`);
          if (f.choices) {
            return <NativeSelect key={f.id} label={label} data={[{ value: '', label: '(none)' }, ...f.choices.map((c) => ({ value: c, label: c }))]} value={value} onChange={(e) => set(e.currentTarget.value)} error={fieldErr} required={f.required} />;
          }
          if (f.secret && f.multiline) {
            // A multi-line secret (a private key): typed into a text area that is never filled from the server.
            return <Textarea key={f.id} label={label} description={description} classNames={{ input: 'mono' }} autosize minRows={3} autoComplete="off" spellCheck={false} value={value} onChange={(e) => set(e.currentTarget.value)} error={fieldErr} />;
          }
          if (f.secret) return <TextInput key={f.id} type="password" autoComplete="new-password" label={label} description={description} value={value} onChange={(e) => set(e.currentTarget.value)} error={fieldErr} />;
          if (f.multiline) return <Textarea key={f.id} label={label} autosize minRows={2} value={value} onChange={(e) => set(e.currentTarget.value)} error={fieldErr} required={f.required} />;
          return <TextInput key={f.id} label={label} value={value} onChange={(e) => set(e.currentTarget.value)} error={fieldErr} required={f.required} />;
        })}
        <ErrorNote error={error} fields={['name', 'description', 'kind', 'inputs']} />
        <Group justify="flex-end">
          <Button type="submit" loading={busy}>
            Save credential
          </Button>
        </Group>
      </Stack>
    </form>
  );
}
