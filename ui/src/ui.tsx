// Pieces every page uses: loading an API answer, errors, statuses, times, tables, paging.
import { Alert, Badge, Button, Code, Group, Loader, Table, Text, Title } from '@mantine/core';
import { useCallback, useEffect, useRef, useState, type ReactNode } from 'react';
import { ApiError, get } from './api';

export interface Loaded<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => Promise<void>;
}

/** GETs `path` (null: nothing yet), again on `reload`, and every `refreshMs` when given. */
export function useFetch<T = any>(path: string | null, refreshMs?: number): Loaded<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<Error>();
  const [loading, setLoading] = useState(path !== null);
  const latest = useRef(path);
  latest.current = path;
  const reload = useCallback(async () => {
    if (path === null) return;
    try {
      const answer = await get<T>(path);
      if (latest.current === path) {
        setData(answer);
        setError(undefined);
      }
    } catch (err) {
      if (latest.current === path) setError(err as Error);
    } finally {
      if (latest.current === path) setLoading(false);
    }
  }, [path]);
  useEffect(() => {
    setLoading(path !== null);
    void reload();
    if (!refreshMs || path === null) return;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') void reload();
    }, refreshMs);
    return () => clearInterval(timer);
  }, [path, refreshMs, reload]);
  return { data, error, loading, reload };
}

/** The message of an error beside the field it names, when it names this one. */
export function fieldError(error: unknown, ...fields: string[]): string | undefined {
  if (!(error instanceof ApiError) || !error.field) return undefined;
  return fields.some((f) => error.field === f || error.field!.startsWith(`${f}.`) || error.field!.startsWith(`${f}[`)) ? error.message : undefined;
}

/** An error not shown beside a field: a sentence at the top of the form or page. */
export function ErrorNote({ error, fields = [] }: { error: unknown; fields?: string[] }) {
  if (!error) return null;
  if (fields.length && fieldError(error, ...fields)) return null;
  const message = error instanceof Error ? error.message : String(error);
  return (
    <Alert color="red" title="The server refused this" role="alert" className="error-note">
      {message}
    </Alert>
  );
}

export function Loading({ label = 'Loading' }: { label?: string }) {
  return (
    <Group gap="xs" role="status" aria-live="polite">
      <Loader size="sm" aria-hidden />
      <Text size="sm">{label}…</Text>
    </Group>
  );
}

/** Loading, then an error, then the content. */
export function Show<T>({ loaded, children }: { loaded: Loaded<T>; children: (data: T) => ReactNode }) {
  if (loaded.data !== undefined) return <>{children(loaded.data)}</>;
  if (loaded.error) return <ErrorNote error={loaded.error} />;
  return <Loading />;
}

const STATUS_COLOURS: Record<string, string> = {
  succeeded: 'green', failed: 'red', interrupted: 'red', rejected: 'red', canceled: 'gray', held: 'orange',
  pending: 'yellow', running: 'blue', ready: 'green', needs_secret: 'orange', healthy: 'green', configured: 'gray',
  retrying: 'yellow', failing: 'red', successful: 'green', updating: 'blue', arrived: 'green', skipped: 'gray',
  started: 'green', did_not_run: 'red', ok: 'green', changed: 'yellow', unreachable: 'red', fresh: 'green', lost: 'red',
};

export function StatusBadge({ status }: { status: string | null | undefined }) {
  if (!status) return <Text span c="dimmed">—</Text>;
  return (
    <Badge color={STATUS_COLOURS[status] ?? 'gray'} variant="light" className="status-badge">
      {status.replace(/_/g, ' ')}
    </Badge>
  );
}

const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

export function formatTime(iso: string | null | undefined, timeZone?: string): string {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return timeZone ? new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'long', timeZone }).format(date) : absolute.format(date);
}

export function ago(iso: string | null | undefined): string {
  if (!iso) return '—';
  const seconds = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  return `${duration(Math.abs(seconds))} ${seconds >= 0 ? 'ago' : 'from now'}`;
}

export function duration(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  const pair = (big: number, bigUnit: string, small: number, smallUnit: string) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);
  if (seconds < 3600) return pair(Math.floor(seconds / 60), 'min', seconds % 60, 's');
  if (seconds < 86400) return pair(Math.floor(seconds / 3600), 'h', Math.floor((seconds % 3600) / 60), 'min');
  return pair(Math.floor(seconds / 86400), 'd', Math.floor((seconds % 86400) / 3600), 'h');
}

export function When({ at }: { at: string | null | undefined }) {
  if (!at) return <Text span c="dimmed">—</Text>;
  return <time dateTime={at} title={formatTime(at)}>{ago(at)}</time>;
}

export function PageTitle({ children, actions }: { children: ReactNode; actions?: ReactNode }) {
  return (
    <Group justify="space-between" align="center" className="page-title" wrap="wrap">
      <Title order={1}>{children}</Title>
      {actions && <Group gap="xs">{actions}</Group>}
    </Group>
  );
}

export interface Column<T> {
  label: string;
  render: (row: T) => ReactNode;
  className?: string;
}

/** A table with a caption for screen readers; scrolls sideways on a narrow screen. */
export function DataTable<T>({ label, columns, rows, empty, rowKey }: { label: string; columns: Column<T>[]; rows: T[]; empty: string; rowKey: (row: T) => string }) {
  if (rows.length === 0) return <Text c="dimmed" className="empty">{empty}</Text>;
  return (
    <div className="table-scroll">
      <Table striped highlightOnHover verticalSpacing="xs" aria-label={label}>
        <Table.Thead>
          <Table.Tr>
            {columns.map((c) => (
              <Table.Th key={c.label} className={c.className}>{c.label}</Table.Th>
            ))}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map((row) => (
            <Table.Tr key={rowKey(row)}>
              {columns.map((c) => (
                <Table.Td key={c.label} className={c.className}>{c.render(row)}</Table.Td>
              ))}
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </div>
  );
}

/** Previous and next over a list envelope (`total`, `has_more`). */
export function Pager({ offset, limit, count, total, onChange, noun }: { offset: number; limit: number; count: number; total: number; onChange: (offset: number) => void; noun: string }) {
  const first = count ? offset + 1 : 0;
  return (
    <Group justify="space-between" className="pager" wrap="wrap">
      <Text size="sm" role="status">
        {count ? `${first}–${offset + count} of ${total} ${noun}` : `0 of ${total} ${noun}`}
      </Text>
      <Group gap="xs">
        <Button variant="default" size="xs" disabled={offset === 0} onClick={() => onChange(Math.max(0, offset - limit))}>
          Previous page
        </Button>
        <Button variant="default" size="xs" disabled={offset + count >= total} onClick={() => onChange(offset + limit)}>
          Next page
        </Button>
      </Group>
    </Group>
  );
}

export function Json({ value, label }: { value: unknown; label: string }) {
  return (
    <Code block className="json" aria-label={label}>
      {JSON.stringify(value, null, 2)}
    </Code>
  );
}

export function Field({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div className="field">
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

export function Fields({ children }: { children: ReactNode }) {
  return <dl className="fields">{children}</dl>;
}
