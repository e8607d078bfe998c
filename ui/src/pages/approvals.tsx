import { Alert, Badge, Button, Code, Group, Modal, Stack, Text, Textarea } from '@mantine/core';
import { useState } from 'react';
import { ApiError, post } from '../api';
import { Link } from '../router';
import { useHasRole, useSession } from '../session';
import { ErrorNote, Field, Fields, Loading, PageTitle, Show, When, formatTime, useFetch } from '../ui';
import { holdReasons } from './run';

type Decision = 'approve' | 'reject';

/**
 * Approve and reject, each with an optional reason. When the server's secret masker changes the
 * reason it records nothing and answers 409 with the text it would keep: the approver sees that
 * text and confirms it, and only then is the decision recorded.
 */
export function DecisionButtons({
  decisionId,
  stateDigest,
  planDigest,
  subject,
  onDecided,
}: {
  decisionId: string;
  stateDigest?: string;
  /** For a run held at the plan gate: the saved plan the approver saw. */
  planDigest?: string;
  subject: string;
  onDecided: () => void;
}) {
  const [decision, setDecision] = useState<Decision>();
  const [reason, setReason] = useState('');
  const [masked, setMasked] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<string>();

  const close = () => {
    setDecision(undefined);
    setReason('');
    setMasked(undefined);
    setError(undefined);
  };

  const send = async (confirmMasked: boolean) => {
    if (!decision) return;
    setBusy(true);
    setError(undefined);
    try {
      const body: Record<string, string> = {};
      if (reason) body.reason = reason;
      if (confirmMasked && masked !== undefined) body.masked_reason = masked;
      if (stateDigest) body.state_digest = stateDigest;
      if (planDigest) body.plan_digest = planDigest;
      await post(`/v1/runs/${encodeURIComponent(decisionId)}/${decision}`, body);
      setDone(decision === 'approve' ? 'Approved' : 'Rejected');
      close();
      onDecided();
    } catch (err) {
      if (err instanceof ApiError && err.status === 409 && typeof err.body.masked_reason === 'string') setMasked(err.body.masked_reason);
      else setError(err);
    } finally {
      setBusy(false);
    }
  };

  const verb = decision === 'approve' ? 'Approve' : 'Reject';
  return (
    <>
      {done && <Text role="status" size="sm" fw={600}>{done}.</Text>}
      <Button color="green" onClick={() => setDecision('approve')} aria-label={`Approve ${subject}`}>
        Approve
      </Button>
      <Button color="red" variant="light" onClick={() => setDecision('reject')} aria-label={`Reject ${subject}`}>
        Reject
      </Button>
      <Modal opened={decision !== undefined} onClose={close} title={`${verb} ${subject}`} size="lg">
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void send(false);
          }}
        >
          <Stack>
            <Textarea
              label="Reason"
              description="Optional unless a policy asks for one; at most 1,000 characters. Kept with the decision and committed in the audit chain."
              value={reason}
              maxLength={1000}
              autosize
              minRows={3}
              onChange={(e) => {
                setReason(e.currentTarget.value);
                setMasked(undefined);
              }}
              error={error instanceof ApiError && error.field === 'reason' ? error.message : undefined}
            />
            {masked !== undefined && (
              <Alert color="orange" title="This is what will be kept; confirm" role="alert">
                <Text size="sm">The reason holds what looks like a secret, so it is kept masked. Nothing has been recorded yet.</Text>
                <Code block mt="xs" aria-label="The reason as it will be kept">{masked}</Code>
                <Group mt="sm">
                  <Button color={decision === 'approve' ? 'green' : 'red'} loading={busy} onClick={() => void send(true)}>
                    Confirm and {decision === 'approve' ? 'approve' : 'reject'}
                  </Button>
                  <Button variant="default" onClick={() => setMasked(undefined)}>
                    Edit the reason
                  </Button>
                </Group>
              </Alert>
            )}
            {!(error instanceof ApiError && error.field === 'reason') && <ErrorNote error={error} />}
            {masked === undefined && (
              <Group justify="flex-end">
                <Button variant="default" onClick={close}>
                  Cancel
                </Button>
                <Button type="submit" color={decision === 'approve' ? 'green' : 'red'} loading={busy}>
                  {verb}
                </Button>
              </Group>
            )}
          </Stack>
        </form>
      </Modal>
    </>
  );
}

interface AttentionItem {
  id: string;
  kind: string;
  status: string;
  template_id: string | null;
  requested_by: string;
  since: string;
  reason: string;
  approval: 'run' | 'workflow_step';
  decision_id: string;
  who_may_approve: string;
  on_approve?: string[];
  on_deny?: string[];
  state_digest?: string;
  step?: string;
  expires_at?: string | null;
  other_branches_running?: boolean;
}

