import { Alert, Badge, Button, Code, Group, Tabs, Text } from '@mantine/core';
import { useCallback, useState } from 'react';
import { ApiError, download, post } from '../api';
import { Link, navigate } from '../router';
import { useHasRole, useSession } from '../session';
import { DataTable, ErrorNote, Field, Fields, Json, Loading, PageTitle, Show, StatusBadge, When, formatTime, useFetch } from '../ui';
import { DecisionButtons } from './approvals';
import { LiveLog, useRunStream, type RunEvent } from './live-log';
import { runDuration, type RunRow } from './runs';

interface Run extends RunRow {
  kind: string;
  extra_vars: Record<string, unknown> | null;
  timeout: number;
  exit_code: number | null;
  actor_kind: string;
  rerun_of: string | null;
  attempts: number;
  state_digest: string;
  hold: Record<string, unknown> | null;
  blocker: string | null;
  credentials: string[];
  project: { id: string; commit: string } | null;
  secret_vars?: string[];
  parent_run_id?: string | null;
  step_index?: number | null;
  dry_run: boolean;
  change?: string | null;
  source?: { kind: string; id: string } | null;
  playbook?: string | null;
  inventory_id?: string | null;
  limit?: string;
  /** terraform and opentofu runs: what the plan gate read (docs/api.md, "The plan gate"). */
  plan?: RunPlan | null;
}

interface PlanCounts {
  create: number;
  update: number;
  replace: number;
  delete: number;
}

interface RunPlan extends Record<string, unknown> {
  digest: string;
  verdict: 'run' | 'hold' | 'deny' | 'dry_run';
  planned_at: string;
  applied_at: string | null;
  kept: boolean;
  sealed: boolean;
  bytes: number;
  classified: boolean;
  reason?: string;
  totals: PlanCounts;
  by_type: Record<string, PlanCounts>;
  resources: { address: string; type: string; action: string }[];
  resources_left_out: number;
  changes: boolean;
  tool_version?: string;
}

const VERDICTS: Record<RunPlan['verdict'], string> = {
  run: 'applied at once: no policy held it',
  hold: 'held for a person at the plan gate',
  deny: 'refused by a deny policy',
  dry_run: 'a dry run: planned, never applied',
};

const UNFINISHED = ['held', 'pending', 'running'];
const PARENT_KINDS: Record<string, 'steps' | 'shards'> = { pipeline: 'steps', workflow: 'steps', split: 'shards' };

export function RunPage({ id }: { id: string }) {
  const run = useFetch<Run>(`/v1/runs/${encodeURIComponent(id)}`);
  const onRunEvent = useCallback(
    (event: RunEvent) => {
      if (event.event !== 'run.created') void run.reload();
    },
    [run.reload],
  );
  const stream = useRunStream(id, onRunEvent);

  return (
    <Show loaded={run}>
      {(r) => (
        <>
          <PageTitle actions={<RunActions run={r} onChanged={run.reload} />}>
            <span className="id">{r.id}</span> <StatusBadge status={r.status} />
          </PageTitle>
          <Text className="muted" size="sm">
            {r.kind !== 'run' ? `${r.kind} · ` : ''}
            {r.tool} · requested by {r.requested_by}
            {r.actor_kind === 'agent' ? ' (agent)' : ''} · created {formatTime(r.created_at)} · ran {runDuration(r)}
          </Text>
          {r.error && (
            <Alert color={r.status === 'succeeded' ? 'gray' : 'red'} className="section" title="Why it did not succeed">
              {r.error}
            </Alert>
          )}
          {r.status === 'held' && <HeldNotice run={r} onDecided={run.reload} />}
          <Tabs defaultValue="log" className="section" keepMounted={false}>
            <Tabs.List aria-label="About this run">
              <Tabs.Tab value="log">Log</Tabs.Tab>
              <Tabs.Tab value="details">Details</Tabs.Tab>
              <Tabs.Tab value="events">Events ({stream.events.length})</Tabs.Tab>
              {r.tool === 'ansible' && <Tabs.Tab value="hosts">Hosts and tasks</Tabs.Tab>}
              {r.plan !== undefined && <Tabs.Tab value="plan">Plan</Tabs.Tab>}
              {PARENT_KINDS[r.kind] && <Tabs.Tab value="children">{PARENT_KINDS[r.kind] === 'steps' ? 'Steps' : 'Shards'}</Tabs.Tab>}
              <Tabs.Tab value="decisions">Decisions</Tabs.Tab>
            </Tabs.List>
            <Tabs.Panel value="log">
              <LiveLog runId={r.id} log={stream.log} connection={stream.connection} cut={stream.cut} />
            </Tabs.Panel>
            <Tabs.Panel value="details">
              <RunDetails run={r} />
            </Tabs.Panel>
            <Tabs.Panel value="events">
              <EventList events={stream.events} />
            </Tabs.Panel>
            <Tabs.Panel value="hosts">
              <HostsAndTasks runId={r.id} />
            </Tabs.Panel>
            <Tabs.Panel value="plan">
              <PlanPanel plan={r.plan ?? null} />
            </Tabs.Panel>
            <Tabs.Panel value="children">
              <Children run={r} />
            </Tabs.Panel>
            <Tabs.Panel value="decisions">
              <Decisions runId={r.id} />
            </Tabs.Panel>
          </Tabs>
        </>
      )}
    </Show>
  );
}

