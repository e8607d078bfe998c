// A run's log and events as they happen: a single-use ticket, then the Server-Sent Events stream;
// a dropped or resumed stream is reopened with a new ticket from the position reached.
import { Badge, Button, Group, Switch, Text, TextInput } from '@mantine/core';
import { useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { download, post } from '../api';
import { parseAnsi, stripAnsi, type Segment } from '../ansi';

export interface RunEvent {
  seq: number;
  event: string;
  at: string;
  [key: string]: unknown;
}

type Connection = 'connecting' | 'live' | 'ended' | 'lost';

/** The most text kept in the page; the download has the whole log. */
const KEEP_CHARS = 4 * 1024 * 1024;
const SHOWN_LINES = 5000;

export function useRunStream(runId: string, onRunEvent: (event: RunEvent) => void) {
  const [log, setLog] = useState('');
  const [events, setEvents] = useState<RunEvent[]>([]);
  const [end, setEnd] = useState<{ status: string; error: string | null } | null>(null);
  const [connection, setConnection] = useState<Connection>('connecting');
  const [cut, setCut] = useState(false);
  const onEvent = useRef(onRunEvent);
  onEvent.current = onRunEvent;

  useEffect(() => {
    let source: EventSource | undefined;
    let stopped = false;
    let position = { after: 0, logOffset: 0 };
    let failures = 0;
    let retry: ReturnType<typeof setTimeout> | undefined;

    const remember = (id: string) => {
      const [after, offset] = id.split(':').map(Number);
      if (Number.isFinite(after) && Number.isFinite(offset)) position = { after, logOffset: offset };
    };

    const open = async () => {
      if (stopped) return;
      setConnection('connecting');
      let ticket: string;
      try {
        ({ ticket } = await post<{ ticket: string }>(`/v1/runs/${encodeURIComponent(runId)}/stream-ticket`));
      } catch {
        return reopenLater();
      }
      if (stopped) return;
      source = new EventSource(`/v1/runs/${encodeURIComponent(runId)}/stream?ticket=${encodeURIComponent(ticket)}&after=${position.after}&log_offset=${position.logOffset}`);
      source.onopen = () => {
        failures = 0;
        setConnection('live');
      };
      source.addEventListener('log', (e) => {
        const { text } = JSON.parse((e as MessageEvent).data) as { text: string };
        remember((e as MessageEvent).lastEventId);
        setLog((current) => {
          const next = current + text;
          if (next.length <= KEEP_CHARS) return next;
          setCut(true);
          return next.slice(next.length - KEEP_CHARS);
        });
      });
      source.addEventListener('run-event', (e) => {
        const event = JSON.parse((e as MessageEvent).data) as RunEvent;
        remember((e as MessageEvent).lastEventId);
        setEvents((current) => (current.some((c) => c.seq === event.seq) ? current : [...current, event]));
        onEvent.current(event);
      });
      source.addEventListener('end', (e) => {
        setEnd(JSON.parse((e as MessageEvent).data));
        setConnection('ended');
        source?.close();
        stopped = true;
        onEvent.current({ seq: -1, event: 'stream.end', at: new Date().toISOString() });
      });
      source.addEventListener('resume', (e) => {
        const { after, log_offset } = JSON.parse((e as MessageEvent).data) as { after: number; log_offset: number };
        position = { after, logOffset: log_offset };
        source?.close();
        void open();
      });
      // A browser's own retry would present the spent ticket; reopen with a new one instead.
      source.onerror = () => {
        source?.close();
        if (!stopped) reopenLater();
      };
    };

    const reopenLater = () => {
      failures += 1;
      setConnection('lost');
      retry = setTimeout(() => void open(), Math.min(10_000, 500 * 2 ** Math.min(failures, 5)));
    };

    void open();
    return () => {
      stopped = true;
      clearTimeout(retry);
      source?.close();
    };
  }, [runId]);

  return { log, events, end, connection, cut };
}

function Highlighted({ segment, needle }: { segment: Segment; needle: string }) {
  if (!needle) return <span className={segment.className || undefined}>{segment.text}</span>;
  const parts: ReactNode[] = [];
  const lower = segment.text.toLowerCase();
  let from = 0;
  for (let at = lower.indexOf(needle); at >= 0; at = lower.indexOf(needle, from)) {
    parts.push(segment.text.slice(from, at), <mark key={at}>{segment.text.slice(at, at + needle.length)}</mark>);
    from = at + needle.length;
  }
  parts.push(segment.text.slice(from));
  return <span className={segment.className || undefined}>{parts}</span>;
}

const CONNECTION_LABEL: Record<Connection, [string, string]> = {
  connecting: ['connecting', 'gray'],
  live: ['live', 'green'],
  ended: ['complete', 'blue'],
  lost: ['reconnecting', 'orange'],
};

export function LiveLog({ runId, log, connection, cut }: { runId: string; log: string; connection: Connection; cut: boolean }) {
  const [follow, setFollow] = useState(true);
  const [search, setSearch] = useState('');
  const pane = useRef<HTMLPreElement>(null);
  const needle = search.trim().toLowerCase();

  const lines = useMemo(() => {
    const all = parseAnsi(log.endsWith('\n') ? log.slice(0, -1) : log);
    return log === '' ? [] : all;
  }, [log]);
  const shown = useMemo(() => {
    const matching = needle ? lines.filter((segments) => stripAnsi(segments.map((s) => s.text).join('')).toLowerCase().includes(needle)) : lines;
    return { rows: matching.slice(-SHOWN_LINES), total: matching.length };
  }, [lines, needle]);

  useEffect(() => {
    if (follow && pane.current) pane.current.scrollTop = pane.current.scrollHeight;
  }, [shown, follow]);

  const [label, colour] = CONNECTION_LABEL[connection];
  return (
    <section aria-labelledby="log-title" className="section">
      <Group justify="space-between" wrap="wrap" gap="sm">
        <Group gap="xs">
          <h2 id="log-title" className="mantine-Title-root">Log</h2>
          <Badge color={colour} variant="dot" aria-live="polite">{label}</Badge>
        </Group>
        <Group gap="sm" wrap="wrap">
          <TextInput size="xs" label="Search the log" value={search} onChange={(e) => setSearch(e.currentTarget.value)} />
          <Switch label="Follow" checked={follow} onChange={(e) => setFollow(e.currentTarget.checked)} />
          <Button size="xs" variant="default" onClick={() => void download(`/v1/runs/${encodeURIComponent(runId)}/logs`, `${runId}.log`)}>
            Download log
          </Button>
        </Group>
      </Group>
      {needle && <Text size="sm" role="status">{shown.total} {shown.total === 1 ? 'line matches' : 'lines match'}</Text>}
      {(cut || shown.total > SHOWN_LINES) && <Text size="sm" className="muted">Showing the last {Math.min(shown.total, SHOWN_LINES)} lines; download the log for all of it.</Text>}
      <pre
        ref={pane}
        className="log"
        tabIndex={0}
        aria-label="Run output"
        aria-live="off"
        onWheel={(e) => {
          if (e.deltaY < 0 && follow) setFollow(false);
        }}
      >
        {shown.rows.length === 0 ? (
          <span className="muted">{needle ? 'No line matches.' : connection === 'ended' ? 'The run printed nothing.' : 'Waiting for output…'}</span>
        ) : (
          shown.rows.map((segments, i) => (
            <span className="line" key={i}>
              {segments.map((s, j) => (
                <Highlighted key={j} segment={s} needle={needle} />
              ))}
            </span>
          ))
        )}
      </pre>
    </section>
  );
}