interface StepApproval {
  id: string;
  workflow_run_id: string;
  step: string;
  description: string | null;
  waited_behind: string[];
  on_approve: string[];
  on_deny: string[];
  expires_at: string | null;
  state_digest: string;
}

export function ApprovalsPage() {
  const items = useFetch<{ items: AttentionItem[]; total: number }>('/v1/attention?blocker=approval_needed', 5000);
  const steps = useFetch<{ approvals: StepApproval[] }>('/v1/approvals', 5000);
  const reload = () => {
    void items.reload();
    void steps.reload();
  };
  const stepById = new Map((steps.data?.approvals ?? []).map((s) => [s.id, s]));
  return (
    <>
      <PageTitle>Approvals</PageTitle>
      <Text className="muted" size="sm">
        Held runs and workflow approval steps waiting for a decision. An admin decides, never an agent token.
      </Text>
      <Show loaded={items}>
        {(data) =>
          data.items.length === 0 ? (
            <Text className="empty section">Nothing waits for a decision.</Text>
          ) : (
            <div className="cards section">
              {data.items.map((item) => (
                <ApprovalCard key={item.decision_id} item={item} step={stepById.get(item.decision_id)} onDecided={reload} />
              ))}
            </div>
          )
        }
      </Show>
    </>
  );
}

function ApprovalCard({ item, step, onDecided }: { item: AttentionItem; step?: StepApproval; onDecided: () => void }) {
  const isAdmin = useHasRole('admin');
  const { me } = useSession();
  const isStep = item.approval === 'workflow_step';
  const subject = isStep ? `step ${item.step} of ${item.id}` : `run ${item.id}`;
  const headingId = `approval-${item.decision_id}`;
  return (
    <article className="card" aria-labelledby={headingId}>
      <Group justify="space-between" wrap="wrap">
        <Group gap="xs">
          <Badge color={isStep ? 'grape' : 'orange'} variant="light">{isStep ? 'workflow step' : 'held run'}</Badge>
          <h2 id={headingId} className="approval-title">
            {isStep ? (
              <>
                Step <em>{item.step}</em> of workflow <Link to={`/runs/${item.id}`} className="id">{item.id}</Link>
              </>
            ) : (
              <Link to={`/runs/${item.id}`} className="id">{item.id}</Link>
            )}
          </h2>
        </Group>
        <Text size="sm" className="muted">
          waiting since <When at={item.since} />
        </Text>
      </Group>
      <Fields>
        <Field label="Requested by">{item.requested_by}</Field>
        {isStep ? <StepDetail item={item} step={step} /> : <HeldRunDetail runId={item.decision_id} />}
        <Field label="Who may decide">{item.who_may_approve}</Field>
      </Fields>
      <Group mt="md" gap="sm">
        {isAdmin && me.kind !== 'agent' ? (
          <DecisionButtons decisionId={item.decision_id} stateDigest={item.state_digest} subject={subject} onDecided={onDecided} />
        ) : (
          <Text size="sm">You may not decide this: {item.who_may_approve}.</Text>
        )}
      </Group>
    </article>
  );
}

function StepDetail({ item, step }: { item: AttentionItem; step?: StepApproval }) {
  return (
    <>
      {step?.description && <Field label="Asks">{step.description}</Field>}
      <Field label="On approve, runs">{item.on_approve?.length ? item.on_approve.join(', ') : 'nothing more'}</Field>
      <Field label="On deny, runs">{item.on_deny?.length ? item.on_deny.join(', ') : 'nothing (the workflow fails)'}</Field>
      {step?.waited_behind?.length ? <Field label="Came after">{step.waited_behind.join(', ')}</Field> : null}
      <Field label="Other branches">{item.other_branches_running ? 'still running' : 'paused'}</Field>
      <Field label="Times out">{item.expires_at ? formatTime(item.expires_at) : 'never'}</Field>
      {item.state_digest && <Field label="Digest"><Code>{item.state_digest}</Code></Field>}
    </>
  );
}

function HeldRunDetail({ runId }: { runId: string }) {
  const run = useFetch<{ tool: string; command: string; state_digest: string; hold: Record<string, unknown> | null; queue: string; extra_vars: unknown }>(`/v1/runs/${encodeURIComponent(runId)}`);
  if (!run.data) return run.error ? <ErrorNote error={run.error} /> : <Loading />;
  const r = run.data;
  return (
    <>
      <Field label="Would run">
        <Text size="sm">{r.tool}{r.queue ? ` on queue ${r.queue}` : ''}</Text>
        <Code block className="command">{r.command}</Code>
      </Field>
      {r.hold && <Field label="Held because">{holdReasons(r.hold)}</Field>}
      <Field label="Digest"><Code>{r.state_digest}</Code></Field>
    </>
  );
}
