import { Button, Code, Group, Stack, Text, TextInput } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { del, get, post, put, query } from '../api';
import { Link, navigate } from '../router';
import { useHasRole } from '../session';
import { DataTable, ErrorNote, Field, Fields, Loading, PageTitle, Show, StatusBadge, When, fieldError, useFetch } from '../ui';

interface Project {
  id: string;
  name: string;
  url: string;
  branch: string | null;
  credential_id: string | null;
  status: string;
  commit: string | null;
  last_error: string | null;
  update_pending: boolean;
  last_updated_at: string | null;
  org_id: string | null;
}

export function ProjectsPage() {
  const projects = useFetch<{ projects: Project[] }>('/v1/projects', 10_000);
  const isOperator = useHasRole('operator');
  return (
    <>
      <PageTitle>Projects</PageTitle>
      <Show loaded={projects}>
        {(data) => (
          <DataTable<Project>
            label="Projects"
            rows={data.projects}
            rowKey={(p) => p.id}
            empty="No project yet."
            columns={[
              { label: 'Name', render: (p) => <Link to={`/projects/${p.id}`}>{p.name}</Link> },
              { label: 'Repository', render: (p) => <span className="mono">{p.url}</span> },
              { label: 'Branch', render: (p) => p.branch ?? 'default' },
              { label: 'Status', render: (p) => <StatusBadge status={p.status} /> },
              { label: 'Commit', render: (p) => <span className="id">{p.commit?.slice(0, 12) ?? '—'}</span> },
              { label: 'Updated', render: (p) => <When at={p.last_updated_at} /> },
            ]}
          />
        )}
      </Show>
      {isOperator && <NewProject />}
    </>
  );
}

function NewProject() {
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [branch, setBranch] = useState('');
  const [error, setError] = useState<unknown>();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    try {
      const project = await post<Project>('/v1/projects', { name, url, branch: branch || null });
      navigate(`/projects/${project.id}`);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form onSubmit={submit} className="card section" aria-labelledby="new-project-title">
      <Stack>
        <h2 id="new-project-title">New project</h2>
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} error={fieldError(error, 'name')} />
        <TextInput label="Repository URL" description="https://, ssh://, file:// or an absolute path" required value={url} onChange={(e) => setUrl(e.currentTarget.value)} error={fieldError(error, 'url')} />
        <TextInput label="Branch or tag" description="Empty for the remote's default branch" value={branch} onChange={(e) => setBranch(e.currentTarget.value)} error={fieldError(error, 'branch')} />
        <ErrorNote error={error} fields={['name', 'url', 'branch']} />
        <Group>
          <Button type="submit">Save and clone</Button>
        </Group>
      </Stack>
    </form>
  );
}

interface FileEntry {
  path: string;
  type: 'file' | 'dir' | 'symlink';
  size: number;
}

export function ProjectPage({ id }: { id: string }) {
  const project = useFetch<Project>(`/v1/projects/${encodeURIComponent(id)}`, 5000);
  const isOperator = useHasRole('operator');
  const [error, setError] = useState<unknown>();
  const update = async (p: Project) => {
    setError(undefined);
    try {
      await put(`/v1/projects/${p.id}`, { name: p.name, url: p.url, branch: p.branch, credential_id: p.credential_id, org_id: p.org_id });
      await project.reload();
    } catch (err) {
      setError(err);
    }
  };
  const remove = async (p: Project) => {
    if (!window.confirm(`Delete the project ${p.name} and its checkout?`)) return;
    try {
      await del(`/v1/projects/${p.id}`);
      navigate('/projects');
    } catch (err) {
      setError(err);
    }
  };
  return (
    <Show loaded={project}>
      {(p) => (
        <>
          <PageTitle
            actions={
              isOperator && (
                <>
                  <Button variant="light" onClick={() => void update(p)}>Update from git</Button>
                  <Button variant="light" color="red" onClick={() => void remove(p)}>Delete project</Button>
                </>
              )
            }
          >
            {p.name}
          </PageTitle>
          <ErrorNote error={error} />
          <div className="card">
            <Fields>
              <Field label="Repository"><span className="mono">{p.url}</span></Field>
              <Field label="Branch">{p.branch ?? "the remote's default"}</Field>
              <Field label="Status"><StatusBadge status={p.status} />{p.update_pending ? ' (an update is owed)' : ''}</Field>
              <Field label="Commit"><Code>{p.commit ?? '—'}</Code></Field>
              {p.last_error && <Field label="Last error">{p.last_error}</Field>}
              <Field label="Credential">{p.credential_id ?? 'none'}</Field>
            </Fields>
          </div>
          {p.commit ? <FileBrowser projectId={p.id} /> : <Text className="section">No checkout yet; files appear after the first successful update.</Text>}
        </>
      )}
    </Show>
  );
}

function FileBrowser({ projectId }: { projectId: string }) {
  const tree = useFetch<{ files: FileEntry[]; truncated: boolean; commit: string }>(`/v1/projects/${projectId}/files`);
  const [file, setFile] = useState<{ path: string; content?: string; content_base64?: string; size: number }>();
  const [error, setError] = useState<unknown>();
  const open = async (path: string) => {
    setError(undefined);
    try {
      setFile(await get(`/v1/projects/${projectId}/file${query({ path })}`));
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section className="section two-columns" aria-label="Files of the checkout">
      <div className="card">
        <h2>Files</h2>
        {!tree.data ? (
          tree.error ? <ErrorNote error={tree.error} /> : <Loading />
        ) : (
          <ul className="file-tree mono" aria-label="Checkout tree">
            {tree.data.files.map((f) => (
              <li key={f.path}>
                {f.type === 'file' ? (
                  <button type="button" onClick={() => void open(f.path)}>{f.path}</button>
                ) : (
                  <span className="muted">{f.path}{f.type === 'dir' ? '/' : ' (symlink)'}</span>
                )}
              </li>
            ))}
          </ul>
        )}
        {tree.data?.truncated && <Text size="sm">Only the first 10,000 entries are listed.</Text>}
      </div>
      <div className="card">
        <h2>{file ? file.path : 'Pick a file'}</h2>
        <ErrorNote error={error} />
        {file && (file.content !== undefined ? <Code block className="command" aria-label={`Content of ${file.path}`}>{file.content}</Code> : <Text size="sm">A binary file of {file.size} bytes.</Text>)}
      </div>
    </section>
  );
}
