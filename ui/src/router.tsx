// A small router over the History API: the console's pages live under /ui/, and the server answers
// the console's page for every path there, so a deep link or a reload lands where it was.
import { useEffect, useState, type AnchorHTMLAttributes, type MouseEvent } from 'react';

export const BASE = '/ui';

function current(): { path: string; search: URLSearchParams } {
  const path = window.location.pathname.startsWith(BASE) ? window.location.pathname.slice(BASE.length) || '/' : '/';
  return { path, search: new URLSearchParams(window.location.search) };
}

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((l) => l()));

export function navigate(to: string, replace = false): void {
  const url = `${BASE}${to}`;
  if (replace) window.history.replaceState(null, '', url);
  else window.history.pushState(null, '', url);
  listeners.forEach((l) => l());
  if (!replace) window.scrollTo(0, 0);
}

export function useRoute() {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const listener = () => setRoute(current());
    listeners.add(listener);
    return () => void listeners.delete(listener);
  }, []);
  return route;
}

/** Matches `/runs/:id` style patterns; answers the named parts or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const a = pattern.split('/').filter(Boolean);
  const b = path.split('/').filter(Boolean);
  if (a.length !== b.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < a.length; i++) {
    if (a[i].startsWith(':')) params[a[i].slice(1)] = decodeURIComponent(b[i]);
    else if (a[i] !== b[i]) return null;
  }
  return params;
}

/** Sets the page's query string (filters) without a new history entry. */
export function setSearch(params: Record<string, string | undefined>): void {
  const search = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) search.set(k, v);
  const text = search.toString();
  window.history.replaceState(null, '', `${window.location.pathname}${text ? `?${text}` : ''}`);
}

export function Link({ to, children, ...rest }: { to: string } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const onClick = (event: MouseEvent<HTMLAnchorElement>) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return (
    <a href={`${BASE}${to}`} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}