function HeldNotice({ run, onDecided }: { run: Run; onDecided: () => void }) {
  const isAdmin = useHasRole('admin');
  const { me } = useSession();
  return (
    <Alert color="orange" className="section" title="Held for approval">
      <Text size="sm">
        Nothing runs until an admin approves it{run.hold ? ` (${holdReasons(run.hold)})` : ''}. The approval binds to the state digest <Code>{run.state_digest}</Code>
        {planHold(run) ? (
          <>
            {' '}and to the saved plan <Code>{planHold(run)!.digest}</Code>: {planHold(run)!.summary}. Approving applies exactly that plan.
          </>
        ) : (
          '.'
        )}
      </Text>
      {isAdmin && me.kind !== 'agent' ? (
        <Group mt="sm">
          <DecisionButtons decisionId={run.id} stateDigest={run.state_digest} planDigest={planHold(run)?.digest} subject={`run ${run.id}`} onDecided={onDecided} />
        </Group>
      ) : (
        <Text size="sm" mt="xs">An admin decides; this account may not.</Text>
      )}
    </Alert>
  );
}

/** The saved plan a run is held with at the plan gate, if it is. */
function planHold(run: Run): { digest: string; summary: string } | undefined {
  const plan = (run.hold as { plan?: { digest: string; summary: string } } | null)?.plan;
  return plan && typeof plan.digest === 'string' ? plan : undefined;
}

