import { Button, Group, NativeSelect, Text, TextInput } from '@mantine/core';
import { useMemo, useState } from 'react';
import { query } from '../api';
import { Link, setSearch, useRoute } from '../router';
import { DataTable, ErrorNote, Loading, PageTitle, Pager, StatusBadge, When, duration, useFetch } from '../ui';

const STATUSES = ['', 'held', 'pending', 'running', 'succeeded', 'failed', 'canceled', 'interrupted', 'rejected'];
const PAGE = 50;

export interface RunRow {
  id: string;
  kind?: string;
  tool: string;
  status: string;
  command: string;
  requested_by: string;
  actor_kind?: string;
  template_id: string | null;
  queue: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  error: string | null;
  step_name?: string | null;
}

const FILTERS = ['status', 'tool', 'template_id', 'requested_by', 'queue', 'after', 'before', 'q'] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** A datetime-local value (the browser's zone) as RFC 3339, which the API asks for. */
function asInstant(local: string | undefined): string | undefined {
  if (!local) return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** A plain run's tool; a parent's kind; a step's or shard's name and tool. */
function whatRuns(r: RunRow): string {
  if (!r.kind || r.kind === 'run') return r.tool;
  const name = r.step_name ? `${r.kind} ${r.step_name}` : r.kind;
  return r.tool && r.tool !== r.kind ? `${name} · ${r.tool}` : name;
}

export function runDuration(run: RunRow): string {
  if (!run.started_at) return '—';
  const end = run.finished_at ? new Date(run.finished_at).getTime() : Date.now();
  return duration(Math.max(0, Math.round((end - new Date(run.started_at).getTime()) / 1000)));
}

export function RunsPage() {
  const { search } = useRoute();
  const initial: Filters = Object.fromEntries(FILTERS.map((k) => [k, search.get(k) ?? ''])) as Filters;
  const [draft, setDraft] = useState<Filters>(initial);
  const [filters, setFilters] = useState<Filters>(initial);
  const [offset, setOffset] = useState(Number(search.get('offset') ?? 0) || 0);
  const templates = useFetch<{ templates: { id: string; name: string }[] }>('/v1/templates');
  const templateNames = useMemo(() => new Map((templates.data?.templates ?? []).map((t) => [t.id, t.name])), [templates.data]);

  const path = `/v1/runs${query({
    limit: PAGE,
    offset,
    status: filters.status,
    tool: filters.tool,
    template_id: filters.template_id,
    requested_by: filters.requested_by,
    queue: filters.queue,
    q: filters.q,
    after: asInstant(filters.after),
    before: asInstant(filters.before),
  })}`;
  const runs = useFetch<{ runs: RunRow[]; total: number; count: number }>(path, 4000);

  const apply = (next: Filters, nextOffset = 0) => {
    setFilters(next);
    setOffset(nextOffset);
    setSearch({ ...next, offset: nextOffset ? String(nextOffset) : undefined });
  };
  const set = (key: keyof Filters) => (value: string) => setDraft((d) => ({ ...d, [key]: value }));

  return (
    <>
      <PageTitle actions={<Button component={Link as any} to="/launch">Launch</Button>}>Runs</PageTitle>
      <form
        className="filters"
        aria-label="Filter runs"
        onSubmit={(e) => {
          e.preventDefault();
          apply(draft);
        }}
      >
        <Group align="flex-end" gap="sm" wrap="wrap">
          <NativeSelect label="Status" data={STATUSES.map((s) => ({ value: s, label: s || 'any' }))} value={draft.status} onChange={(e) => set('status')(e.currentTarget.value)} />
          <NativeSelect label="Tool" data={[{ value: '', label: 'any' }, ...['bash', 'python', 'ansible'].map((t) => ({ value: t, label: t }))]} value={draft.tool} onChange={(e) => set('tool')(e.currentTarget.value)} />
          <NativeSelect
            label="Template"
            data={[{ value: '', label: 'any' }, ...(templates.data?.templates ?? []).map((t) => ({ value: t.id, label: t.name }))]}
            value={draft.template_id}
            onChange={(e) => set('template_id')(e.currentTarget.value)}
          />
          <TextInput label="Requested by" value={draft.requested_by} onChange={(e) => set('requested_by')(e.currentTarget.value)} />
          <TextInput label="Queue" placeholder="any" value={draft.queue} onChange={(e) => set('queue')(e.currentTarget.value)} />
          <TextInput label="Created after" type="datetime-local" value={draft.after} onChange={(e) => set('after')(e.currentTarget.value)} />
          <TextInput label="Created before" type="datetime-local" value={draft.before} onChange={(e) => set('before')(e.currentTarget.value)} />
          <TextInput label="Search" placeholder="id, command, error, requester" value={draft.q} onChange={(e) => set('q')(e.currentTarget.value)} />
          <Group gap="xs">
            <Button type="submit">Apply filters</Button>
            <Button
              variant="default"
              onClick={() => {
                setDraft({});
                apply({});
              }}
            >
              Clear
            </Button>
          </Group>
        </Group>
      </form>
      <ErrorNote error={runs.error} />
      {runs.loading && !runs.data ? (
        <Loading label="Loading runs" />
      ) : (
        runs.data && (
          <>
            <Text size="sm" className="muted" aria-live="polite">
              {runs.data.total} {runs.data.total === 1 ? 'run matches' : 'runs match'}
            </Text>
            <DataTable<RunRow>
              label="Runs"
              rows={runs.data.runs}
              rowKey={(r) => r.id}
              empty="No run matches these filters."
              columns={[
                { label: 'Run', render: (r) => <Link to={`/runs/${r.id}`} className="id">{r.id}</Link> },
                { label: 'Status', render: (r) => <StatusBadge status={r.status} /> },
                { label: 'What', render: (r) => whatRuns(r) },
                { label: 'Template', render: (r) => (r.template_id ? templateNames.get(r.template_id) ?? <span className="id">{r.template_id}</span> : '—') },
                { label: 'Requested by', render: (r) => (r.actor_kind === 'agent' ? `${r.requested_by} (agent)` : r.requested_by) },
                { label: 'Queue', render: (r) => r.queue || 'default' },
                { label: 'Created', render: (r) => <When at={r.created_at} /> },
                { label: 'Duration', render: (r) => runDuration(r) },
              ]}
            />
            <Pager offset={offset} limit={PAGE} count={runs.data.count} total={runs.data.total} noun="runs" onChange={(o) => apply(filters, o)} />
          </>
        )
      )}
    </>
  );
}
