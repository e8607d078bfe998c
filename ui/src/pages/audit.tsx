import { Alert, Button, Code, Group, Stack, Text, TextInput } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { download, get } from '../api';
import { useHasRole } from '../session';
import { DataTable, ErrorNote, Field, Fields, PageTitle, Pager, Show, formatTime, useFetch } from '../ui';

interface Verification {
  ok: boolean;
  count: number;
  head_hash?: string;
  merkle_root?: string;
  anchors?: number;
  reason?: string;
  broke_at?: number;
  broke_seq?: number;
  detail?: string;
  anchor_problems?: { size: number; problem: string }[];
}

interface Entry {
  seq: number;
  id: string;
  at: string;
  actor: string;
  method: string;
  path: string;
  outcome: number;
  body: { kind?: string } | null;
  run_id: string | null;
}

export function AuditPage() {
  const isAdmin = useHasRole('admin');
  const [verification, setVerification] = useState<Verification>();
  const [verifiedAt, setVerifiedAt] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);

  const verify = async () => {
    setBusy(true);
    setError(undefined);
    try {
      setVerification(await get<Verification>('/v1/audit/verify'));
      setVerifiedAt(new Date().toISOString());
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <PageTitle>Audit</PageTitle>
      <Text size="sm" className="muted">
        Every change is an entry of a hash-linked chain, with signed anchors. Verify it here, or download a signed bundle or a run's receipt and check it offline with <Code>cairn audit verify --seal seal.json</Code>.
      </Text>
      <section className="section card" aria-labelledby="verify-title">
        <h2 id="verify-title">Verify the chain</h2>
        <Group>
          <Button onClick={() => void verify()} loading={busy}>
            Verify the audit chain
          </Button>
          <Button variant="default" onClick={() => void download('/.well-known/seal.json', 'seal.json').catch(setError)}>
            Download the seal
          </Button>
          {isAdmin && (
            <Button variant="default" onClick={() => void download('/v1/audit/bundle', 'audit-bundle.json').catch(setError)}>
              Download a signed bundle
            </Button>
          )}
        </Group>
        <ErrorNote error={error} />
        {verification && (
          <Alert mt="md" color={verification.ok ? 'green' : 'red'} title={verification.ok ? 'The chain verifies' : 'The chain does not verify'} role="status">
            <Fields>
              <Field label="Entries">{verification.count}</Field>
              {verification.ok ? (
                <>
                  <Field label="Head hash"><Code>{verification.head_hash}</Code></Field>
                  <Field label="Merkle root"><Code>{verification.merkle_root}</Code></Field>
                  <Field label="Signed anchors">{verification.anchors}</Field>
                </>
              ) : (
                <>
                  <Field label="Reason">{verification.reason}</Field>
                  <Field label="Breaks at">entry {verification.broke_seq} (position {verification.broke_at})</Field>
                  <Field label="Detail">{verification.detail}</Field>
                  {verification.anchor_problems?.length ? <Field label="Anchors">{verification.anchor_problems.map((p) => `${p.problem} at ${p.size}`).join('; ')}</Field> : null}
                </>
              )}
              <Field label="Checked">{formatTime(verifiedAt)}</Field>
            </Fields>
          </Alert>
        )}
      </section>
      <Receipt />
      {isAdmin && <Trail />}
    </>
  );
}

function Receipt() {
  const [runId, setRunId] = useState('');
  const [error, setError] = useState<unknown>();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    try {
      await download(`/v1/runs/${encodeURIComponent(runId.trim())}/receipt`, `${runId.trim()}-receipt.jws`);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form className="section card" onSubmit={submit} aria-labelledby="receipt-title">
      <Stack>
        <h2 id="receipt-title">A run's signed receipt</h2>
        <Group align="flex-end">
          <TextInput label="Run id" required value={runId} onChange={(e) => setRunId(e.currentTarget.value)} placeholder="run_…" />
          <Button type="submit" variant="default">
            Download receipt
          </Button>
        </Group>
        <ErrorNote error={error} />
      </Stack>
    </form>
  );
}

const PAGE = 50;

function Trail() {
  const [offset, setOffset] = useState(0);
  const entries = useFetch<{ entries: Entry[]; count: number; total: number }>(`/v1/audit?limit=${PAGE}&offset=${offset}`);
  return (
    <section className="section" aria-labelledby="trail-title">
      <h2 id="trail-title">The trail, newest first</h2>
      <Show loaded={entries}>
        {(data) => (
          <>
            <DataTable<Entry>
              label="Audit entries"
              rows={data.entries}
              rowKey={(e) => e.id}
              empty="No entry."
              columns={[
                { label: '#', render: (e) => e.seq },
                { label: 'At', render: (e) => formatTime(e.at) },
                { label: 'Actor', render: (e) => e.actor },
                { label: 'Request', render: (e) => <span className="mono">{e.method} {e.path}</span> },
                { label: 'Outcome', render: (e) => e.outcome },
                { label: 'Kind', render: (e) => e.body?.kind ?? '—' },
              ]}
            />
            <Pager offset={offset} limit={PAGE} count={data.count} total={data.total} noun="entries" onChange={setOffset} />
          </>
        )}
      </Show>
    </section>
  );
}
