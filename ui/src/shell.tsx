// The frame around every page: navigation (a sidebar, or a menu on a phone), who is signed in, the page.
import { Badge, Burger, Button, Text } from '@mantine/core';
import { useEffect, useState, type ReactNode } from 'react';
import { Link, match, useRoute } from './router';
import { useHasRole, useSession } from './session';
import { useFetch } from './ui';
import { RunsPage } from './pages/runs';
import { RunPage } from './pages/run';
import { ApprovalsPage } from './pages/approvals';
import { LaunchPage, TemplateLaunchPage } from './pages/launch';
import { SchedulesPage } from './pages/schedules';
import { TriggersPage } from './pages/triggers';
import { InventoriesPage, InventoryPage } from './pages/inventories';
import { ProjectPage, ProjectsPage } from './pages/projects';
import { CredentialsPage } from './pages/credentials';
import { NotificationsPage } from './pages/notifications';
import { AttentionPage } from './pages/attention';
import { AuditPage } from './pages/audit';
import { AdminPage } from './pages/admin';

interface NavItem {
  to: string;
  label: string;
  adminOnly?: boolean;
}

const NAV: NavItem[] = [
  { to: '/runs', label: 'Runs' },
  { to: '/approvals', label: 'Approvals' },
  { to: '/launch', label: 'Launch' },
  { to: '/attention', label: 'Attention' },
  { to: '/schedules', label: 'Schedules' },
  { to: '/triggers', label: 'Triggers' },
  { to: '/inventories', label: 'Inventories' },
  { to: '/projects', label: 'Projects' },
  { to: '/credentials', label: 'Credentials' },
  { to: '/notifications', label: 'Notifications' },
  { to: '/audit', label: 'Audit' },
  { to: '/admin', label: 'Admin', adminOnly: true },
];

function page(path: string): { node: ReactNode; title: string } {
  let p: Record<string, string> | null;
  if (path === '/' || path === '/runs') return { node: <RunsPage />, title: 'Runs' };
  if ((p = match('/runs/:id', path))) return { node: <RunPage id={p.id} key={p.id} />, title: `Run ${p.id}` };
  if (path === '/approvals') return { node: <ApprovalsPage />, title: 'Approvals' };
  if (path === '/launch') return { node: <LaunchPage />, title: 'Launch' };
  if ((p = match('/launch/:id', path))) return { node: <TemplateLaunchPage id={p.id} key={p.id} />, title: 'Launch' };
  if (path === '/attention') return { node: <AttentionPage />, title: 'Attention' };
  if (path === '/schedules') return { node: <SchedulesPage />, title: 'Schedules' };
  if (path === '/triggers') return { node: <TriggersPage />, title: 'Triggers' };
  if (path === '/inventories') return { node: <InventoriesPage />, title: 'Inventories' };
  if ((p = match('/inventories/:id', path))) return { node: <InventoryPage id={p.id} key={p.id} />, title: 'Inventory' };
  if (path === '/projects') return { node: <ProjectsPage />, title: 'Projects' };
  if ((p = match('/projects/:id', path))) return { node: <ProjectPage id={p.id} key={p.id} />, title: 'Project' };
  if (path === '/credentials') return { node: <CredentialsPage />, title: 'Credentials' };
  if (path === '/notifications') return { node: <NotificationsPage />, title: 'Notifications' };
  if (path === '/audit') return { node: <AuditPage />, title: 'Audit' };
  if (path === '/admin') return { node: <AdminPage />, title: 'Admin' };
  return { node: <Text>There is no console page at {path}.</Text>, title: 'Not found' };
}

export function Shell() {
  const { me, signOut } = useSession();
  const { path } = useRoute();
  const [menuOpen, setMenuOpen] = useState(false);
  const isAdmin = useHasRole('admin');
  const attention = useFetch<{ counts: Record<string, number> }>('/v1/attention?limit=1', 15_000);
  const waiting = attention.data?.counts?.approval_needed ?? 0;
  const { node, title } = page(path);

  useEffect(() => {
    document.title = `${title} · Cairn`;
    setMenuOpen(false);
  }, [path, title]);

  const active = (to: string) => path === to || path.startsWith(`${to}/`) || (to === '/runs' && path === '/');

  return (
    <div className="shell">
      <a className="skip-link" href="#main">Skip to the page</a>
      <header className="topbar">
        <Burger opened={menuOpen} onClick={() => setMenuOpen((o) => !o)} aria-label={menuOpen ? 'Close the menu' : 'Open the menu'} aria-controls="nav" aria-expanded={menuOpen} className="burger" size="sm" />
        <Link to="/runs" className="brand" aria-label="Cairn home">
          <span className="brand-mark" aria-hidden />
          Cairn
        </Link>
        <div className="who">
          <Text size="sm" span>
            {me.username} <Badge variant="outline" size="sm">{me.role}</Badge>
          </Text>
          <Button variant="subtle" size="xs" onClick={() => void signOut()}>
            Sign out
          </Button>
        </div>
      </header>
      <nav id="nav" aria-label="Console" className={menuOpen ? 'nav open' : 'nav'}>
        <ul>
          {NAV.filter((item) => !item.adminOnly || isAdmin).map((item) => (
            <li key={item.to}>
              <Link to={item.to} aria-current={active(item.to) ? 'page' : undefined} className={active(item.to) ? 'active' : undefined}>
                {item.label}
                {item.to === '/approvals' && waiting > 0 && (
                  <Badge size="sm" color="orange" className="nav-count" aria-label={`${waiting} waiting`}>
                    {waiting}
                  </Badge>
                )}
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" className="main" tabIndex={-1}>
        {node}
      </main>
    </div>
  );
}