/** What the plan gate read of a terraform or opentofu run's plan. */
function PlanPanel({ plan }: { plan: RunPlan | null }) {
  if (!plan) return <Text className="muted section">The run has not planned yet.</Text>;
  const t = plan.totals;
  const types = Object.entries(plan.by_type);
  return (
    <div className="section">
      <Fields>
        <Field label="Verdict">{VERDICTS[plan.verdict] ?? plan.verdict}</Field>
        <Field label="Changes">
          {plan.classified ? `${t.create} to create, ${t.update} to update, ${t.replace} to replace, ${t.delete} to delete` : `not classified: ${plan.reason ?? 'unreadable'}`}
        </Field>
        <Field label="Plan digest"><Code>{plan.digest}</Code></Field>
        <Field label="Planned">{formatTime(plan.planned_at)}</Field>
        <Field label="Applied">{plan.applied_at ? formatTime(plan.applied_at) : 'not applied'}</Field>
        <Field label="Plan file">{plan.kept ? `kept (${plan.bytes} bytes${plan.sealed ? ', sealed' : ''})` : `not kept (${plan.bytes} bytes)`}</Field>
        {plan.tool_version && <Field label="Tool version">{plan.tool_version}</Field>}
      </Fields>
      {types.length > 0 && (
        <DataTable<[string, PlanCounts]>
          label="By resource type"
          rows={types}
          rowKey={([type]) => type}
          empty="No change."
          columns={[
            { label: 'Type', render: ([type]) => <Code>{type}</Code> },
            { label: 'Create', render: ([, c]) => c.create },
            { label: 'Update', render: ([, c]) => c.update },
            { label: 'Replace', render: ([, c]) => c.replace },
            { label: 'Delete', render: ([, c]) => (c.delete ? <Badge color="red">{c.delete}</Badge> : 0) },
          ]}
        />
      )}
      {plan.resources.length > 0 && (
        <DataTable<RunPlan['resources'][number]>
          label="Resources that change"
          rows={plan.resources}
          rowKey={(r) => r.address}
          empty="No change."
          columns={[
            { label: 'Address', render: (r) => <Code>{r.address}</Code> },
            { label: 'Action', render: (r) => (r.action === 'delete' || r.action === 'replace' ? <Badge color="red">{r.action}</Badge> : r.action) },
          ]}
        />
      )}
      {plan.resources_left_out > 0 && <Text size="sm" className="muted">and {plan.resources_left_out} more not listed</Text>}
    </div>
  );
}

export function holdReasons(hold: Record<string, any>): string {
  const reasons: string[] = [];
  if (hold.agent_hold) reasons.push('an agent asked for it');
  if (Array.isArray(hold.policies) && hold.policies.length) reasons.push(`policies ${hold.policies.join(', ')}`);
  if (hold.require_reason) reasons.push('a reason is required');
  if (hold.distinct_approver) reasons.push('the requester may not approve');
  return reasons.join('; ');
}

function RunActions({ run, onChanged }: { run: Run; onChanged: () => void }) {
  const isOperator = useHasRole('operator');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState<string>();
  const finished = !UNFINISHED.includes(run.status);
  const topLevel = !run.parent_run_id;

  const act = async (name: string, path: string, opensNew: boolean) => {
    setBusy(name);
    setError(undefined);
    try {
      const answer = await post<Run>(path);
      if (opensNew && answer?.id) navigate(`/runs/${answer.id}`);
      else onChanged();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(undefined);
    }
  };
  const base = `/v1/runs/${encodeURIComponent(run.id)}`;

  return (
    <Group gap="xs" wrap="wrap">
      {isOperator && !finished && (
        <Button color="red" variant="light" loading={busy === 'cancel'} onClick={() => void act('cancel', `${base}/cancel`, false)}>
          Cancel run
        </Button>
      )}
      {isOperator && finished && topLevel && (
        <Button variant="light" loading={busy === 'rerun'} onClick={() => void act('rerun', `${base}/rerun`, true)}>
          Rerun
        </Button>
      )}
      {isOperator && finished && run.kind === 'split' && run.status !== 'succeeded' && (
        <Button variant="light" loading={busy === 'retry'} onClick={() => void act('retry', `${base}/retry`, true)}>
          Retry failed shards
        </Button>
      )}
      {isOperator && finished && run.tool === 'ansible' && topLevel && run.status !== 'succeeded' && (
        <Button variant="light" loading={busy === 'relaunch'} onClick={() => void act('relaunch', `${base}/relaunch-failed`, true)}>
          Relaunch failed hosts
        </Button>
      )}
      <Button variant="default" onClick={() => void download(`${base}/evidence`, `${run.id}-evidence.html`).catch(setError)}>
        Evidence
      </Button>
      <Button variant="default" onClick={() => void download(`${base}/receipt`, `${run.id}-receipt.jws`).catch(setError)}>
        Receipt
      </Button>
      {error !== undefined && (
        <div className="action-error">
          <ErrorNote error={error} />
        </div>
      )}
    </Group>
  );
}

