import { Badge, Group, Text } from '@mantine/core';
import { Link } from '../router';
import { PageTitle, Show, When, duration, useFetch } from '../ui';

interface Item {
  id: string;
  kind: string;
  status: string;
  blocker: string;
  badges: string[];
  reason: string;
  who_can_act: string;
  next: string;
  since: string;
  waiting_seconds: number;
  alerting: boolean;
  requested_by?: string;
  schedule_name?: string;
}

const BLOCKERS: [string, string][] = [
  ['worker_lost', 'Worker lost'],
  ['no_worker', 'No worker'],
  ['approval_needed', 'Approval needed'],
  ['blocked', 'Blocked'],
];

export function AttentionPage() {
  const attention = useFetch<{ items: Item[]; counts: Record<string, number>; thresholds: Record<string, number> }>('/v1/attention?limit=1000', 5000);
  return (
    <>
      <PageTitle>Attention</PageTitle>
      <Text size="sm" className="muted">Unfinished work under its one main blocker, longest waiting first.</Text>
      <Show loaded={attention}>
        {(data) => (
          <>
            {BLOCKERS.map(([blocker, title]) => {
              const items = data.items.filter((i) => i.blocker === blocker);
              return (
                <section key={blocker} className="section" aria-labelledby={`blocker-${blocker}`}>
                  <Group gap="xs">
                    <h2 id={`blocker-${blocker}`}>{title}</h2>
                    <Badge variant="light" color={items.length ? 'orange' : 'gray'}>{data.counts[blocker] ?? 0}</Badge>
                    <Text size="xs" className="muted">alerts after {data.thresholds[blocker] ? duration(data.thresholds[blocker]) : 'never'}</Text>
                  </Group>
                  {items.length === 0 ? (
                    <Text size="sm" className="muted">Nothing.</Text>
                  ) : (
                    <div className="cards">
                      {items.map((item) => (
                        <article key={item.id} className="card">
                          <Group justify="space-between" wrap="wrap">
                            <Group gap="xs">
                              {item.kind === 'schedule' ? <Text fw={600}>Schedule {item.schedule_name}</Text> : <Link to={`/runs/${item.id}`} className="id">{item.id}</Link>}
                              <Badge variant="outline">{item.kind}</Badge>
                              {item.badges.map((b) => <Badge key={b} variant="light" color="gray">{b.replace('_', ' ')}</Badge>)}
                              {item.alerting && <Badge color="red">alerting</Badge>}
                            </Group>
                            <Text size="sm" className="muted">waiting {duration(item.waiting_seconds)} (since <When at={item.since} />)</Text>
                          </Group>
                          <Text size="sm" mt="xs">{item.reason}</Text>
                          <Text size="sm"><strong>Who can act:</strong> {item.who_can_act}</Text>
                          <Text size="sm"><strong>Next:</strong> <span className="mono">{item.next}</span></Text>
                          {blocker === 'approval_needed' && <Link to="/approvals">Decide on the approvals page</Link>}
                        </article>
                      ))}
                    </div>
                  )}
                </section>
              );
            })}
          </>
        )}
      </Show>
    </>
  );
}
