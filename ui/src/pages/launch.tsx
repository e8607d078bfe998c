import { Badge, Button, Checkbox, Code, Group, NativeSelect, NumberInput, Stack, Text, TextInput, Textarea } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { ApiError, post } from '../api';
import { Link, navigate } from '../router';
import { useHasRole } from '../session';
import { DataTable, ErrorNote, Field, Fields, PageTitle, Show, fieldError, useFetch } from '../ui';

export interface Question {
  var: string;
  type: string;
  label?: string;
  help?: string;
  required?: boolean;
  default?: unknown;
  min?: number;
  max?: number;
  min_length?: number;
  max_length?: number;
  pattern?: string;
  choices?: string[];
}

export interface Template {
  id: string;
  name: string;
  kind: 'job' | 'workflow';
  tool: string | null;
  command: string | null;
  playbook?: string | null;
  survey: Question[] | null;
  steps: { name: string; tool?: string; type?: string }[] | null;
  credentials?: string[];
  selectable_credentials?: string[];
  timeout: number;
  created_by: string;
}

const ALIASES: Record<string, string> = { string: 'text', textarea: 'multiline', password: 'secret', integer: 'int', boolean: 'bool' };
const typeOf = (q: Question) => ALIASES[q.type] ?? q.type;
export const REDACTED = '[redacted]';

export function LaunchPage() {
  const templates = useFetch<{ templates: Template[] }>('/v1/templates');
  const isOperator = useHasRole('operator');
  return (
    <>
      <PageTitle>Launch</PageTitle>
      <section aria-labelledby="templates-title">
        <h2 id="templates-title">Templates and workflows</h2>
        <Show loaded={templates}>
          {(data) => (
            <DataTable<Template>
              label="Templates"
              rows={data.templates}
              rowKey={(t) => t.id}
              empty="No template yet."
              columns={[
                { label: 'Name', render: (t) => <Link to={`/launch/${t.id}`}>{t.name}</Link> },
                { label: 'Kind', render: (t) => <Badge variant="light" color={t.kind === 'workflow' ? 'grape' : 'blue'}>{t.kind}</Badge> },
                { label: 'Tool', render: (t) => t.tool ?? `${t.steps?.length ?? 0} steps` },
                { label: 'Survey', render: (t) => (t.survey?.length ? `${t.survey.length} questions` : 'none') },
                { label: 'Made by', render: (t) => t.created_by },
              ]}
            />
          )}
        </Show>
      </section>
      {isOperator && <AdHocRun />}
    </>
  );
}