function RunDetails({ run }: { run: Run }) {
  return (
    <div className="section card">
      <Fields>
        <Field label="Command">
          <Code block className="command">{run.command || (run.playbook ? `playbook ${run.playbook}` : '—')}</Code>
        </Field>
        <Field label="Extra vars">{run.extra_vars && Object.keys(run.extra_vars).length ? <Json value={run.extra_vars} label="Extra vars" /> : 'none'}</Field>
        {run.secret_vars && run.secret_vars.length > 0 && <Field label="Secret answers">{run.secret_vars.join(', ')} (sealed; never shown)</Field>}
        <Field label="Credentials">
          {run.credentials?.length ? (
            <Group gap="xs">
              {run.credentials.map((c) => (
                <Badge key={c} variant="outline" className="id">{c}</Badge>
              ))}
            </Group>
          ) : (
            'none'
          )}
        </Field>
        <Field label="Project and commit">
          {run.project ? (
            <>
              <Link to={`/projects/${run.project.id}`} className="id">{run.project.id}</Link> at <Code>{run.project.commit}</Code>
            </>
          ) : (
            'none'
          )}
        </Field>
        {run.template_id && <Field label="Template"><Link to={`/launch/${run.template_id}`} className="id">{run.template_id}</Link></Field>}
        {run.parent_run_id && <Field label="Part of"><Link to={`/runs/${run.parent_run_id}`} className="id">{run.parent_run_id}</Link></Field>}
        {run.rerun_of && <Field label="Reran"><Link to={`/runs/${run.rerun_of}`} className="id">{run.rerun_of}</Link></Field>}
        {run.source && <Field label="Started by">{run.source.kind} <span className="id">{run.source.id}</span></Field>}
        {run.inventory_id && <Field label="Inventory"><Link to={`/inventories/${run.inventory_id}`} className="id">{run.inventory_id}</Link></Field>}
        {run.limit ? <Field label="Limit">{run.limit}</Field> : null}
        {run.change && <Field label="Change">{run.change}</Field>}
        <Field label="Queue">{run.queue || 'default pool'}</Field>
        <Field label="Timeout">{run.timeout ? `${run.timeout} s` : 'server default'}</Field>
        <Field label="Exit code">{run.exit_code ?? '—'}</Field>
        <Field label="Attempts">{run.attempts}</Field>
        <Field label="Dry run">{run.dry_run ? 'yes' : 'no'}</Field>
        <Field label="Hold">{run.hold ? holdReasons(run.hold) || 'held' : 'never held'}</Field>
        <Field label="State digest"><Code>{run.state_digest}</Code></Field>
        <Field label="Started">{formatTime(run.started_at)}</Field>
        <Field label="Finished">{formatTime(run.finished_at)}</Field>
      </Fields>
    </div>
  );
}

function EventList({ events }: { events: RunEvent[] }) {
  const rows = [...events].sort((a, b) => a.seq - b.seq);
  return (
    <div className="section">
      <DataTable<RunEvent>
        label="Structured events"
        rows={rows}
        rowKey={(e) => String(e.seq)}
        empty="No event yet."
        columns={[
          { label: '#', render: (e) => e.seq },
          { label: 'Event', render: (e) => <Code>{e.event}</Code> },
          { label: 'At', render: (e) => formatTime(e.at) },
          {
            label: 'Detail',
            render: (e) => {
              const { seq: _s, event: _e, at: _a, run: inner, ...rest } = e as RunEvent & { run?: { status?: string } };
              const parts = [inner?.status ? `status ${inner.status}` : '', ...Object.entries(rest).map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)];
              return <Text size="sm">{parts.filter(Boolean).join(' · ') || '—'}</Text>;
            },
          },
        ]}
      />
    </div>
  );
}

interface HostResult {
  host: string;
  status: string;
  counts: Record<string, number>;
}
interface TaskResult {
  play: string;
  task: string;
  counts: Record<string, number>;
  duration_ms: number | null;
  hosts: Record<string, string> | { host: string; status: string }[];
}

