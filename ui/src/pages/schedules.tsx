import { Badge, Button, Checkbox, Group, NativeSelect, Stack, Switch, Text, TextInput } from '@mantine/core';
import { useEffect, useState, type FormEvent } from 'react';
import { ApiError, del, get, post, put, query } from '../api';
import { useHasRole } from '../session';
import { DataTable, ErrorNote, PageTitle, Show, StatusBadge, fieldError, formatTime, useFetch } from '../ui';
import type { Template } from './launch';

interface Schedule {
  id: string;
  name: string;
  cron: string | null;
  rrule: string | null;
  timezone: string;
  spring_forward: string;
  enabled: boolean;
  template_id: string | null;
  run: unknown;
  pipeline: unknown;
  next_fire_at: string | null;
  last_fire_at: string | null;
  last_outcome: string | null;
  last_error: string | null;
  created_by: string;
}

interface Preview {
  next: string[];
  timezone: string;
  spring_forward: string;
  finished: boolean;
  spring_gap: { date: string; from: string; to: string; times: string[]; fires: string[] } | null;
}

const browserZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';

export function SchedulesPage() {
  const schedules = useFetch<{ schedules: Schedule[] }>('/v1/schedules', 10_000);
  const templates = useFetch<{ templates: Template[] }>('/v1/templates');
  const isOperator = useHasRole('operator');
  const names = new Map((templates.data?.templates ?? []).map((t) => [t.id, t.name]));
  const [error, setError] = useState<unknown>();

  const toggle = async (s: Schedule) => {
    setError(undefined);
    try {
      const { id: _id, ...rest } = s;
      await put(`/v1/schedules/${s.id}`, { ...rest, enabled: !s.enabled });
      await schedules.reload();
    } catch (err) {
      setError(err);
    }
  };
  const remove = async (s: Schedule) => {
    if (!window.confirm(`Delete the schedule ${s.name}? Its future fires stop.`)) return;
    setError(undefined);
    try {
      await del(`/v1/schedules/${s.id}`);
      await schedules.reload();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <>
      <PageTitle>Schedules</PageTitle>
      <ErrorNote error={error} />
      <Show loaded={schedules}>
        {(data) => (
          <DataTable<Schedule>
            label="Schedules"
            rows={data.schedules}
            rowKey={(s) => s.id}
            empty="No schedule yet."
            columns={[
              { label: 'Name', render: (s) => s.name },
              { label: 'Fires', render: (s) => (s.template_id ? names.get(s.template_id) ?? s.template_id : s.run ? 'a run' : 'a pipeline') },
              { label: 'Rule', render: (s) => <span className="mono">{s.cron ?? s.rrule}</span> },
              { label: 'Zone', render: (s) => s.timezone },
              { label: 'Next fire', render: (s) => (s.enabled ? formatTime(s.next_fire_at, s.timezone) : 'disabled') },
              { label: 'Last', render: (s) => (s.last_outcome ? <span title={s.last_error ?? undefined}><StatusBadge status={s.last_outcome} /></span> : 'never fired') },
              {
                label: 'Enabled',
                render: (s) => <Switch checked={s.enabled} disabled={!isOperator} onChange={() => void toggle(s)} aria-label={`${s.enabled ? 'Disable' : 'Enable'} ${s.name}`} />,
              },
              {
                label: 'Actions',
                render: (s) =>
                  isOperator ? (
                    <Button size="xs" variant="subtle" color="red" onClick={() => void remove(s)} aria-label={`Delete schedule ${s.name}`}>
                      Delete
                    </Button>
                  ) : null,
              },
            ]}
          />
        )}
      </Show>
      {isOperator && <NewSchedule templates={templates.data?.templates ?? []} onCreated={schedules.reload} />}
    </>
  );
}

function NewSchedule({ templates, onCreated }: { templates: Template[]; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [templateId, setTemplateId] = useState('');
  const [ruleKind, setRuleKind] = useState<'cron' | 'rrule'>('cron');
  const [rule, setRule] = useState('30 2 * * *');
  const [timezone, setTimezone] = useState(browserZone);
  const [springForward, setSpringForward] = useState('');
  const [enabled, setEnabled] = useState(true);
  const [error, setError] = useState<unknown>();
  const [created, setCreated] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [preview, setPreview] = useState<Preview>();
  const [previewError, setPreviewError] = useState<unknown>();

  useEffect(() => {
    if (!rule.trim()) {
      setPreview(undefined);
      setPreviewError(undefined);
      return;
    }
    const timer = setTimeout(async () => {
      try {
        setPreview(await get<Preview>(`/v1/schedules/preview${query({ [ruleKind]: rule, timezone, spring_forward: springForward })}`));
        setPreviewError(undefined);
      } catch (err) {
        setPreview(undefined);
        setPreviewError(err);
      }
    }, 300);
    return () => clearTimeout(timer);
  }, [rule, ruleKind, timezone, springForward]);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    setCreated(undefined);
    try {
      const body: Record<string, unknown> = { name, template_id: templateId || undefined, [ruleKind]: rule, timezone, enabled };
      if (springForward) body.spring_forward = springForward;
      const schedule = await post<Schedule>('/v1/schedules', body);
      setCreated(`Saved ${schedule.name}; next fire ${formatTime(schedule.next_fire_at, schedule.timezone)}.`);
      setName('');
      onCreated();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const ruleError = fieldError(error, ruleKind) ?? fieldError(previewError, ruleKind, 'cron', 'rrule');
  return (
    <section className="section" aria-labelledby="new-schedule-title">
      <div className="two-columns">
        <form onSubmit={submit} className="card">
          <Stack>
            <h2 id="new-schedule-title">New schedule</h2>
            <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
            <NativeSelect
              label="Template to launch"
              required
              data={[{ value: '', label: 'Choose a template…' }, ...templates.map((t) => ({ value: t.id, label: t.name }))]}
              value={templateId}
              onChange={(e) => setTemplateId(e.currentTarget.value)}
              error={fieldError(error, 'template_id')}
            />
            <NativeSelect
              label="Rule kind"
              data={[
                { value: 'cron', label: 'cron expression' },
                { value: 'rrule', label: 'RFC 5545 rule' },
              ]}
              value={ruleKind}
              onChange={(e) => setRuleKind(e.currentTarget.value as 'cron' | 'rrule')}
            />
            <TextInput
              label={ruleKind === 'cron' ? 'Cron expression' : 'Recurrence rule'}
              description={ruleKind === 'cron' ? 'minute hour day month weekday, read in the zone below' : 'DTSTART and RRULE lines'}
              classNames={{ input: 'mono' }}
              required
              value={rule}
              onChange={(e) => setRule(e.currentTarget.value)}
              error={ruleError}
            />
            <TextInput label="Time zone" description="An IANA name such as Europe/Berlin" value={timezone} onChange={(e) => setTimezone(e.currentTarget.value)} error={fieldError(error, 'timezone') ?? fieldError(previewError, 'timezone')} />
            <NativeSelect
              label="When the clocks skip a fire time"
              data={[
                { value: '', label: 'the default for the rule kind' },
                { value: 'jump', label: 'fire at the jump' },
                { value: 'later', label: 'fire later by the jump' },
                { value: 'skip', label: 'skip it' },
              ]}
              value={springForward}
              onChange={(e) => setSpringForward(e.currentTarget.value)}
            />
            <Checkbox label="Enabled" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} />
            <ErrorNote error={error} fields={['name', 'template_id', 'cron', 'rrule', 'timezone']} />
            {created && <Text role="status" c="green" fw={600}>{created}</Text>}
            <Group>
              <Button type="submit" loading={busy}>
                Save schedule
              </Button>
            </Group>
          </Stack>
        </form>
        <SchedulePreview preview={preview} error={previewError} />
      </div>
    </section>
  );
}

function SchedulePreview({ preview, error }: { preview?: Preview; error: unknown }) {
  return (
    <section className="card" aria-labelledby="preview-title" aria-live="polite">
      <h2 id="preview-title">Next fires</h2>
      {error instanceof ApiError ? (
        <Text size="sm" c="red">{error.message}</Text>
      ) : !preview ? (
        <Text size="sm" className="muted">Type a rule to see when it fires.</Text>
      ) : (
        <>
          <Text size="sm">
            In {preview.timezone}
            {preview.finished ? '; the rule has fewer than five fires left' : ''}:
          </Text>
          <ol className="fires" aria-label="Next fire times">
            {preview.next.map((at) => (
              <li key={at}>
                <time dateTime={at}>{formatTime(at, preview.timezone)}</time> <span className="muted mono instant">{at}</span>
              </li>
            ))}
          </ol>
          {preview.spring_gap && (
            <Text size="sm">
              <Badge color="orange" variant="light">daylight saving</Badge> On {preview.spring_gap.date} the clocks jump from {preview.spring_gap.from} to {preview.spring_gap.to}, skipping{' '}
              {preview.spring_gap.times.join(', ')}; under “{preview.spring_forward}” {preview.spring_gap.fires.length ? `it fires at ${preview.spring_gap.fires.map((f) => formatTime(f, preview.timezone)).join(', ')}` : 'it does not fire'}.
            </Text>
          )}
        </>
      )}
    </section>
  );
}