function AdHocRun() {
  const [tool, setTool] = useState('bash');
  const [command, setCommand] = useState('');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const run = await post<{ id: string }>('/v1/runs', { tool, command });
      navigate(`/runs/${run.id}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="adhoc-title" className="section card">
      <h2 id="adhoc-title">Run a command</h2>
      <form onSubmit={submit}>
        <Stack>
          <NativeSelect label="Tool" data={['bash', 'python']} value={tool} onChange={(e) => setTool(e.currentTarget.value)} error={fieldError(error, 'tool')} />
          <Textarea label="Command" classNames={{ input: 'mono' }} autosize minRows={3} value={command} onChange={(e) => setCommand(e.currentTarget.value)} error={fieldError(error, 'command')} placeholder="echo hello from Cairn" />
          <ErrorNote error={error} fields={['tool', 'command']} />
          <Group>
            <Button type="submit" loading={busy}>
              Run
            </Button>
          </Group>
        </Stack>
      </form>
    </section>
  );
}

type Answer = string | boolean;

function initialAnswer(q: Question): Answer {
  const type = typeOf(q);
  if (type === 'bool') return q.default === true;
  if (type === 'secret') return '';
  if (q.default === undefined || q.default === null) return '';
  return String(q.default);
}

export function TemplateLaunchPage({ id }: { id: string }) {
  const template = useFetch<Template>(`/v1/templates/${encodeURIComponent(id)}`);
  return <Show loaded={template}>{(t) => <LaunchForm template={t} />}</Show>;
}

function LaunchForm({ template }: { template: Template }) {
  const survey = template.survey ?? [];
  const [answers, setAnswers] = useState<Record<string, Answer>>(() => Object.fromEntries(survey.map((q) => [q.var, initialAnswer(q)])));
  const [picked, setPicked] = useState<string[]>([]);
  const [change, setChange] = useState('');
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const isOperator = useHasRole('operator');

  const set = (name: string, value: Answer) => setAnswers((a) => ({ ...a, [name]: value }));

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    const body: Record<string, unknown> = { answers: collect(survey, answers) };
    if (picked.length) body.credentials = picked;
    if (change) body.change = change;
    try {
      const run = await post<{ id: string }>(`/v1/templates/${encodeURIComponent(template.id)}/launch`, body);
      // Secret answers leave the page with the request: nothing keeps them.
      setAnswers((a) => Object.fromEntries(Object.entries(a).map(([k, v]) => [k, survey.find((q) => q.var === k && typeOf(q) === 'secret') ? '' : v])));
      navigate(`/runs/${run.id}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const fields = survey.map((q) => `answers.${q.var}`);
  return (
    <>
      <PageTitle>Launch {template.name}</PageTitle>
      <div className="two-columns">
        <form onSubmit={submit} className="card" aria-labelledby="survey-title">
          <Stack>
            <h2 id="survey-title">{survey.length ? 'Survey' : 'Launch'}</h2>
            {survey.length === 0 && <Text size="sm">This template asks no questions.</Text>}
            {survey.map((q) => (
              <QuestionField key={q.var} question={q} value={answers[q.var]} onChange={(v) => set(q.var, v)} error={fieldError(error, `answers.${q.var}`)} />
            ))}
            {(template.selectable_credentials ?? []).length > 0 && (
              <Checkbox.Group label="Add credentials" value={picked} onChange={setPicked} error={fieldError(error, 'credentials')}>
                <Stack gap={4} mt={4}>
                  {template.selectable_credentials!.map((c) => (
                    <Checkbox key={c} value={c} label={c} />
                  ))}
                </Stack>
              </Checkbox.Group>
            )}
            <TextInput label="Change label" description="Optional: runs carrying one label are one change (CHG-1042)." value={change} onChange={(e) => setChange(e.currentTarget.value)} error={fieldError(error, 'change')} />
            <ErrorNote error={error} fields={[...fields, 'credentials', 'change']} />
            {error instanceof ApiError && error.field && fields.includes(error.field) && (
              <Text size="sm" c="red" role="alert">
                Check the answer marked below: {error.message}
              </Text>
            )}
            <Group>
              <Button type="submit" loading={busy} disabled={!isOperator}>
                Launch
              </Button>
              {!isOperator && <Text size="sm">Launching needs the operator role.</Text>}
            </Group>
          </Stack>
        </form>
        <section className="card" aria-labelledby="what-title">
          <h2 id="what-title">What it runs</h2>
          <Fields>
            <Field label="Kind">{template.kind}</Field>
            {template.kind === 'job' ? (
              <>
                <Field label="Tool">{template.tool}</Field>
                <Field label="Command">
                  <Code block className="command">{template.command ?? (template.playbook ? `playbook ${template.playbook}` : '')}</Code>
                </Field>
              </>
            ) : (
              <Field label="Steps">{(template.steps ?? []).map((s) => `${s.name}${s.type === 'approval' ? ' (approval)' : s.tool ? ` (${s.tool})` : ''}`).join(' → ')}</Field>
            )}
            <Field label="Credentials">{template.credentials?.length ? template.credentials.join(', ') : 'none'}</Field>
            <Field label="Timeout">{template.timeout ? `${template.timeout} s` : 'server default'}</Field>
          </Fields>
        </section>
      </div>
    </>
  );
}

/** The answers to send: a question left empty is left out, so the server uses its default. */
function collect(survey: Question[], answers: Record<string, Answer>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const q of survey) {
    const value = answers[q.var];
    const type = typeOf(q);
    if (type === 'bool') {
      out[q.var] = value === true;
      continue;
    }
    if (value === '' || value === undefined) continue;
    if (type === 'int') {
      const n = Number(value);
      out[q.var] = Number.isFinite(n) && String(value).trim() !== '' ? n : value;
    } else {
      out[q.var] = value;
    }
  }
  return out;
}

function describe(q: Question): string | undefined {
  const parts: string[] = [];
  if (q.help) parts.push(/[.!?]$/.test(q.help) ? q.help : `${q.help}.`);
  const type = typeOf(q);
  if (type === 'int' && (q.min !== undefined || q.max !== undefined)) parts.push(`A whole number${q.min !== undefined ? ` from ${q.min}` : ''}${q.max !== undefined ? ` to ${q.max}` : ''}.`);
  if (q.min_length !== undefined || q.max_length !== undefined) parts.push(`${q.min_length ?? 0} to ${q.max_length ?? '∞'} characters.`);
  if (q.pattern) parts.push(`Must match ${q.pattern}.`);
  if (type === 'secret' && q.default === REDACTED) parts.push('A default is stored; leave empty to use it. Never shown.');
  else if (type === 'secret') parts.push('Never shown.');
  return parts.join(' ') || undefined;
}

function QuestionField({ question: q, value, onChange, error }: { question: Question; value: Answer; onChange: (v: Answer) => void; error?: string }) {
  const type = typeOf(q);
  const label = q.label || q.var;
  const common = { label, description: describe(q), error, required: q.required && (q.default === undefined || q.default === null || q.default === '') };
  switch (type) {
    case 'multiline':
      return <Textarea {...common} autosize minRows={3} value={String(value)} onChange={(e) => onChange(e.currentTarget.value)} />;
    case 'secret':
      // A plain password field with no "show" toggle: what is typed is never echoed.
      return <TextInput {...common} type="password" autoComplete="off" value={String(value)} onChange={(e) => onChange(e.currentTarget.value)} />;
    case 'int':
      return <NumberInput {...common} allowDecimal={false} min={q.min} max={q.max} value={value === '' ? '' : Number(value)} onChange={(v) => onChange(v === '' ? '' : String(v))} />;
    case 'choice':
      return (
        <NativeSelect
          {...common}
          data={[{ value: '', label: common.required ? 'Choose one…' : '(no answer)' }, ...(q.choices ?? []).map((c) => ({ value: c, label: c }))]}
          value={String(value)}
          onChange={(e) => onChange(e.currentTarget.value)}
        />
      );
    case 'bool':
      return <Checkbox label={label} description={describe(q)} error={error} checked={value === true} onChange={(e) => onChange(e.currentTarget.checked)} />;
    default:
      return <TextInput {...common} value={String(value)} onChange={(e) => onChange(e.currentTarget.value)} />;
  }
}