function HostsAndTasks({ runId }: { runId: string }) {
  const evidence = useFetch<{ hosts: HostResult[]; tasks: TaskResult[] }>(`/v1/runs/${encodeURIComponent(runId)}/evidence?format=json`);
  const counts = (c: Record<string, number>) =>
    Object.entries(c)
      .filter(([, n]) => n)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || '—';
  return (
    <Show loaded={evidence}>
      {(e) => (
        <>
          <section className="section" aria-labelledby="hosts-title">
            <h2 id="hosts-title">Hosts</h2>
            <DataTable<HostResult>
              label="Per-host results"
              rows={e.hosts}
              rowKey={(h) => h.host}
              empty="No host results (yet)."
              columns={[
                { label: 'Host', render: (h) => h.host },
                { label: 'Verdict', render: (h) => <StatusBadge status={h.status} /> },
                { label: 'Counts', render: (h) => counts(h.counts) },
              ]}
            />
          </section>
          <section className="section" aria-labelledby="tasks-title">
            <h2 id="tasks-title">Tasks</h2>
            <DataTable<TaskResult>
              label="Per-task results"
              rows={e.tasks}
              rowKey={(t) => `${t.play}/${t.task}/${JSON.stringify(t.counts)}`}
              empty="No task results (yet)."
              columns={[
                { label: 'Play', render: (t) => t.play },
                { label: 'Task', render: (t) => t.task },
                { label: 'Counts', render: (t) => counts(t.counts) },
                { label: 'Duration', render: (t) => (t.duration_ms === null ? '—' : `${t.duration_ms} ms`) },
              ]}
            />
          </section>
        </>
      )}
    </Show>
  );
}

function Children({ run }: { run: Run }) {
  const which = PARENT_KINDS[run.kind];
  const children = useFetch<Record<string, RunRow[]>>(`/v1/runs/${encodeURIComponent(run.id)}/${which}`, UNFINISHED.includes(run.status) ? 3000 : undefined);
  return (
    <div className="section">
      <Show loaded={children}>
        {(c) => (
          <DataTable<RunRow>
            label={which}
            rows={c[which] ?? []}
            rowKey={(r) => r.id}
            empty="None."
            columns={[
              { label: 'Name', render: (r) => r.step_name ?? '—' },
              { label: 'Run', render: (r) => <Link to={`/runs/${r.id}`} className="id">{r.id}</Link> },
              { label: 'Kind', render: (r) => r.kind },
              { label: 'Status', render: (r) => <StatusBadge status={r.status} /> },
              { label: 'Error', render: (r) => r.error ?? '' },
            ]}
          />
        )}
      </Show>
    </div>
  );
}

interface DecisionRecord {
  id: string;
  kind: string;
  actor: string;
  at: string;
  reason: string | null;
  commitment: string;
  withheld: boolean;
  redaction: { category: string } | null;
}

function Decisions({ runId }: { runId: string }) {
  const decisions = useFetch<{ decisions: DecisionRecord[]; separation_of_duties: Record<string, unknown> | null }>(`/v1/runs/${encodeURIComponent(runId)}/decisions`);
  if (decisions.error instanceof ApiError && decisions.error.status === 403) {
    return <Text className="section">Decision records with their reasons are shown to admins and to the account that asked for the run.</Text>;
  }
  if (!decisions.data) return decisions.error ? <ErrorNote error={decisions.error} /> : <Loading />;
  return (
    <div className="section">
      <DataTable<DecisionRecord>
        label="Decision records"
        rows={decisions.data.decisions}
        rowKey={(d) => d.id}
        empty="No decision was recorded for this run."
        columns={[
          { label: 'Decision', render: (d) => d.kind },
          { label: 'By', render: (d) => d.actor },
          { label: 'At', render: (d) => <When at={d.at} /> },
          { label: 'Reason', render: (d) => (d.redaction ? `redacted (${d.redaction.category})` : d.withheld ? 'withheld' : d.reason ?? '—') },
          { label: 'Commitment', render: (d) => <span className="id">{d.commitment.slice(0, 23)}…</span> },
        ]}
      />
      {decisions.data.separation_of_duties && <Json value={decisions.data.separation_of_duties} label="Separation of duties" />}
    </div>
  );
}
